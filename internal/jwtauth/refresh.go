package jwtauth

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/lua"
)

// The answers of a refresh that cannot go on: the client logs in again.
var (
	ErrNoRefresh      = apperr.New(apperr.Unauthorized, "no refresh cookie: please log in again")
	ErrRefreshUnknown = apperr.New(apperr.Unauthorized, "refresh token expired or unknown: please log in again")
	ErrRefreshReused  = apperr.New(apperr.Unauthorized, "refresh token already used: every session of this login is revoked, please log in again")
)

// Keys names the jwt mode's Redis keys.
type Keys struct{ Prefix string }

// Family is a refresh family's hash: its user, when it started, the
// current and the previous token's hash, and the sealed current token.
func (k Keys) Family(fid string) string { return k.Prefix + "jwt:family:{" + fid + "}" }

// userFamilies is the set of a user's families, for "log out everywhere".
func (k Keys) userFamilies(uid int64) string {
	return k.Prefix + "jwt:families:{" + strconv.FormatInt(uid, 10) + "}"
}

// Revocations is the stream every API instance follows.
func (k Keys) Revocations() string { return k.Prefix + "jwt:revocations" }

// familyRedis is what the families need of Redis.
type familyRedis interface {
	redis.Scripter
	TxPipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
	SMembers(ctx context.Context, key string) *redis.StringSliceCmd
	Del(ctx context.Context, keys ...string) *redis.IntCmd
}

// Families are refresh token families in Redis. A refresh token is
// "<family id>.<secret>"; only the secret's SHA-256 is stored.
type Families struct {
	rdb   familyRedis
	keys  Keys
	ttl   time.Duration
	grace time.Duration
}

// NewFamilies keeps a family ttl after its login (a refresh does not extend
// it), and accepts the previous token again for grace after a rotation.
func NewFamilies(rdb familyRedis, keys Keys, ttl, grace time.Duration) *Families {
	return &Families{rdb: rdb, keys: keys, ttl: ttl, grace: grace}
}

// TTL is a refresh token's lifetime.
func (f *Families) TTL() time.Duration { return f.ttl }

// secretBytes is 256 bits.
const secretBytes = 32

// Start opens a family for user uid and returns its id and first token.
func (f *Families) Start(ctx context.Context, uid int64, now time.Time) (fid, token string, err error) {
	fid = rand.Text()
	secret, err := newSecret()
	if err != nil {
		return "", "", err
	}
	key := f.keys.Family(fid)
	_, err = f.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, "uid", strconv.FormatInt(uid, 10), "created", strconv.FormatInt(now.UnixMilli(), 10), "cur", digest(secret))
		p.PExpire(ctx, key, f.ttl)
		return nil
	})
	if err != nil {
		return "", "", fmt.Errorf("store refresh family: %w", err)
	}
	// The user's set lives in another slot: a second step. A family
	// missing from it (this step failed) still ends with its TTL.
	index := f.keys.userFamilies(uid)
	if _, err := f.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.SAdd(ctx, index, fid)
		p.PExpire(ctx, index, f.ttl)
		return nil
	}); err != nil {
		return "", "", fmt.Errorf("index refresh family: %w", err)
	}
	return fid, fid + "." + secret, nil
}

// Rotation is a successful refresh.
type Rotation struct {
	Family  string
	UserID  int64
	Created time.Time // the family's login
	Token   string    // the new refresh token
}

// Rotate exchanges token for the family's next one.
func (f *Families) Rotate(ctx context.Context, token string) (Rotation, error) {
	fid, secret, ok := splitToken(token)
	if !ok {
		return Rotation{}, ErrRefreshUnknown
	}
	next, err := newSecret()
	if err != nil {
		return Rotation{}, err
	}
	sealed, err := seal(secret, next)
	if err != nil {
		return Rotation{}, err
	}
	res, err := lua.RefreshRotate.Run(ctx, f.rdb, []string{f.keys.Family(fid)},
		digest(secret), digest(next), sealed, f.grace.Milliseconds()).StringSlice()
	if err != nil {
		return Rotation{}, fmt.Errorf("rotate refresh token: %w", err)
	}
	switch res[0] {
	case "unknown":
		return Rotation{}, ErrRefreshUnknown
	case "reused":
		return Rotation{}, ErrRefreshReused
	case "retry":
		if len(res) != 4 {
			return Rotation{}, fmt.Errorf("rotate refresh token: script answered %q", res)
		}
		if next, err = unseal(secret, res[3]); err != nil {
			return Rotation{}, ErrRefreshUnknown
		}
	case "rotated":
	default:
		return Rotation{}, fmt.Errorf("rotate refresh token: script answered %q", res)
	}
	if len(res) < 3 {
		return Rotation{}, fmt.Errorf("rotate refresh token: script answered %q", res)
	}
	uid, err1 := strconv.ParseInt(res[1], 10, 64)
	created, err2 := strconv.ParseInt(res[2], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return Rotation{}, fmt.Errorf("refresh family %s…: %w", fid[:6], err)
	}
	return Rotation{Family: fid, UserID: uid, Created: time.UnixMilli(created), Token: fid + "." + next}, nil
}

// Revoke ends family fid: its refresh tokens are refused from now on.
func (f *Families) Revoke(ctx context.Context, fid string) error {
	if !wellFormedFID(fid) {
		return nil
	}
	if err := f.rdb.Del(ctx, f.keys.Family(fid)).Err(); err != nil {
		return fmt.Errorf("revoke refresh family: %w", err)
	}
	return nil
}

// RevokeUser ends every family of user uid.
func (f *Families) RevokeUser(ctx context.Context, uid int64) error {
	index := f.keys.userFamilies(uid)
	fids, err := f.rdb.SMembers(ctx, index).Result()
	if err != nil {
		return fmt.Errorf("list refresh families: %w", err)
	}
	keys := make([]string, 0, len(fids)+1)
	for _, fid := range fids {
		keys = append(keys, f.keys.Family(fid))
	}
	// One DEL per key: they are in different slots.
	_, err = f.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range append(keys, index) {
			p.Del(ctx, k)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("revoke refresh families: %w", err)
	}
	return nil
}

// FamilyOf is the family id of a refresh token, if it has the form of one.
func FamilyOf(token string) (string, bool) {
	fid, _, ok := splitToken(token)
	return fid, ok
}

func splitToken(token string) (fid, secret string, ok bool) {
	fid, secret, ok = strings.Cut(token, ".")
	if !ok || !wellFormedFID(fid) {
		return "", "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(secret)
	return fid, secret, err == nil && len(raw) == secretBytes
}

// wellFormedFID: rand.Text's 26 base32 characters.
func wellFormedFID(fid string) bool {
	if len(fid) != 26 {
		return false
	}
	for _, c := range fid {
		if !(c >= 'A' && c <= 'Z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

func newSecret() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("refresh token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func digest(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// sealAEAD is AES-256-GCM keyed by the presented token, so the stored copy
// of the next token opens only for whoever holds the previous one: what
// Redis keeps is no more use to a reader than the hashes.
func sealAEAD(secret string) (cipher.AEAD, error) {
	k := sha256.Sum256([]byte("seckill refresh seal\x00" + secret))
	block, err := aes.NewCipher(k[:])
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func seal(secret, next string) (string, error) {
	aead, err := sealAEAD(secret)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.RawStdEncoding.EncodeToString(aead.Seal(nonce, nonce, []byte(next), nil)), nil
}

func unseal(secret, sealed string) (string, error) {
	aead, err := sealAEAD(secret)
	if err != nil {
		return "", err
	}
	raw, err := base64.RawStdEncoding.DecodeString(sealed)
	if err != nil || len(raw) < aead.NonceSize() {
		return "", errors.New("sealed token: malformed")
	}
	next, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], nil)
	if err != nil {
		return "", err
	}
	return string(next), nil
}

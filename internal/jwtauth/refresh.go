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
	"github.com/seckill/seckill/internal/redisconn"
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

// Family is a refresh family's hash: its user, when it started, the user's
// logout generation then, the current and the previous token's hash, the
// hashes of the tokens it retired, and the sealed current token.
func (k Keys) Family(fid string) string { return k.Prefix + "jwt:family:{" + fid + "}" }

// userFamilies is the set of a user's families, for "log out everywhere".
func (k Keys) userFamilies(uid int64) string {
	return k.Prefix + "jwt:families:{" + strconv.FormatInt(uid, 10) + "}"
}

// userLogouts is a user's logout generation, beside the set of families:
// "log out everywhere" raises it in the same script that reads the set.
func (k Keys) userLogouts(uid int64) string {
	return k.Prefix + "jwt:logouts:{" + strconv.FormatInt(uid, 10) + "}"
}

// Revocations is the stream every API instance follows.
func (k Keys) Revocations() string { return k.Prefix + "jwt:revocations" }

// familyRedis is what the families need of Redis.
type familyRedis interface {
	redis.Scripter
	TxPipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
	Get(ctx context.Context, key string) *redis.StringCmd
	HMGet(ctx context.Context, key string, fields ...string) *redis.SliceCmd
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

// keepIndex is how much longer than a family a user's index and logout
// generation are kept: the generation must outlive every family it judges.
const keepIndex = time.Minute

// Start opens a family for user uid and returns its id and first token.
// The family is indexed under its user first, reading the user's logout
// generation, and stored with it second (they live in different slots):
// a "log out everywhere" between the two steps raises the generation, and
// the family is refused at its first refresh.
func (f *Families) Start(ctx context.Context, uid int64, now time.Time) (fid, token string, err error) {
	fid = rand.Text()
	secret, err := newSecret()
	if err != nil {
		return "", "", err
	}
	gen, err := lua.RefreshIndex.Run(ctx, f.rdb, []string{f.keys.userFamilies(uid), f.keys.userLogouts(uid)},
		fid, (f.ttl + keepIndex).Milliseconds()).Int64()
	if err != nil {
		return "", "", fmt.Errorf("index refresh family: %w", err)
	}
	key := f.keys.Family(fid)
	cmds, err := f.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, "uid", strconv.FormatInt(uid, 10), "created", strconv.FormatInt(now.UnixMilli(), 10),
			"cur", digest(secret), "gen", strconv.FormatInt(gen, 10))
		p.PExpire(ctx, key, f.ttl)
		return nil
	})
	if err != nil {
		return "", "", fmt.Errorf("store refresh family: %w", redisconn.TxError(err, cmds))
	}
	return fid, fid + "." + secret, nil
}

// Rotation is a successful refresh.
type Rotation struct {
	Family string
	UserID int64
	Gen    int64  // the user's logout generation at the login
	Token  string // the new refresh token
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
		if len(res) != 5 {
			return Rotation{}, fmt.Errorf("rotate refresh token: script answered %q", res)
		}
		if next, err = unseal(secret, res[4]); err != nil {
			return Rotation{}, ErrRefreshUnknown
		}
	case "rotated":
	default:
		return Rotation{}, fmt.Errorf("rotate refresh token: script answered %q", res)
	}
	if len(res) < 4 {
		return Rotation{}, fmt.Errorf("rotate refresh token: script answered %q", res)
	}
	uid, err1 := strconv.ParseInt(res[1], 10, 64)
	gen, err2 := strconv.ParseInt(res[3], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return Rotation{}, fmt.Errorf("refresh family %s…: %w", fid[:6], err)
	}
	return Rotation{Family: fid, UserID: uid, Gen: gen, Token: fid + "." + next}, nil
}

// Generation is user uid's logout generation: a family stored with a lower
// one was started before a "log out everywhere".
func (f *Families) Generation(ctx context.Context, uid int64) (int64, error) {
	gen, err := f.rdb.Get(ctx, f.keys.userLogouts(uid)).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read logout generation: %w", err)
	}
	return gen, nil
}

// Holder is the family and user of refresh token token if it is the
// family's current or previous token: a logout's proof that the client
// holds the login. ok is false for anything else.
func (f *Families) Holder(ctx context.Context, token string) (fid string, uid int64, ok bool, err error) {
	fid, secret, well := splitToken(token)
	if !well {
		return "", 0, false, nil
	}
	v, err := f.rdb.HMGet(ctx, f.keys.Family(fid), "cur", "prev", "uid").Result()
	if err != nil {
		return "", 0, false, fmt.Errorf("read refresh family: %w", err)
	}
	h := digest(secret)
	if cur, _ := v[0].(string); h != cur {
		if prev, _ := v[1].(string); h != prev {
			return "", 0, false, nil
		}
	}
	s, _ := v[2].(string)
	uid, err = strconv.ParseInt(s, 10, 64)
	if err != nil {
		return "", 0, false, fmt.Errorf("refresh family %s…: uid %q", fid[:6], s)
	}
	return fid, uid, true, nil
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

// RevokeUser ends every family of user uid: its logout generation goes up
// (exact: every family started before is refused at its next refresh),
// then the families it indexed are deleted. A delete that fails leaves a
// family that can no longer refresh; it ends with its TTL.
func (f *Families) RevokeUser(ctx context.Context, uid int64) error {
	fids, err := lua.RefreshLogoutUser.Run(ctx, f.rdb, []string{f.keys.userFamilies(uid), f.keys.userLogouts(uid)},
		(f.ttl + keepIndex).Milliseconds()).StringSlice()
	if err != nil {
		return fmt.Errorf("log out everywhere: %w", err)
	}
	// One DEL per key: they are in different slots. A failed one is not
	// the logout's failure: the raised generation refuses the family.
	_, _ = f.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, fid := range fids {
			p.Del(ctx, f.keys.Family(fid))
		}
		return nil
	})
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

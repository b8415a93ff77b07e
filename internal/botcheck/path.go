package botcheck

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/apperr"
)

// An order path is a token that names no state: version (1 byte), expiry
// (unix ms, 8) and the first 16 bytes of an HMAC-SHA256 over the user,
// the voucher and the expiry, under the deployment's secret; 34 base64url
// characters. Checking it costs no round trip. It is used once in effect:
// it is bound to one buyer and one voucher, of which the gate sells one
// unit per buyer, so a second use answers the first order's id ("already
// bought"), as a client's retry should.
const (
	pathVersion = 1
	pathBytes   = 1 + 8 + 16
	pathLen     = (pathBytes*8 + 5) / 6
)

// secretReloadEvery bounds how often a path that fails its MAC makes the
// instance read the secret again: a Redis that lost the key (a failover)
// has another instance make a new one, and the others follow it.
const secretReloadEvery = time.Second

// ErrUnavailable is a path that cannot be issued or checked now: the
// paths' key is not read yet and Redis does not answer.
var ErrUnavailable = apperr.New(apperr.Unavailable, "order paths are not available right now: try again shortly").Retry(time.Second)

// loadSecret reads the key the paths' MACs are made under, making it when
// no instance has yet. It is read at the first path, not at the start: an
// api starts, unready, while Redis does not answer.
func (s *Store) loadSecret(ctx context.Context) error {
	secret, err := s.rdb.Get(ctx, s.secretKey()).Bytes()
	if errors.Is(err, redis.Nil) {
		fresh := make([]byte, 32)
		if _, err := rand.Read(fresh); err != nil {
			return err
		}
		// Whoever sets it first, every instance reads the same key.
		secret, err = s.rdb.SetArgs(ctx, s.secretKey(), fresh, redis.SetArgs{Mode: "NX", Get: true}).Bytes()
		if errors.Is(err, redis.Nil) {
			secret, err = fresh, nil
		}
	}
	if err != nil {
		return fmt.Errorf("bot check secret: %w", err)
	}
	if len(secret) < 32 {
		return fmt.Errorf("bot check secret in Redis (%s): %d bytes, want 32", s.secretKey(), len(secret))
	}
	s.secret.Store(&secret)
	s.reloadedAt.Store(s.Now().UnixMilli())
	return nil
}

func (s *Store) mac(secret []byte, userID, voucherID int64, expiry int64) []byte {
	var msg [8 + 8 + 8]byte
	binary.BigEndian.PutUint64(msg[0:], uint64(userID))
	binary.BigEndian.PutUint64(msg[8:], uint64(voucherID))
	binary.BigEndian.PutUint64(msg[16:], uint64(expiry))
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("seckill order path\x00"))
	h.Write(msg[:])
	return h.Sum(nil)[:16]
}

func (s *Store) loadedSecret(ctx context.Context) ([]byte, error) {
	if p := s.secret.Load(); p != nil {
		return *p, nil
	}
	s.loading.Lock()
	defer s.loading.Unlock()
	if p := s.secret.Load(); p != nil {
		return *p, nil
	}
	if err := s.loadSecret(ctx); err != nil {
		return nil, ErrUnavailable.Wrap(err)
	}
	return *s.secret.Load(), nil
}

// IssuePath is userID's order path for voucherID, while the sale is open
// (otherwise the gate's answer: not started, ended, no such sale), on a
// sale whose mode issues paths without a challenge.
func (s *Store) IssuePath(ctx context.Context, userID, voucherID int64) (string, time.Time, error) {
	m, err := s.ModeOf(ctx, voucherID)
	if err != nil {
		return "", time.Time{}, err
	}
	if m == Challenge {
		return "", time.Time{}, ErrSolveFirst
	}
	return s.issue(ctx, userID, voucherID)
}

func (s *Store) issue(ctx context.Context, userID, voucherID int64) (string, time.Time, error) {
	if err := s.open(ctx, voucherID); err != nil {
		return "", time.Time{}, err
	}
	secret, err := s.loadedSecret(ctx)
	if err != nil {
		return "", time.Time{}, err
	}
	expiry := s.Now().Add(s.cfg.PathTTL).UnixMilli()
	raw := make([]byte, 0, pathBytes)
	raw = append(raw, pathVersion)
	raw = binary.BigEndian.AppendUint64(raw, uint64(expiry))
	raw = append(raw, s.mac(secret, userID, voucherID, expiry)...)
	s.metrics.pathIssued()
	return base64.RawURLEncoding.EncodeToString(raw), time.UnixMilli(expiry), nil
}

// CheckOrder is nil when userID may order voucherID with path ("" for the
// fixed route): a sale of mode None takes either, the others only a path
// issued to that user for that voucher and not expired. A path given on a
// sale of mode None is checked all the same.
func (s *Store) CheckOrder(ctx context.Context, userID, voucherID int64, path string) error {
	if path == "" {
		m, err := s.ModeOf(ctx, voucherID)
		if err != nil {
			return err
		}
		if m != None {
			s.metrics.refused("missing")
			return ErrNoPath
		}
		return nil
	}
	err := s.verify(ctx, userID, voucherID, path)
	switch {
	case errors.Is(err, ErrPathMalformed):
		s.metrics.refused("malformed")
	case errors.Is(err, ErrPathInvalid):
		s.metrics.refused("invalid")
	case errors.Is(err, ErrPathExpired):
		s.metrics.refused("expired")
	}
	return err
}

// PathUsed counts an order at a path whose buyer already had the sale's
// order: the gate answered it with that order, and took nothing.
func (s *Store) PathUsed() { s.metrics.refused("used") }

func (s *Store) verify(ctx context.Context, userID, voucherID int64, path string) error {
	if !base64URL(path, pathLen) {
		return ErrPathMalformed
	}
	// Of the right shape, anything that is not a path of ours is refused
	// as one not issued: the shape is all a client can be told it got
	// wrong.
	raw, err := base64.RawURLEncoding.DecodeString(path)
	if err != nil || len(raw) != pathBytes || raw[0] != pathVersion {
		return ErrPathInvalid
	}
	expiry := int64(binary.BigEndian.Uint64(raw[1:9]))
	secret, err := s.loadedSecret(ctx)
	if err != nil {
		return err
	}
	if !hmac.Equal(raw[9:], s.mac(secret, userID, voucherID, expiry)) {
		if !s.reloadDue() {
			return ErrPathInvalid
		}
		if err := s.loadSecret(ctx); err != nil {
			// The path is refused as it stands; the next one tries again.
			return ErrPathInvalid
		}
		if secret, err = s.loadedSecret(ctx); err != nil || !hmac.Equal(raw[9:], s.mac(secret, userID, voucherID, expiry)) {
			return ErrPathInvalid
		}
	}
	now := s.Now()
	if now.UnixMilli() >= expiry {
		return ErrPathExpired
	}
	// A path lives PathTTL from its issue: one that claims longer was not
	// issued by us, whatever key made it (a leaked one). The slack is for
	// the instances' clocks.
	if expiry > now.Add(s.cfg.PathTTL+pathClockSlack).UnixMilli() {
		return ErrPathInvalid
	}
	return nil
}

// pathClockSlack is how far ahead of the verifying instance's clock the
// issuing one's may run.
const pathClockSlack = 2 * time.Second

// reloadDue claims the next read of the secret, at most one a second.
func (s *Store) reloadDue() bool {
	last := s.reloadedAt.Load()
	now := s.Now().UnixMilli()
	return now-last >= secretReloadEvery.Milliseconds() && s.reloadedAt.CompareAndSwap(last, now)
}

// base64URL reports whether s is n characters of the base64url alphabet.
func base64URL(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

package botcheck

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"time"

	"github.com/seckill/seckill/internal/apperr"
)

// An order path is a token that names no state: version (1 byte), the
// id of the key it was made under (1), expiry (unix ms, 8) and the first
// 16 bytes of an HMAC-SHA256 over the key id, the user, the voucher and
// the expiry; 35 base64url characters. Checking it costs no round trip.
// It is used once in effect: it is bound to one buyer and one voucher, of
// which the gate sells one unit per buyer, so a second use answers the
// first order's id ("already bought"), as a client's retry should.
const (
	pathVersion = 2
	pathBytes   = 1 + 1 + 8 + 16
	pathLen     = (pathBytes*8 + 5) / 6
)

// An instance reads the keys again when the ones it holds are keysFresh
// old, so a key taken back is refused everywhere within it. A path under
// a key id the instance does not hold (another instance rotated first)
// has it read them again at once, at most every keysRetry. When the
// source does not answer, the keys held serve for keysStale, and then
// nothing does: a key taken back while the source was away must not be
// accepted for long.
const (
	keysFresh = time.Second
	keysRetry = 100 * time.Millisecond
	keysStale = 5 * time.Second
)

// ErrUnavailable is a path that cannot be issued or checked now: the
// paths' keys cannot be read.
var ErrUnavailable = apperr.New(apperr.Unavailable, "order paths are not available right now: try again shortly").Retry(time.Second)

// heldRing is the ring as last read, at read (the instance's clock), and
// when a read last failed since.
type heldRing struct {
	ring   Ring
	ok     bool // ring was read once
	read   time.Time
	failed time.Time
}

// due says whether the keys are read again now: when keysFresh old, or
// keysRetry old if force asks; never within keysRetry of a failed read,
// so that a source that does not answer is not asked by every request.
func (h *heldRing) due(now time.Time, force bool) bool {
	if h == nil {
		return true
	}
	if !h.failed.IsZero() && !now.Before(h.failed) && now.Sub(h.failed) < keysRetry {
		return false
	}
	if now.Before(h.read) {
		return true
	}
	age := now.Sub(h.read)
	return age >= keysFresh || force && age >= keysRetry
}

// usable is the ring held while it is not stale.
func (h *heldRing) usable(now time.Time) (Ring, error) {
	if h == nil || !h.ok || now.Sub(h.read) >= keysStale {
		return Ring{}, ErrUnavailable
	}
	return h.ring, nil
}

// currentRing is the ring, read again when due. A request that finds
// another reading them uses the ring held, while it is not stale; one
// that forces a read (a path under a key id it does not hold, or whose
// MAC failed) waits for it.
func (s *Store) currentRing(ctx context.Context, force bool) (Ring, error) {
	h, now := s.ring.Load(), s.Now()
	if !h.due(now, force) {
		return h.usable(now)
	}
	if h != nil && !force && !s.refreshing.TryLock() {
		if r, err := h.usable(now); err == nil {
			return r, nil
		}
		s.refreshing.Lock()
	} else if h == nil || force {
		s.refreshing.Lock()
	}
	defer s.refreshing.Unlock()
	h, now = s.ring.Load(), s.Now()
	if !h.due(now, force) {
		return h.usable(now)
	}
	ring, err := s.keys.Ring(ctx)
	if err != nil {
		failed := &heldRing{failed: now}
		if h != nil {
			failed.ring, failed.ok, failed.read = h.ring, h.ok, h.read
		}
		s.ring.Store(failed)
		if r, err := failed.usable(now); err == nil {
			return r, nil
		}
		return Ring{}, ErrUnavailable.Wrap(err)
	}
	s.ring.Store(&heldRing{ring: ring, ok: true, read: now})
	return ring, nil
}

func (s *Store) mac(k Key, userID, voucherID int64, expiry int64) []byte {
	var msg [1 + 8 + 8 + 8]byte
	msg[0] = k.ID
	binary.BigEndian.PutUint64(msg[1:], uint64(userID))
	binary.BigEndian.PutUint64(msg[9:], uint64(voucherID))
	binary.BigEndian.PutUint64(msg[17:], uint64(expiry))
	h := hmac.New(sha256.New, k.Secret)
	h.Write([]byte("seckill order path\x00"))
	h.Write(msg[:])
	return h.Sum(nil)[:16]
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
	ring, err := s.currentRing(ctx, false)
	if err != nil {
		return "", time.Time{}, err
	}
	expiry := s.Now().Add(s.cfg.PathTTL).UnixMilli()
	raw := make([]byte, 0, pathBytes)
	raw = append(raw, pathVersion, ring.Current.ID)
	raw = binary.BigEndian.AppendUint64(raw, uint64(expiry))
	raw = append(raw, s.mac(ring.Current, userID, voucherID, expiry)...)
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
	id, expiry := raw[1], int64(binary.BigEndian.Uint64(raw[2:10]))
	ring, err := s.currentRing(ctx, false)
	if err != nil {
		return err
	}
	k, ok := ring.Key(id)
	if !ok {
		// A key made since this instance read them, or one taken back.
		if ring, err = s.currentRing(ctx, true); err != nil {
			return err
		}
		if k, ok = ring.Key(id); !ok {
			return ErrPathInvalid
		}
	}
	if !hmac.Equal(raw[10:], s.mac(k, userID, voucherID, expiry)) {
		// A key made since under an id this instance holds for an older
		// one (the ring was deleted and made again): read the keys again.
		if ring, err = s.currentRing(ctx, true); err != nil {
			return err
		}
		if k, ok = ring.Key(id); !ok || !hmac.Equal(raw[10:], s.mac(k, userID, voucherID, expiry)) {
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

package jwtauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// revocationRedis is what the revocation feed needs of Redis.
type revocationRedis interface {
	XAdd(ctx context.Context, a *redis.XAddArgs) *redis.StringCmd
	XRange(ctx context.Context, stream, start, stop string) *redis.XMessageSliceCmd
	XRead(ctx context.Context, a *redis.XReadArgs) *redis.XStreamSliceCmd
}

// Revocations are the revoked refresh families (a logout, a reused refresh
// token) and users ("log out everywhere", a deleted user), kept in every API
// instance so that checking an access token costs no round trip. Each
// revocation is an entry of one Redis stream; every instance follows it
// with a blocking XREAD from the last entry it has, so one that was
// disconnected (Redis restarting, failing over) reads what it missed when
// it reconnects: unlike pub/sub, nothing is lost to a reconnect. An entry
// is kept as long as the access tokens it revokes can live, then trimmed.
type Revocations struct {
	rdb    revocationRedis
	key    string
	keep   time.Duration
	block  time.Duration
	logger *slog.Logger

	mu       sync.RWMutex
	last     string               // the last stream id applied
	families map[string]time.Time // revoked family → when its tokens are all expired
	users    map[int64]time.Time  // user → tokens issued before this are revoked
}

// NewRevocations follows the stream at key; keep is how long an access
// token can be accepted after it is issued (its TTL and the leeway).
// go-redis does not interrupt a blocking XREAD when its context ends, so
// the block is what a shutdown waits for: half a second, at two idle
// round trips a second.
func NewRevocations(rdb revocationRedis, key string, keep time.Duration, logger *slog.Logger) *Revocations {
	return &Revocations{rdb: rdb, key: key, keep: keep, block: 500 * time.Millisecond, logger: logger, last: "0-0",
		families: map[string]time.Time{}, users: map[int64]time.Time{}}
}

// Load reads every entry still in the stream: an instance checks no token
// before it has them.
func (r *Revocations) Load(ctx context.Context) error {
	msgs, err := r.rdb.XRange(ctx, r.key, "-", "+").Result()
	if err != nil {
		return fmt.Errorf("read the jwt revocations: %w", err)
	}
	r.apply(msgs)
	return nil
}

// Run follows the stream until ctx ends.
func (r *Revocations) Run(ctx context.Context) error {
	sweep := time.NewTicker(time.Minute)
	defer sweep.Stop()
	failing := false
	for ctx.Err() == nil {
		select {
		case now := <-sweep.C:
			r.sweep(now)
		default:
		}
		r.mu.RLock()
		last := r.last
		r.mu.RUnlock()
		streams, err := r.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{r.key, last}, Block: r.block, Count: 1000}).Result()
		switch {
		case errors.Is(err, redis.Nil):
			continue
		case err != nil:
			if ctx.Err() != nil {
				return nil
			}
			if !failing {
				r.logger.Warn("jwt revocations: following the stream failed; revocations made meanwhile apply here when it answers again", "err", err)
				failing = true
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		if failing {
			r.logger.Info("jwt revocations: following the stream again")
			failing = false
		}
		for _, s := range streams {
			r.apply(s.Messages)
		}
	}
	return nil
}

// RevokeFamily revokes every access token of family fid.
func (r *Revocations) RevokeFamily(ctx context.Context, fid string, now time.Time) error {
	return r.add(ctx, now, "f", fid)
}

// RevokeUser revokes every access token of user uid issued before now.
func (r *Revocations) RevokeUser(ctx context.Context, uid int64, now time.Time) error {
	return r.add(ctx, now, "u", strconv.FormatInt(uid, 10))
}

func (r *Revocations) add(ctx context.Context, now time.Time, kind, id string) error {
	values := map[string]any{kind: id, "at": strconv.FormatInt(now.UnixMilli(), 10)}
	if _, err := r.rdb.XAdd(ctx, &redis.XAddArgs{
		Stream: r.key, Values: values,
		// Older entries revoke only tokens that have expired since.
		MinID: strconv.FormatInt(now.Add(-r.keep).UnixMilli(), 10) + "-0", Approx: true,
	}).Result(); err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	// Applied here at once, without its id: the follower must still read
	// the entries before it, and reads this one again (applying is
	// idempotent).
	r.apply([]redis.XMessage{{Values: values}})
	return nil
}

func (r *Revocations) apply(msgs []redis.XMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		if m.ID != "" {
			r.last = m.ID
		}
		atMs, err := strconv.ParseInt(str(m.Values["at"]), 10, 64)
		if err != nil {
			r.logger.Warn("jwt revocations: an entry without a time, skipped", "id", m.ID)
			continue
		}
		at := time.UnixMilli(atMs)
		if fid := str(m.Values["f"]); fid != "" {
			r.families[fid] = at.Add(r.keep)
		}
		if uid, err := strconv.ParseInt(str(m.Values["u"]), 10, 64); err == nil {
			if at.After(r.users[uid]) {
				r.users[uid] = at
			}
		}
	}
}

func str(v any) string { s, _ := v.(string); return s }

func (r *Revocations) sweep(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for fid, until := range r.families {
		if now.After(until) {
			delete(r.families, fid)
		}
	}
	for uid, at := range r.users {
		if now.After(at.Add(r.keep)) {
			delete(r.users, uid)
		}
	}
}

// Revoked reports whether an access token of family fid, for user uid,
// issued at iat, has been revoked.
func (r *Revocations) Revoked(fid string, uid int64, iat time.Time) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if _, ok := r.families[fid]; ok {
		return true
	}
	cutoff, ok := r.users[uid]
	return ok && iat.Before(cutoff)
}

// UserCutoff is when user uid was last logged out everywhere, if within the
// kept window.
func (r *Revocations) UserCutoff(uid int64) (time.Time, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.users[uid]
	return t, ok
}

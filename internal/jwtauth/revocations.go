package jwtauth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/internal/redisconn"
	"github.com/seckill/seckill/lua"
)

// revocationRedis is what the revocation feed needs of Redis.
type revocationRedis interface {
	redis.Scripter
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
//
// A revocation that cannot be written (Redis failing over) is applied here
// at once and written by the follower as soon as Redis answers; an
// instance whose follower has not read the feed for StaleAfter reports
// itself not ready (Fresh), since it would accept tokens revoked elsewhere.
type Revocations struct {
	rdb    revocationRedis
	key    string
	keep   time.Duration
	block  time.Duration
	logger *slog.Logger
	// StaleAfter is how long the follower may go without a read before
	// Fresh fails; zero: 10 s.
	StaleAfter time.Duration
	// Now is the clock of Fresh; nil: time.Now.
	Now func() time.Time

	// FailoverGrace is how much longer than StaleAfter the follower may go
	// without a read while its reads fail because the feed's Redis cannot
	// be reached (a master failing over, a cluster without quorum); zero:
	// 30 s. While the feed's master fails over no instance can read the
	// feed or add to it, and taking every api out of its balancer at once
	// would stop the sale and protect nobody. A partition of this
	// instance alone looks the same from here: it then accepts a token
	// revoked elsewhere for the grace longer (docs/sessions.md).
	FailoverGrace time.Duration

	following   atomic.Bool
	loaded      atomic.Bool  // the feed was read whole once
	lastRead    atomic.Int64 // unix ns of the last successful read
	unreachable atomic.Bool  // the last read failed for want of Redis

	mu       sync.RWMutex
	last     string               // the last stream id applied
	families map[string]time.Time // revoked family → when its tokens are all expired
	users    map[int64]time.Time  // user → tokens issued before this are revoked
	unsent   []map[string]any     // revocations applied here, not yet in the feed
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

// ErrNotLoaded refuses a token checked before the feed was read whole: it
// might be revoked.
var ErrNotLoaded = apperr.New(apperr.Unavailable, "sessions are starting: try again in a moment").Retry(time.Second)

// Load reads every entry still in the stream: an instance checks no token
// before it has them (Loaded). Run calls it, with retries, before it
// follows.
func (r *Revocations) Load(ctx context.Context) error {
	msgs, err := r.rdb.XRange(ctx, r.key, "-", "+").Result()
	if err != nil {
		return fmt.Errorf("read the jwt revocations: %w", err)
	}
	r.apply(msgs)
	r.lastRead.Store(r.now().UnixNano())
	r.loaded.Store(true)
	return nil
}

// Loaded reports whether the feed was read whole: tokens are checked
// against it only then.
func (r *Revocations) Loaded() bool { return r.loaded.Load() }

// load reads the feed whole, retrying with backoff until it does or ctx
// ends: the api starts while Redis fails over and is ready once it reads.
func (r *Revocations) load(ctx context.Context) error {
	retry := backoff.NewExponentialBackOff()
	retry.InitialInterval, retry.MaxInterval, retry.MaxElapsedTime = 100*time.Millisecond, 2*time.Second, 0
	for failing := false; ; {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := r.Load(lctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			if failing && err == nil {
				r.logger.Info("jwt revocations: read whole; tokens are checked")
			}
			return ctx.Err()
		}
		r.unreachable.Store(redisconn.Unreachable(err))
		if !failing {
			r.logger.Warn("jwt revocations: reading the feed failed; not ready, retrying with backoff", "err", err)
			failing = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(retry.NextBackOff()):
		}
	}
}

func (r *Revocations) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Fresh is the readiness check of an instance that checks tokens against
// the feed: it fails before the feed was read whole, and when the
// follower has not read it for StaleAfter — or, while its reads fail for
// want of Redis, for StaleAfter and FailoverGrace.
func (r *Revocations) Fresh(context.Context) error {
	if !r.loaded.Load() {
		return errors.New("the revocation feed is not read yet: no token is checked before it is")
	}
	stale := cmp.Or(r.StaleAfter, 10*time.Second)
	bound := stale
	if r.unreachable.Load() {
		bound += cmp.Or(r.FailoverGrace, 30*time.Second)
	}
	if since := r.now().Sub(time.Unix(0, r.lastRead.Load())); since > bound {
		return fmt.Errorf("no read of the revocation feed for %s (bound %s): tokens revoked elsewhere would pass here", since.Round(time.Second), bound)
	}
	return nil
}

// Run reads the feed whole (retrying until Redis answers), then follows
// the stream until ctx ends.
func (r *Revocations) Run(ctx context.Context) error {
	if err := r.load(ctx); err != nil {
		return nil // stopped before Redis answered
	}
	r.following.Store(true)
	defer r.following.Store(false)
	sweep := time.NewTicker(time.Minute)
	defer sweep.Stop()
	failing := false
	for ctx.Err() == nil {
		select {
		case now := <-sweep.C:
			r.sweep(now)
		default:
		}
		r.sendUnsent(ctx)
		r.mu.RLock()
		last := r.last
		r.mu.RUnlock()
		streams, err := r.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{r.key, last}, Block: r.block, Count: 1000}).Result()
		switch {
		case errors.Is(err, redis.Nil):
			r.lastRead.Store(r.now().UnixNano())
			r.unreachable.Store(false)
			continue
		case err != nil:
			if ctx.Err() != nil {
				return nil
			}
			r.unreachable.Store(redisconn.Unreachable(err))
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
		r.lastRead.Store(r.now().UnixNano())
		r.unreachable.Store(false)
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
	// Applied here at once, without its id: the follower must still read
	// the entries before it, and reads this one again (applying is
	// idempotent).
	r.apply([]redis.XMessage{{Values: values}})
	err := r.write(ctx, values)
	if err == nil {
		return nil
	}
	if !r.following.Load() {
		return err // seckillctl: no follower to retry it; the operator does
	}
	r.mu.Lock()
	r.unsent = append(r.unsent, values)
	r.mu.Unlock()
	r.logger.Warn("jwt revocations: writing a revocation failed; the follower retries it until it is written", "err", err)
	return nil
}

func (r *Revocations) write(ctx context.Context, values map[string]any) error {
	kind, id := "u", str(values["u"])
	if fid := str(values["f"]); fid != "" {
		kind, id = "f", fid
	}
	if err := lua.Revoke.Run(ctx, r.rdb, []string{r.key}, kind, id, values["at"], r.keep.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	return nil
}

// sendUnsent writes the revocations that failed to be written, in order,
// until one fails again.
func (r *Revocations) sendUnsent(ctx context.Context) {
	for {
		r.mu.RLock()
		if len(r.unsent) == 0 {
			r.mu.RUnlock()
			return
		}
		next := r.unsent[0]
		r.mu.RUnlock()
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := r.write(wctx, next)
		cancel()
		if err != nil {
			return
		}
		r.mu.Lock()
		r.unsent = r.unsent[1:]
		r.mu.Unlock()
		r.logger.Info("jwt revocations: a revocation that had failed is written")
	}
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

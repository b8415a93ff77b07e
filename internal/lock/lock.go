// Package lock is the Redis distributed lock (SET NX PX with an owner
// token, Redlock, fencing tokens, Redisson's watchdog) done right: a
// random owner token; release and extend only by the owner, one Lua
// script each; a TTL; a watchdog that extends the lock while
// the holder works and cancels the holder's context when it cannot;
// bounded retries with backoff and jitter; re-entrancy for the same owner;
// and a fencing token, monotonic per lock, so that a resource can refuse a
// holder whose lock expired while it was paused.
//
// A lock is the wrong tool where one atomic step does the job: the flash
// sale's gate is one Lua script and needs none; a counter is an INCR; a
// row is guarded by a conditional UPDATE. Locks are for work that spans
// several round trips, like rebuilding a cache entry (see package cache,
// whose owner field is this idea inlined).
package lock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/lua"
)

// The outcomes callers branch on.
var (
	ErrNotObtained = apperr.New(apperr.Conflict, "lock: held by someone else")
	ErrNotHeld     = apperr.New(apperr.Conflict, "lock: not held by this owner (expired or taken)")
	// ErrStale is a fenced resource refusing the holder's token: a newer
	// holder has written it. A Lease's work answers it to give the lease
	// up and take it again, under a new token.
	ErrStale = apperr.New(apperr.Conflict, "lock: the resource has seen a newer fencing token")
)

// Options shape an acquire.
type Options struct {
	TTL time.Duration
	// Retry bounds the attempts while the lock is busy: exponential
	// backoff with jitter from RetryMin to RetryMax, for at most RetryFor.
	// Zero RetryFor tries once.
	RetryMin, RetryMax, RetryFor time.Duration
	// Watchdog extends the lock every TTL/3 while it is held.
	Watchdog bool
}

// Client takes locks in one Redis.
type Client struct {
	rdb    redis.Scripter
	prefix string
}

// New is a lock client whose keys start with prefix.
func New(rdb redis.Scripter, prefix string) *Client { return &Client{rdb: rdb, prefix: prefix} }

// Lock is one hold of a named lock.
type Lock struct {
	c     *Client
	name  string
	key   string
	owner string
	ttl   time.Duration
	// Fence is the lock's fencing token: larger for every new holder. A
	// resource that remembers the largest fence it has seen can refuse a
	// write carrying a smaller one.
	Fence int64

	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   func()
	once   sync.Once
}

// keys are lock name's hash and fencing counter, under one hash tag: the
// name's own if it has one (a lock whose token is checked beside other
// keys names their tag, so token and check share a slot and a master),
// else the whole name.
func (c *Client) keys(name string) []string {
	k := c.prefix + "lock:{" + name + "}"
	if _, rest, ok := strings.Cut(name, "{"); ok && strings.Index(rest, "}") > 0 {
		k = c.prefix + "lock:" + name
	}
	return []string{k, k + ":fence"}
}

// FenceKey is where lock name's fencing counter lives.
func (c *Client) FenceKey(name string) string { return c.keys(name)[1] }

// RaiseFence raises lock name's fencing counter to at least floor, so that
// the next holder's token is above it: for a holder that found the
// resource has seen a token at or above its own, which only a counter that
// lost writes hands out (a newer holder would hold the lock).
func (c *Client) RaiseFence(ctx context.Context, name string, floor int64) error {
	if err := lua.LockFenceFloor.Run(ctx, c.rdb, c.keys(name)[1:], floor).Err(); err != nil {
		return fmt.Errorf("lock %s: raise its fencing counter to %d: %w", name, floor, err)
	}
	return nil
}

// Acquire takes the lock name with a new owner token.
func (c *Client) Acquire(ctx context.Context, name string, opt Options) (*Lock, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("lock: owner token: %w", err)
	}
	return c.acquire(ctx, name, hex.EncodeToString(b), opt)
}

// Reenter takes the lock again for its owner (the count goes up; each
// hold is released on its own).
func (l *Lock) Reenter(ctx context.Context, opt Options) (*Lock, error) {
	return l.c.acquire(ctx, l.name, l.owner, opt)
}

func (c *Client) acquire(ctx context.Context, name, owner string, opt Options) (*Lock, error) {
	keys := c.keys(name)
	policy := backoff.NewExponentialBackOff(backoff.WithInitialInterval(max(opt.RetryMin, time.Millisecond)),
		backoff.WithMaxInterval(max(opt.RetryMax, opt.RetryMin, time.Millisecond)), backoff.WithMaxElapsedTime(opt.RetryFor),
		backoff.WithRandomizationFactor(0.5))
	call := rand.Text()
	for {
		res, err := lua.LockAcquire.Run(ctx, c.rdb, keys, owner, opt.TTL.Milliseconds(), call).Int64Slice()
		if err != nil {
			return nil, fmt.Errorf("lock %s: acquire: %w", name, err)
		}
		if res[0] == 1 {
			l := &Lock{c: c, name: name, key: keys[0], owner: owner, ttl: opt.TTL, Fence: res[1]}
			l.ctx, l.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
			l.stop = func() {}
			if opt.Watchdog {
				l.watch()
			}
			return l, nil
		}
		wait := policy.NextBackOff()
		if opt.RetryFor == 0 || wait == backoff.Stop {
			return nil, ErrNotObtained
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// Context is cancelled when the lock is released, or lost: the watchdog
// could not extend it. Work done under the lock should use it.
func (l *Lock) Context() context.Context { return l.ctx }

// Extend sets the lock's TTL again, only if still the owner.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	n, err := lua.LockExtend.Run(ctx, l.c.rdb, []string{l.key}, l.owner, ttl.Milliseconds()).Int64()
	if err != nil {
		return fmt.Errorf("lock: extend: %w", err)
	}
	if n != 1 {
		return ErrNotHeld
	}
	return nil
}

// releaseMemory is how long a released lock remembers its last release, so
// that a retry of that release gets its answer: far longer than a retry.
const releaseMemory = 10 * time.Second

// Release gives up this hold. It returns ErrNotHeld when the lock expired
// and someone else may have it: the caller's work was not protected.
func (l *Lock) Release(ctx context.Context) error {
	l.once.Do(l.stop)
	defer l.cancel(errors.New("lock released"))
	n, err := lua.LockRelease.Run(ctx, l.c.rdb, []string{l.key}, l.owner, rand.Text(), releaseMemory.Milliseconds()).Int64()
	if err != nil {
		return fmt.Errorf("lock: release: %w", err)
	}
	if n < 0 {
		return ErrNotHeld
	}
	return nil
}

// watch extends the lock every TTL/3. When an extension says the lock is
// gone, or none succeeds for a whole TTL, the holder's context is
// cancelled with ErrNotHeld: it must stop acting as the holder.
func (l *Lock) watch() {
	done := make(chan struct{})
	l.stop = func() { close(done) }
	go func() {
		t := time.NewTicker(l.ttl / 3)
		defer t.Stop()
		lastOK := time.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
			err := l.Extend(ctx, l.ttl)
			cancel()
			switch {
			case err == nil:
				lastOK = time.Now()
			case errors.Is(err, ErrNotHeld) || time.Since(lastOK) >= l.ttl:
				l.cancel(fmt.Errorf("%w: the watchdog could not extend it: %v", ErrNotHeld, err))
				return
			}
		}
	}()
}

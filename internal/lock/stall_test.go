package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/testsupport"
)

// stall is longer than the production client's read timeout, so go-redis
// gives up on the reply and sends the script again: both then run.
const stall = 1500 * time.Millisecond

// stallableLocks takes locks in a Redis of the test's own, which it may
// stall, through a client configured as the programs configure theirs
// (timeouts, retries), with a connection open.
func stallableLocks(t *testing.T) (*testsupport.Redis, *lock.Client) {
	r, _ := testsupport.MustPrivateRedis(t)
	return r, lock.New(testsupport.MustProductionClient(t, r.Addr), r.Prefix)
}

// A re-entry that Redis runs twice must count once: after both holds are
// released, the lock is free.
func TestReentryCountsOnceWhenRedisStalls(t *testing.T) {
	r, c := stallableLocks(t)
	ctx := context.Background()
	opt := lock.Options{TTL: time.Minute}
	outer, err := c.Acquire(ctx, "job", opt)
	if err != nil {
		t.Fatal(err)
	}
	done := testsupport.StallRedis(t, r.Addr, stall)
	inner, err := outer.Reenter(ctx, opt)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if err := inner.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, "job", opt); err != nil {
		t.Fatalf("after both holds were released: %v; want the lock free", err)
	}
}

// The last release, run twice, is answered "released", not "not held".
func TestLastReleaseWhenRedisStalls(t *testing.T) {
	r, c := stallableLocks(t)
	ctx := context.Background()
	l, err := c.Acquire(ctx, "job", lock.Options{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	done := testsupport.StallRedis(t, r.Addr, stall)
	err = l.Release(ctx)
	<-done
	if err != nil {
		t.Fatalf("release during a stall: %v; want released", err)
	}
}

// The same for a hold whose release Redis runs twice: it must not give up
// the outer hold.
func TestInnerReleaseWhenRedisStalls(t *testing.T) {
	r, c := stallableLocks(t)
	ctx := context.Background()
	opt := lock.Options{TTL: time.Minute}
	outer, err := c.Acquire(ctx, "job", opt)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := outer.Reenter(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	done := testsupport.StallRedis(t, r.Addr, stall)
	err = inner.Release(ctx)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, "job", opt); err == nil {
		t.Fatal("someone else took the lock while its outer hold was still held")
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatalf("outer hold: %v; want released", err)
	}
}

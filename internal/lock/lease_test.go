package lock_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/testsupport"
)

// Two processes run the same lease: one works at a time, and when the
// holder stops (its lease released) the other takes over.
func TestLeaseWorksInOnePlaceAtATime(t *testing.T) {
	r := testsupport.MustRedis(t)
	c := lock.New(r.Client, r.Prefix)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var working, overlaps atomic.Int64
	worked := [2]chan struct{}{make(chan struct{}, 1000), make(chan struct{}, 1000)}
	ctxs := [2]context.Context{}
	cancels := [2]context.CancelFunc{}
	var wg sync.WaitGroup
	for i := range 2 {
		ctxs[i], cancels[i] = context.WithCancel(context.Background())
		defer cancels[i]()
		lease := &lock.Lease{Locks: c, Name: "lease-test", TTL: 2 * time.Second, Interval: 10 * time.Millisecond, Logger: quiet, What: "test lease"}
		wg.Go(func() {
			_ = lease.Run(ctxs[i], func(ctx context.Context) error {
				if working.Add(1) > 1 {
					overlaps.Add(1)
				}
				// A piece of work that takes a while: room for another
				// holder to overlap it, if there could be one.
				time.Sleep(5 * time.Millisecond) // the work's length is the point: room to overlap
				working.Add(-1)
				worked[i] <- struct{}{}
				return nil
			})
		})
	}
	first := -1
	select {
	case <-worked[0]:
		first = 0
	case <-worked[1]:
		first = 1
	case <-time.After(10 * time.Second):
		t.Fatal("no lease holder worked")
	}
	for range 20 {
		<-worked[first]
	}
	other := 1 - first
	select {
	case <-worked[other]:
		t.Fatalf("lease %d worked while lease %d held it", other, first)
	default:
	}
	cancels[first]()
	select {
	case <-worked[other]:
	case <-time.After(10 * time.Second):
		t.Fatalf("lease %d did not take over once lease %d stopped", other, first)
	}
	cancels[other]()
	wg.Wait()
	if n := overlaps.Load(); n > 0 {
		t.Fatalf("%d pieces of work overlapped", n)
	}
}

// A fenced work told its token is stale gives the lease up and takes it
// again under a larger token, at once rather than when the TTL runs out.
func TestAStaleTokenTakesTheLeaseAgain(t *testing.T) {
	r := testsupport.MustRedis(t)
	c := lock.New(r.Client, r.Prefix)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	lease := &lock.Lease{Locks: c, Name: "stale-test", TTL: time.Minute, Interval: 10 * time.Millisecond, Logger: quiet, What: "test lease"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fences := make(chan int64, 100)
	done := make(chan struct{})
	var calls atomic.Int64
	go func() {
		defer close(done)
		_ = lease.RunFenced(ctx, func(ctx context.Context, fence int64) error {
			fences <- fence
			if calls.Add(1) == 1 {
				return fmt.Errorf("the resource says: %w", lock.ErrStale)
			}
			return nil
		})
	}()
	var first int64
	select {
	case first = <-fences:
	case <-time.After(10 * time.Second):
		t.Fatal("the lease never worked")
	}
	select {
	case second := <-fences:
		if second <= first {
			t.Fatalf("after a stale token %d the lease worked under %d", first, second)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the lease was not taken again after a stale token (its TTL is a minute)")
	}
	cancel()
	<-done
}

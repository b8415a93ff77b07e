package jwtauth

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testsupport"
	"github.com/seckill/seckill/internal/user"
)

// An instance whose Redis does not answer when it starts (a master
// failing over, a cluster without quorum) keeps trying to read the
// revocation feed instead of failing its start; until it has read the
// feed whole it is not ready and checks no token (503, not a 401 that
// would log the buyer out, nor a pass for a revoked one); once Redis
// answers it reads it, is ready, and refuses exactly the revoked.
func TestRevocationsAreReadOnceRedisAnswers(t *testing.T) {
	r := testsupport.MustNodeRedis(t)
	ctx := t.Context()
	writer := sessionsOn(t, r, r.Client)
	revoked, err := writer.Start(ctx, user.User{ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := writer.Start(ctx, user.User{ID: 2})
	if err != nil {
		t.Fatal(err)
	}
	c, err := writer.Tokens.Verify(revoked.Access)
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.Revocations.RevokeFamily(ctx, c.Family, time.Now()); err != nil {
		t.Fatal(err)
	}

	proxy := testsupport.MustProxy(t, "") // refuses, as a Redis that is not there
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer rdb.Close()
	dials := &countDials{}
	rdb.AddHook(dials)
	s := sessionsOn(t, r, rdb)
	s.Tokens = writer.Tokens // another instance of the same api: the same keys
	done := make(chan error, 1)
	runCtx, stop := context.WithCancel(ctx)
	go func() { done <- s.Revocations.Run(runCtx) }()

	testsupport.Wait(t, 10*time.Second, "three reads of the feed failed", func() bool { return dials.n.Load() >= 3 })
	if err := s.Revocations.Fresh(ctx); err == nil {
		t.Fatal("ready before the feed was read")
	}
	for _, tok := range []string{revoked.Access, kept.Access} {
		if _, ok, err := s.Load(ctx, tok); ok || !errors.Is(err, ErrNotLoaded) {
			t.Fatalf("a token checked before the feed was read: ok %v, err %v; want ErrNotLoaded", ok, err)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("the follower gave up while Redis did not answer: %v", err)
	default:
	}

	proxy.Switch(r.Addr)
	testsupport.Wait(t, 10*time.Second, "the feed read once Redis answers", s.Revocations.Loaded)
	if err := s.Revocations.Fresh(ctx); err != nil {
		t.Fatalf("not ready after the feed was read: %v", err)
	}
	if _, ok, err := s.Load(ctx, revoked.Access); ok || err != nil {
		t.Fatalf("the revoked family's token: ok %v, err %v; want refused", ok, err)
	}
	if u, ok, err := s.Load(ctx, kept.Access); !ok || err != nil || u.ID != 2 {
		t.Fatalf("a kept family's token: %+v, ok %v, err %v; want user 2", u, ok, err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("the follower stopped with %v", err)
	}
}

// A follower whose reads fail because Redis cannot be reached stays
// fresh for StaleAfter and FailoverGrace (every instance is as blind, and
// a failover takes seconds), then not; one whose reads fail while Redis
// answers (the feed's key no stream) gets no grace. The clock is the
// test's.
func TestFreshGivesAFailoverGraceAndAStuckFollowerNone(t *testing.T) {
	r := testsupport.MustNodeRedis(t)
	ctx := t.Context()
	proxy := testsupport.MustProxy(t, r.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer rdb.Close()
	s := sessionsOn(t, r, rdb)
	rv := s.Revocations
	var ahead atomic.Int64
	rv.Now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	rv.StaleAfter, rv.FailoverGrace = 10*time.Second, 30*time.Second
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go rv.Run(runCtx)
	testsupport.Wait(t, 10*time.Second, "the feed read", rv.Loaded)

	proxy.Cut()
	testsupport.Wait(t, 10*time.Second, "a read failed for want of Redis", rv.unreachable.Load)
	ahead.Store(int64(11 * time.Second))
	if err := rv.Fresh(ctx); err != nil {
		t.Fatalf("11 s without a read while Redis cannot be reached: %v; want ready within the grace", err)
	}
	ahead.Store(int64(41 * time.Second))
	if err := rv.Fresh(ctx); err == nil {
		t.Fatal("41 s without a read: ready beyond StaleAfter and FailoverGrace")
	}

	ahead.Store(0)
	if err := r.Client.Set(ctx, Keys{Prefix: r.Prefix}.Revocations(), "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	proxy.Switch(r.Addr)
	testsupport.Wait(t, 10*time.Second, "a read refused by a Redis that answers", func() bool { return !rv.unreachable.Load() })
	ahead.Store(int64(11 * time.Second))
	if err := rv.Fresh(ctx); err == nil {
		t.Fatal("11 s without a read while Redis answers and refuses: ready, given the failover's grace")
	}
}

// countDials counts a client's connection attempts.
type countDials struct{ n atomic.Int32 }

func (c *countDials) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c.n.Add(1)
		return next(ctx, network, addr)
	}
}
func (c *countDials) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (c *countDials) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

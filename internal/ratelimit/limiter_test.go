package ratelimit_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/internal/ratelimit"
	"github.com/seckill/seckill/internal/testsupport"
)

func TestLimiterAllowsRateThenRecovers(t *testing.T) {
	r := testsupport.MustRedis(t)
	l := ratelimit.New(r.Client, r.Key("rate:"), slog.New(slog.DiscardHandler))
	ctx := context.Background()
	limit := ratelimit.Limit{Rate: 3, Period: time.Second}
	for i := range 3 {
		if err := l.Check(ctx, "k", limit, false, "slow down"); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	err := l.Check(ctx, "k", limit, false, "slow down")
	exceeded, _ := apperr.As(err)
	if !errors.Is(err, ratelimit.ErrExceeded) || exceeded.Code != apperr.RateLimited {
		t.Fatalf("4th request: %v, want ErrExceeded", err)
	}
	if exceeded.RetryAfter <= 0 || exceeded.RetryAfter > time.Second {
		t.Fatalf("RetryAfter = %v, want within the period", exceeded.RetryAfter)
	}
	if err := l.Check(ctx, "other", limit, false, "slow down"); err != nil {
		t.Fatalf("another key shares the count: %v", err)
	}
	time.Sleep(exceeded.RetryAfter + 20*time.Millisecond) // the test is about RetryAfter: Redis's window runs in real time
	if err := l.Check(ctx, "k", limit, false, "slow down"); err != nil {
		t.Fatalf("after RetryAfter: %v", err)
	}
	if err := l.Check(ctx, "k", ratelimit.Limit{}, false, "slow down"); err != nil {
		t.Fatalf("an off limit refused: %v", err)
	}
}

// With Redis unreachable, a fail-open limit lets requests through and a
// fail-closed one refuses them; the outage is logged once, not per request.
func TestLimiterWithoutRedisFailsOpenOrClosedAndLogsOnce(t *testing.T) {
	dead := redis.NewClient(&redis.Options{Addr: testsupport.FreeAddr(t), DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer dead.Close()
	var logs testsupport.SyncBuffer
	l := ratelimit.New(dead, "rate:", slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := context.Background()
	limit := ratelimit.Limit{Rate: 1, Period: time.Second}
	for range 5 {
		if err := l.Check(ctx, "k", limit, true, "x"); err != nil {
			t.Fatalf("fail-open check: %v", err)
		}
		if err := l.Check(ctx, "k", limit, false, "x"); !errors.Is(err, ratelimit.ErrUnavailable) {
			t.Fatalf("fail-closed check: %v, want ErrUnavailable", err)
		}
	}
	if n := strings.Count(logs.String(), "rate limiter cannot reach Redis"); n != 1 {
		t.Fatalf("outage logged %d times, want once:\n%s", n, logs.String())
	}
}

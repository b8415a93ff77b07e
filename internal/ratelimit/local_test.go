package ratelimit_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/internal/ratelimit"
)

func TestLocalLimit(t *testing.T) {
	l := ratelimit.NewLocal()
	limit := ratelimit.Limit{Rate: 5, Period: time.Second}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 50 {
		wg.Go(func() {
			<-start
			if l.Check("seckill:user:1", limit, "from your account") == nil {
				allowed.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if n := allowed.Load(); n != 5 {
		t.Fatalf("%d of 50 concurrent requests allowed on a limit of 5/1s, want the burst of 5", n)
	}
	err := l.Check("seckill:user:1", limit, "from your account")
	e, ok := apperr.As(err)
	if !errors.Is(err, ratelimit.ErrExceeded) || !ok || e.RetryAfter <= 0 || e.RetryAfter > 200*time.Millisecond {
		t.Fatalf("over the limit: %v (retry after %v), want ErrExceeded with at most 200 ms to wait", err, e.RetryAfter)
	}
	if err := l.Check("seckill:user:2", limit, "from your account"); err != nil {
		t.Fatalf("another key: %v", err)
	}
	time.Sleep(e.RetryAfter + 10*time.Millisecond) // the test is about Retry-After: the bucket refills in real time
	if err := l.Check("seckill:user:1", limit, "from your account"); err != nil {
		t.Fatalf("after Retry-After: %v", err)
	}
	if err := l.Check("x", ratelimit.Limit{}, "x"); err != nil {
		t.Fatalf("no limit: %v", err)
	}
}

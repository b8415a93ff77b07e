package gate

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testsupport"
)

// panicOnce is the real client, but its first script call panics after the
// batch behind it has queued: what a bug in a hook or the client would do.
type panicOnce struct {
	redis.Scripter
	once   sync.Once
	queued chan struct{}
}

func (p *panicOnce) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	first := false
	p.once.Do(func() { first = true })
	if first {
		<-p.queued
		panic("a bug in the call")
	}
	return p.Scripter.EvalSha(ctx, sha, keys, args...)
}

// A panic in a batch's call answers its batch and the attempts queued
// behind it, and leaves the bucket free: later attempts are decided.
func TestTriesAfterAPanic(t *testing.T) {
	r := testsupport.MustRedis(t)
	s := NewStore(r.Client, r.Prefix)
	ctx := context.Background()
	if err := s.Warm(ctx, 77, 10, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	keys := LayoutOf(77, 1).bucketKeys(r.Prefix, 0).list()
	p := &panicOnce{Scripter: r.Client, queued: make(chan struct{})}
	var tr tries
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		_, _ = tr.try(ctx, p, keys, 1, "1", "101", "")
	}()
	queuedErr := make(chan error, 1)
	testsupport.Wait(t, 5*time.Second, "the first attempt leads", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return len(tr.queues) == 1
	})
	go func() {
		_, err := tr.try(ctx, p, keys, 1, "2", "102", "")
		queuedErr <- err
	}()
	testsupport.Wait(t, 5*time.Second, "the second attempt queues", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		for _, q := range tr.queues {
			return len(q.waiting) == 1
		}
		return false
	})
	close(p.queued)
	if v := <-panicked; v == nil {
		t.Fatal("the leader's call did not panic")
	}
	if err := <-queuedErr; err == nil {
		t.Fatal("the attempt queued behind the panicked call got no error")
	}
	res, err := tr.try(ctx, p, keys, 1, "3", "103", "")
	if err != nil || len(res) != 4 || res[0] != 0 {
		t.Fatalf("an attempt after the panic: %v, %v; want accepted", res, err)
	}
}

package gate

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/testsupport"
)

// panicOnce is the real client, but its first script call panics, once the
// attempt queued behind it is in the queue: what a bug in a hook or the
// client would do.
type panicOnce struct {
	redis.Scripter
	once    sync.Once
	entered chan struct{} // the first call has begun: its batch is taken
	queued  chan struct{} // the test has queued an attempt behind it
}

func (p *panicOnce) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	first := false
	p.once.Do(func() { first = true })
	if first {
		close(p.entered)
		<-p.queued
		panic("a bug in the call")
	}
	return p.Scripter.EvalSha(ctx, sha, keys, args...)
}

// A panic in a batch's call answers its batch and the attempt queued
// behind it (not sent), and leaves the bucket free: a later attempt is
// decided.
func TestTriesAfterAPanic(t *testing.T) {
	r := testsupport.MustRedis(t)
	s := New(salestate.New(r.Client, r.Prefix))
	ctx := context.Background()
	if err := s.Warm(ctx, 77, 10, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	keys := salestate.BucketKeys(r.Prefix, 77, 1, 0).List()
	p := &panicOnce{Scripter: r.Client, entered: make(chan struct{}), queued: make(chan struct{})}
	var tr tries
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		_, _ = tr.try(ctx, p, keys, 1, "1", "101", "")
	}()
	<-p.entered
	queuedErr := make(chan error, 1)
	go func() {
		_, err := tr.try(ctx, p, keys, 1, "2", "102", "")
		queuedErr <- err
	}()
	testsupport.Wait(t, 5*time.Second, "the second attempt queues behind the call", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		for _, q := range tr.queues {
			return len(q.waiting) == 1
		}
		return false
	})
	close(p.queued)
	select {
	case v := <-panicked:
		if v == nil {
			t.Fatal("the leader's call did not panic")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the leader never returned")
	}
	select {
	case err := <-queuedErr:
		if !errors.Is(err, ErrNotSent) {
			t.Fatalf("the attempt queued behind the panicked call: %v, want not sent", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the attempt queued behind the panicked call was never answered")
	}
	answer := make(chan error, 1)
	go func() {
		res, err := tr.try(ctx, p, keys, 1, "3", "103", "")
		if err == nil && (len(res) != 4 || res[0] != 0) {
			err = errors.New("not accepted")
		}
		answer <- err
	}()
	select {
	case err := <-answer:
		if err != nil {
			t.Fatalf("an attempt after the panic: %v; want accepted", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an attempt after the panic was never answered: the bucket stayed busy")
	}
}

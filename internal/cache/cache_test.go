package cache_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/cache"
	"github.com/seckill/seckill/internal/testsupport"
)

type shop struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

var plain = cache.Strategy{TTL: time.Minute, Jitter: 10 * time.Second, NullTTL: 30 * time.Second, Lease: 2 * time.Second, Wait: 3 * time.Second}

func newCache(r *testsupport.Redis, s cache.Strategy) *cache.Cache[shop] {
	return cache.New[shop](r.Client, "shop", func(id string) string { return r.Key("cache:shop:{" + id + "}") }, s, slog.New(slog.DiscardHandler), nil)
}

// A table stands in for MySQL's rows; queries counts the loads reaching it.
type table struct {
	mu      sync.Mutex
	rows    map[int64]string
	queries atomic.Int64
	delay   time.Duration
}

func (tb *table) loader(id int64) cache.Loader[shop] {
	return func(ctx context.Context) (shop, bool, error) {
		tb.queries.Add(1)
		time.Sleep(tb.delay) // a slow load is the point: the crowd piles up behind it
		tb.mu.Lock()
		defer tb.mu.Unlock()
		name, ok := tb.rows[id]
		return shop{ID: id, Name: name}, ok, nil
	}
}

// 500 concurrent requests for a missing id from two cache instances (two
// processes' worth of singleflight) make one load, and the null marker
// answers the next ones.
func TestMissingKeyLoadsOnceAcrossInstances(t *testing.T) {
	r := testsupport.MustRedis(t)
	tb := &table{rows: map[int64]string{}, delay: 50 * time.Millisecond}
	caches := []*cache.Cache[shop]{newCache(r, plain), newCache(r, plain)}
	var wg sync.WaitGroup
	var found atomic.Int64
	for i := range 500 {
		wg.Go(func() {
			_, ok, err := caches[i%2].Get(context.Background(), "404", tb.loader(404))
			if err != nil {
				t.Error(err)
			}
			if ok {
				found.Add(1)
			}
		})
	}
	wg.Wait()
	if n := tb.queries.Load(); n != 1 {
		t.Fatalf("%d loads for 500 concurrent misses, want 1", n)
	}
	if found.Load() != 0 {
		t.Fatal("a missing row was reported found")
	}
	ttl := r.Client.PTTL(context.Background(), r.Key("cache:shop:{404}")).Val()
	if ttl <= 0 || ttl > plain.NullTTL {
		t.Fatalf("null marker TTL %v, want up to %v", ttl, plain.NullTTL)
	}
	if _, _, err := caches[0].Get(context.Background(), "404", tb.loader(404)); err != nil || tb.queries.Load() != 1 {
		t.Fatalf("the null marker did not answer: %d loads, %v", tb.queries.Load(), err)
	}
}

func TestFoundValueIsCachedWithJitteredTTL(t *testing.T) {
	r := testsupport.MustRedis(t)
	tb := &table{rows: map[int64]string{1: "one"}}
	c := newCache(r, plain)
	for range 3 {
		v, ok, err := c.Get(context.Background(), "1", tb.loader(1))
		if err != nil || !ok || v.Name != "one" {
			t.Fatalf("get: %+v %v %v", v, ok, err)
		}
	}
	if tb.queries.Load() != 1 {
		t.Fatalf("%d loads, want 1", tb.queries.Load())
	}
	ttl := r.Client.PTTL(context.Background(), r.Key("cache:shop:{1}")).Val()
	if ttl < plain.TTL-time.Second || ttl > plain.TTL+plain.Jitter {
		t.Fatalf("TTL %v, want %v plus up to %v", ttl, plain.TTL, plain.Jitter)
	}
}

// One logically expired hot key: 500 concurrent requests are all answered
// with the stale value while exactly one rebuild runs; none waits for it
// (the rebuild is held until every answer is in).
func TestHotKeyServesStaleWhileOneRebuild(t *testing.T) {
	r := testsupport.MustRedis(t)
	hot := cache.Strategy{Logical: time.Minute, NullTTL: time.Second, Lease: 10 * time.Second, Wait: time.Second}
	caches := []*cache.Cache[shop]{newCache(r, hot), newCache(r, hot)}
	tb := &table{rows: map[int64]string{7: "old"}}
	// Warmed by an instance whose clock is a logical TTL behind: the value
	// is expired the moment it is written.
	warm := newCache(r, hot)
	warm.Now = func() time.Time { return time.Now().Add(-hot.Logical - time.Second) }
	if v, _, _ := warm.Get(context.Background(), "7", tb.loader(7)); v.Name != "old" {
		t.Fatalf("warm-up: %+v", v)
	}
	tb.mu.Lock()
	tb.rows[7] = "new"
	tb.mu.Unlock()

	release := make(chan struct{})
	var rebuilds atomic.Int64
	slow := func(ctx context.Context) (shop, bool, error) {
		rebuilds.Add(1)
		<-release
		return tb.loader(7)(ctx)
	}
	var wg sync.WaitGroup
	var stale atomic.Int64
	for i := range 500 {
		wg.Go(func() {
			v, ok, err := caches[i%2].Get(context.Background(), "7", slow)
			if err != nil || !ok {
				t.Errorf("get: %v %v", ok, err)
			}
			if v.Name == "old" {
				stale.Add(1)
			}
		})
	}
	wg.Wait()
	close(release)
	if stale.Load() != 500 {
		t.Fatalf("%d of 500 answered with the stale value before the rebuild finished", stale.Load())
	}
	testsupport.Wait(t, 5*time.Second, "the rebuilt value", func() bool {
		v, _, _ := caches[0].Get(context.Background(), "7", slow)
		return v.Name == "new"
	})
	if n := rebuilds.Load(); n != 1 {
		t.Fatalf("%d rebuilds, want 1", n)
	}
}

// The classic cache-aside race: a reader misses, loads the old row and is slow;
// meanwhile the row is updated and the cache invalidated; then the reader
// writes back. The write-back must be refused, so the next read sees the
// new row.
func TestStaleWriteBackIsRefused(t *testing.T) {
	r := testsupport.MustRedis(t)
	c := newCache(r, plain)
	tb := &table{rows: map[int64]string{9: "old"}}
	loaded, resume := make(chan struct{}), make(chan struct{})
	slowReader := func(ctx context.Context) (shop, bool, error) {
		v, ok, err := tb.loader(9)(ctx)
		close(loaded)
		<-resume
		return v, ok, err
	}
	done := make(chan shop)
	go func() {
		v, _, _ := c.Get(context.Background(), "9", slowReader)
		done <- v
	}()
	<-loaded
	tb.mu.Lock()
	tb.rows[9] = "new"
	tb.mu.Unlock()
	if err := c.Invalidate(context.Background(), "9"); err != nil {
		t.Fatal(err)
	}
	close(resume)
	if v := <-done; v.Name != "old" {
		t.Fatalf("the slow reader got %q", v.Name)
	}
	v, _, err := c.Get(context.Background(), "9", tb.loader(9))
	if err != nil || v.Name != "new" {
		t.Fatalf("after the invalidation the cache says %q (%v), want new", v.Name, err)
	}
}

// A rebuild whose lease ran out is taken over, and the first owner's late
// write-back is refused too. Each step waits on its event: the first owner
// holds the lease (its load began), the second rebuilds (its load ran:
// a take-over, not a read of the first's value), the first has written
// back (its Get returned).
func TestExpiredLeaseIsTakenOver(t *testing.T) {
	r := testsupport.MustRedis(t)
	short := plain
	short.Lease, short.Wait = 100*time.Millisecond, 5*time.Second
	a, b := newCache(r, short), newCache(r, short)
	started, release := make(chan struct{}), make(chan struct{})
	stuck := func(ctx context.Context) (shop, bool, error) {
		close(started)
		<-release
		return shop{ID: 5, Name: "stuck"}, true, nil
	}
	firstDone := make(chan shop, 1)
	go func() {
		v, _, _ := a.Get(context.Background(), "5", stuck)
		firstDone <- v
	}()
	<-started
	var tookOver atomic.Bool
	v, _, err := b.Get(context.Background(), "5", func(context.Context) (shop, bool, error) {
		tookOver.Store(true)
		return shop{ID: 5, Name: "fresh"}, true, nil
	})
	if err != nil || v.Name != "fresh" || !tookOver.Load() {
		t.Fatalf("take-over: %+v %v, rebuilt by the second: %v", v, err, tookOver.Load())
	}
	// Written back by the second as the entry's owner, not loaded past a
	// wait that gave up.
	if raw := r.Client.HGet(context.Background(), r.Key("cache:shop:{5}"), "v").Val(); raw != `{"id":5,"name":"fresh"}` {
		t.Fatalf("entry %q after the take-over", raw)
	}
	close(release)
	if v := <-firstDone; v.Name != "stuck" {
		t.Fatalf("the first owner's caller got %+v, want what it loaded", v)
	}
	raw := r.Client.HGet(context.Background(), r.Key("cache:shop:{5}"), "v").Val()
	if raw != `{"id":5,"name":"fresh"}` {
		t.Fatalf("entry %q after the stuck owner came back", raw)
	}
}

// A shared rebuild does not die with the caller that started it: the
// first caller hangs up (its context cancelled) while the load runs; the
// second caller, sharing the flight, still gets the value, and the value
// is cached.
func TestFlightOutlivesTheCallerThatStartedIt(t *testing.T) {
	r := testsupport.MustRedis(t)
	c := newCache(r, plain)
	release := make(chan struct{})
	var loads atomic.Int64
	load := func(ctx context.Context) (shop, bool, error) {
		loads.Add(1)
		select {
		case <-release:
			return shop{ID: 7, Name: "seven"}, true, nil
		case <-ctx.Done():
			return shop{}, false, ctx.Err()
		}
	}
	first, hangUp := context.WithCancel(context.Background())
	firstErr := make(chan error, 1)
	go func() {
		_, _, err := c.Get(first, "7", load)
		firstErr <- err
	}()
	testsupport.Wait(t, 5*time.Second, "the first caller's load started", func() bool { return loads.Load() == 1 })
	second := make(chan error, 1)
	var got shop
	go func() {
		v, _, err := c.Get(context.Background(), "7", load)
		got = v
		second <- err
	}()
	testsupport.Wait(t, 5*time.Second, "the second caller joined the flight", func() bool { return c.Callers("7") == 2 })
	hangUp()
	if err := <-firstErr; err == nil {
		t.Fatal("the caller that hung up got an answer, want its context's error")
	}
	close(release)
	if err := <-second; err != nil || got.Name != "seven" {
		t.Fatalf("the second caller: %+v %v, want the value (the first caller's hang-up must not fail it)", got, err)
	}
	if loads.Load() != 1 {
		t.Fatalf("%d loads, want the one shared", loads.Load())
	}
	if _, ok, err := c.Get(context.Background(), "7", func(context.Context) (shop, bool, error) {
		return shop{}, false, nil
	}); err != nil || !ok {
		t.Fatalf("the value was not cached: %v %v", ok, err)
	}
}

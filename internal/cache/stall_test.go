package cache_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/cache"
	"github.com/seckill/seckill/internal/testsupport"
)

// A stall past the production client's read timeout makes go-redis send
// the read script again. The caller that took the rebuild in the first run
// must still be the one that rebuilds, not wait for itself until its lease
// runs out, and the value must be cached.
func TestRebuildWhenRedisStalls(t *testing.T) {
	r, _ := testsupport.MustPrivateRedis(t)
	rdb := testsupport.MustProductionClient(t, r.Addr)
	ctx := context.Background()
	s := plain
	s.Lease, s.Wait = time.Minute, 2*time.Second
	c := cache.New[shop](rdb, "shop", func(id string) string { return r.Key("cache:shop:{" + id + "}") }, s, slog.New(slog.DiscardHandler), nil)
	tb := &table{rows: map[int64]string{1: "one"}}

	done := testsupport.StallRedis(t, r.Addr, 1500*time.Millisecond)
	v, ok, err := c.Get(ctx, "1", tb.loader(1))
	<-done
	if err != nil || !ok || v.Name != "one" {
		t.Fatalf("get during a stall: %+v %v %v", v, ok, err)
	}
	if cached := r.Client.HGet(ctx, r.Key("cache:shop:{1}"), "v").Val(); cached == "" {
		t.Fatal("the rebuilt value was not cached")
	}
}

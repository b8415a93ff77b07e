package shop_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/cache"
	"github.com/seckill/seckill/internal/schema"
	"github.com/seckill/seckill/internal/shop"
	"github.com/seckill/seckill/internal/testsupport"
)

func TestFilter(t *testing.T) {
	r, m := testsupport.MustRedis(t), testsupport.MustMySQL(t)
	ctx := context.Background()
	if err := schema.Seed(ctx, m.DB); err != nil {
		t.Fatal(err)
	}
	keys := shop.Keys{Prefix: r.Prefix}
	f := shop.NewFilter(r.Client, m.DB, keys, 10_000, slog.New(slog.DiscardHandler))

	t.Run("NoBitmapLetsEveryIDThrough", func(t *testing.T) {
		if err := f.Add(ctx, 77); err != nil {
			t.Fatal(err)
		}
		if n := r.Keys(t, keys.Filter()+"*"); len(n) != 0 {
			t.Fatalf("an add without a bitmap made keys %v: a bitmap of one id would refuse every other shop", n)
		}
		if maybe, err := f.MayContain(ctx, 123456); err != nil || !maybe {
			t.Fatalf("no bitmap: %v %v, want every id let through", maybe, err)
		}
	})

	// That lookup started a rebuild from MySQL's shops.
	testsupport.Wait(t, 10*time.Second, "a bitmap after a lookup found none", func() bool { return len(r.Keys(t, keys.Filter()+":*")) > 0 })

	t.Run("SeededShopsPassUnknownOnesDoNot", func(t *testing.T) {
		var ids []int64
		rows, err := m.DB.Query("SELECT id FROM tb_shop")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int64
			_ = rows.Scan(&id)
			ids = append(ids, id)
		}
		rows.Close()
		if len(ids) == 0 {
			t.Fatal("no seeded shops")
		}
		for _, id := range ids {
			if maybe, err := f.MayContain(ctx, id); err != nil || !maybe {
				t.Fatalf("seeded shop %d: %v %v, want it let through", id, maybe, err)
			}
		}
		refused := 0
		for id := int64(1_000_000); id < 1_001_000; id++ {
			if maybe, err := f.MayContain(ctx, id); err != nil {
				t.Fatal(err)
			} else if !maybe {
				refused++
			}
		}
		if refused < 990 {
			t.Fatalf("%d of 1000 unknown ids refused, want at least 99 %%", refused)
		}
	})

	t.Run("AddedShopPasses", func(t *testing.T) {
		if maybe, err := f.MayContain(ctx, 4242); err != nil || maybe {
			t.Fatalf("shop 4242 before it was added: %v %v; want absent", maybe, err)
		}
		if err := f.Add(ctx, 4242); err != nil {
			t.Fatal(err)
		}
		if maybe, err := f.MayContain(ctx, 4242); err != nil || !maybe {
			t.Fatalf("added shop: %v %v", maybe, err)
		}
	})

	t.Run("ServiceCreateAddsAndGetRefusesUnknown", func(t *testing.T) {
		plain := cache.Strategy{TTL: time.Minute, NullTTL: time.Minute, Lease: time.Second, Wait: time.Second}
		svc := shop.NewService(m.DB, r.Client, keys, plain, plain, slog.New(slog.DiscardHandler), nil)
		svc.Filter = f
		id, err := svc.Create(ctx, shop.Shop{Name: "new", TypeID: 1})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := svc.Get(ctx, id); err != nil || got.Name != "new" {
			t.Fatalf("a shop just created: %+v %v", got, err)
		}
		before := len(r.Keys(t, r.Prefix+"cache:shop:*"))
		if _, err := svc.Get(ctx, 9_999_999); err != shop.ErrNotFound {
			t.Fatalf("unknown shop: %v", err)
		}
		if after := len(r.Keys(t, r.Prefix+"cache:shop:*")); after != before {
			t.Fatalf("an unknown id left a cache entry (%d keys, was %d)", after, before)
		}
	})
}

package salerepair_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/saletest"
)

// A reconcile paused past its lock's TTL, resuming after a newer
// reconcile (a larger fencing token) rebuilt the sale and orders were
// taken, is refused by Redis at each write: it can neither freeze the
// sale, nor put its stale plan in place, nor unfreeze a sale the newer
// one is rebuilding. Writes without a token (0) are never refused.
func TestAPausedReconcileIsRefused(t *testing.T) {
	r, store, voucher := saletest.Warmed(t, 5)
	ctx := context.Background()
	begin, end := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	const stale, newer = 6, 7
	stalePlan := sale.Plan{Stock: 5, Buyers: map[int64]int64{1: 11}}

	// The stale one froze with its token, then paused; the newer one ran.
	if err := store.Repair.Freeze(ctx, voucher, stale); err != nil {
		t.Fatal(err)
	}
	if err := store.Repair.Freeze(ctx, voucher, newer); err != nil {
		t.Fatal(err)
	}
	if err := store.Repair.Rebuild(ctx, voucher, sale.Plan{Stock: 5, Buyers: map[int64]int64{}}, begin, end, newer); err != nil {
		t.Fatal(err)
	}
	if d, err := store.Gate.Try(ctx, voucher, 99, 9999); err != nil || d.Err != nil {
		t.Fatalf("order after the newer rebuild: %+v %v", d, err)
	}

	k := store.KeysOf(voucher)
	for _, step := range []struct {
		name string
		do   func() error
	}{
		{"Rebuild", func() error { return store.Repair.Rebuild(ctx, voucher, stalePlan, begin, end, stale) }},
		{"Freeze", func() error { return store.Repair.Freeze(ctx, voucher, stale) }},
		{"Unfreeze", func() error { return store.Repair.Unfreeze(ctx, voucher, stale) }},
	} {
		if err := step.do(); !errors.Is(err, sale.ErrFenced) {
			t.Fatalf("the stale reconcile's %s: %v, want ErrFenced", step.name, err)
		}
		if stock, _ := r.Client.HGet(ctx, k.Voucher, "stock").Int(); stock != 4 {
			t.Fatalf("after the stale %s: stock %d, want 4 (the newer plan less one order)", step.name, stock)
		}
		if !r.Client.HExists(ctx, k.Buyers, "99").Val() || r.Client.HExists(ctx, k.Voucher, "frozen").Val() {
			t.Fatalf("after the stale %s: the buyer lost or the sale frozen", step.name)
		}
	}
	if n := r.Keys(t, r.Prefix+"seckill:buyers-rebuilt:*"); len(n) != 0 {
		t.Fatalf("the refused rebuild left its buyers behind: %v", n)
	}

	// A newer reconcile's freeze is not undone by the stale one.
	if err := store.Repair.Freeze(ctx, voucher, newer+1); err != nil {
		t.Fatal(err)
	}
	if err := store.Repair.Unfreeze(ctx, voucher, stale); !errors.Is(err, sale.ErrFenced) {
		t.Fatalf("stale unfreeze during a newer reconcile: %v, want ErrFenced", err)
	}
	if !r.Client.HExists(ctx, k.Voucher, "frozen").Val() {
		t.Fatal("the stale reconcile unfroze a sale a newer one is rebuilding")
	}
	if err := store.Repair.Unfreeze(ctx, voucher, 0); err != nil {
		t.Fatalf("an unfenced unfreeze (fencing token 0, a caller that holds no lock): %v", err)
	}
}

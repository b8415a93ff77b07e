package loadgen

import (
	"context"
	"testing"

	"github.com/seckill/seckill/internal/gate"
	"github.com/seckill/seckill/internal/testsupport"
)

// The drain's backlog is orders the gate took, under a key prefix of the
// drain's own: voucher 1 of the drain's fresh database is not the live
// system's voucher 1, and nothing of it is left in Redis afterwards.
func TestDrainBacklogIsTakenByTheGateUnderItsOwnPrefix(t *testing.T) {
	r := testsupport.MustRedis(t)
	ctx := context.Background()
	live, own := gate.NewStore(r.Client, r.Prefix), r.Prefix+"bench:drain:1:"
	const n = 500
	events, err := take(ctx, gate.NewStore(r.Client, own), 1, n)
	if err != nil {
		t.Fatal(err)
	}
	orders, users := map[int64]bool{}, map[int64]bool{}
	for _, e := range events {
		if e.VoucherID != 1 || e.AcceptedAt <= 0 || orders[e.OrderID] || users[e.UserID] {
			t.Fatalf("event %+v: wrong voucher, no acceptance time, or an order or a user twice", e)
		}
		orders[e.OrderID], users[e.UserID] = true, true
	}
	tot, err := gate.NewStore(r.Client, own).Totals(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if tot.Stock != 0 || tot.Pending != n || tot.Buyers != n {
		t.Fatalf("the drain's sale after %d orders: %+v, want stock 0, %d pending, %d buyers", n, tot, n, n)
	}
	if exists, err := r.Client.Exists(ctx, live.KeysOf(1).Voucher).Result(); err != nil || exists != 0 {
		t.Fatalf("the live prefix's voucher 1 exists (%d, %v): the drain wrote outside its prefix", exists, err)
	}

	if err := deleteKeys(ctx, r.Client, own); err != nil {
		t.Fatal(err)
	}
	if left := r.Keys(t, own+"*"); len(left) > 0 {
		t.Fatalf("%d keys left under the drain's prefix: %v", len(left), left)
	}
}

package loadgen

import (
	"context"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/gate"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/testsupport"
)

// The drain's backlog is orders the gate took, under a key prefix of the
// drain's own (voucher 1 of the drain's fresh database is not the live
// system's voucher 1), and nothing of it is left in Redis afterwards.
func TestDrainBacklogIsTakenByTheGateUnderItsOwnPrefix(t *testing.T) {
	r := testsupport.MustRedis(t)
	ctx := context.Background()
	own := r.Prefix + "bench:drain:1:"
	const n = 500
	events, err := take(ctx, gate.New(salestate.New(r.Client, own)), 1, n)
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
	tot, err := gate.New(salestate.New(r.Client, own)).Totals(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if tot.Stock != 0 || tot.Pending != n || tot.Buyers != n {
		t.Fatalf("the drain's sale after %d orders: %+v, want stock 0, %d pending, %d buyers", n, tot, n, n)
	}
	// A reconcile's order-id counter, under the drain's kind.
	stray := "id:" + own + "order:20261127"
	if err := r.Client.Set(ctx, stray, 1, 0).Err(); err != nil {
		t.Fatal(err)
	}

	if err := deleteKeys(ctx, r.Client, own); err != nil {
		t.Fatal(err)
	}
	if left := r.Keys(t, own+"*"); len(left) > 0 {
		t.Fatalf("%d keys left under the drain's prefix: %v", len(left), left)
	}
	if n, err := r.Client.Exists(ctx, stray).Result(); err != nil || n != 0 {
		t.Fatalf("the drain's order-id counter %s is left (%d, %v)", stray, n, err)
	}
}

// The drained writer runs under the drain's key prefix and topic, whatever
// the environment it inherits says.
func TestDrainWriterEnvironmentIsTheDrains(t *testing.T) {
	base := []string{"SECKILL_KEY_PREFIX=", "SECKILL_ORDERS_TOPIC=seckill.orders", "SECKILL_ADMIN_ADDR=127.0.0.1:9101"}
	last := map[string]string{}
	for _, kv := range writerEnv(base, "bench.drain.1", "bench:drain:1:", "127.0.0.1:1") {
		k, v, _ := strings.Cut(kv, "=")
		last[k] = v
	}
	for k, want := range map[string]string{"SECKILL_KEY_PREFIX": "bench:drain:1:", "SECKILL_ORDERS_TOPIC": "bench.drain.1", "SECKILL_ADMIN_ADDR": "127.0.0.1:1"} {
		if last[k] != want {
			t.Errorf("%s=%q in the writer's environment, want %q", k, last[k], want)
		}
	}
}

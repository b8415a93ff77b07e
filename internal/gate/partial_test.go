package gate_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/gate"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/orderdb"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/internal/testsupport"
)

// bucketRig is a sale in n buckets with its MySQL row, and a reconciler.
type bucketRig struct {
	r       *testsupport.Redis
	store   *gate.Store
	voucher int64
	rec     *reconcile.Reconciler
}

func newBucketRig(t *testing.T, stock int64, n int) *bucketRig {
	t.Helper()
	m, k := testsupport.MustMySQL(t), testsupport.MustKafka(t)
	g := &bucketRig{}
	g.r, g.store, g.voucher = hotSale(t, stock, n)
	m.MustSeedVoucherIn(t, g.voucher, stock, n)
	g.rec = &reconcile.Reconciler{Sale: g.store, Records: &orderdb.Orders{DB: m.DB},
		Backlog: &broker.Progress{Brokers: k.Brokers, Group: testsupport.Group(t), Topic: k.MustTopic(t, 1)},
		Wait:    20 * time.Second, Poll: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	return g
}

// bucketVoucher is bucket b's voucher hash.
func (g *bucketRig) bucketVoucher(t *testing.T, n, b int) map[string]string {
	t.Helper()
	v, err := g.r.Client.HGetAll(context.Background(), gate.BucketKeys(g.r.Prefix, g.voucher, n, b).Voucher).Result()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A reconcile that stops part way through the rebuild leaves every bucket
// frozen, not the rebuilt ones selling beside one that is not: with
// bucket 0 at stock 3 having received 5 (net -2), buckets 1 and 2 rebuilt
// empty and bucket 0 left as it was, the buckets' net stock adds up to -2
// while bucket 0 holds 3, and buyers of buckets 1 and 2 heard "sold out".
// The next reconcile completes, and the sale sells what MySQL has left.
func TestReconcileStoppedPartWayLeavesEveryBucketFrozen(t *testing.T) {
	const n = 3
	g := newBucketRig(t, 30, n)
	ctx := context.Background()
	// Bucket 0's users buy its 10, move 5 from bucket 1, and buy 2 more.
	first := homedIn(n, 0, 12)
	if c := buy(t, g.store, g.voucher, first, 1); len(c.accepted) != 12 {
		t.Fatalf("%d of 12 bought", len(c.accepted))
	}
	if b0 := g.bucketVoucher(t, n, 0); b0[gate.FieldStock] != "3" || b0[gate.FieldReceived] != "5" {
		t.Fatalf("bucket 0 before the reconcile: %v, want stock 3 having received 5", b0)
	}
	restore := gate.SetBeforeRebuildScript(func(b int) error {
		if b == 0 {
			return errors.New("the reconcile's process stopped")
		}
		return nil
	})
	_, err := g.rec.Run(ctx, g.voucher)
	restore()
	if err == nil {
		t.Fatal("the reconcile stopped part way reported no error")
	}
	for b := range n {
		user := homedIn(n, b, 20)[19]
		if d, err := g.store.Try(ctx, g.voucher, user, 900+int64(b)); err != nil || !errors.Is(d.Err, order.ErrPaused) {
			t.Fatalf("a buyer of bucket %d after the reconcile stopped part way: %+v %v, want paused", b, d, err)
		}
	}
	if _, err := g.rec.Run(ctx, g.voucher); err != nil {
		t.Fatal(err)
	}
	var fresh []int64
	for b := range n {
		fresh = append(fresh, homedIn(n, b, 40)[20:]...)
	}
	c := buy(t, g.store, g.voucher, fresh, 4)
	if len(c.accepted) != 30-12 || c.early() != 0 {
		t.Fatalf("%d sold after the reconcile (%d 'sold out' before the last unit), want MySQL's 18 less none", len(c.accepted), c.early())
	}
}

// A freeze that no reconcile finished (its process died part way) shows as
// stale in the sale's size, which the order-writer's checks turn into a
// reconcile; a fresh one does not.
func TestAFreezeLeftBehindIsStale(t *testing.T) {
	const n = 3
	g := newBucketRig(t, 30, n)
	ctx := context.Background()
	if err := g.store.Freeze(ctx, g.voucher, 0); err != nil {
		t.Fatal(err)
	}
	size, err := g.store.Size(ctx, g.voucher)
	if err != nil || size.FrozenFor <= 0 || size.FrozenFor > time.Minute {
		t.Fatalf("size after a freeze: %+v %v, want frozen for a moment", size, err)
	}
	if check, _ := size.Violation(30, 0); check != "" {
		t.Fatalf("a fresh freeze is %q, want no violation", check)
	}
	long := time.Now().Add(-reconcile.StaleFreeze - time.Minute).UnixMilli()
	if err := g.r.Client.HSet(ctx, gate.BucketKeys(g.r.Prefix, g.voucher, n, 1).Voucher, gate.FieldFrozen, long).Err(); err != nil {
		t.Fatal(err)
	}
	size, err = g.store.Size(ctx, g.voucher)
	if check, _ := size.Violation(30, 0); err != nil || check != reconcile.CheckFrozenStale {
		t.Fatalf("a freeze left %v ago: %+v %v is %q, want %q", reconcile.StaleFreeze+time.Minute, size, err, check, reconcile.CheckFrozenStale)
	}
	if _, err := g.rec.Run(ctx, g.voucher); err != nil {
		t.Fatal(err)
	}
	if size, err := g.store.Size(ctx, g.voucher); err != nil || size.FrozenFor != 0 {
		t.Fatalf("after the reconcile: %+v %v, want unfrozen", size, err)
	}
}

package gate_test

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/redisconn"
	"github.com/seckill/seckill/internal/replid"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
)

// A replica promoted by a failover has a replication id of its own, and
// the sales it holds (built under its old master's id) may miss writes
// the master acknowledged: the gate pauses those sales from the first
// attempt after the promotion, before any program has read the new id,
// taking nothing until a rebuild stamps them with it; the epoch tells the
// order-writer of the change.
func TestGatePausesASaleBuiltUnderAnotherReplicationID(t *testing.T) {
	ctx := context.Background()
	master, _ := testsupport.MustPrivateRedis(t)
	host, port, _ := net.SplitHostPort(master.Addr)
	replica, _ := testsupport.MustPrivateRedis(t, "--replicaof", host, port)

	const voucher = 3
	if err := saletest.New(master.Client, "").Gate.Warm(ctx, voucher, 10, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	masterID, err := redisconn.ReplicationID(ctx, master.Node(t))
	if err != nil {
		t.Fatal(err)
	}
	k := saletest.New(replica.Client, "").KeysOf(voucher)
	testsupport.Wait(t, 10*time.Second, "the replica has the sale", func() bool {
		return replica.Client.HGet(ctx, k.Voucher, "epoch").Val() == masterID
	})

	epoch := replid.NewWatcher(replica.Client, time.Second, slog.New(slog.DiscardHandler)).CountChanges(prometheus.NewRegistry())
	changes := 0
	epoch.OnChange = func(context.Context) { changes++ }
	if changed, err := epoch.Refresh(ctx); err != nil || changed || changes != 1 || epoch.Current()[replica.Addr] != masterID {
		t.Fatalf("first read: changed %v, %d OnChange calls, ids %v, err %v; want no change, one call (a program starting during an outage "+
			"cannot tell) and the master's id %q", changed, changes, epoch.Current(), err, masterID)
	}
	if changed, _ := epoch.Refresh(ctx); changed || changes != 1 {
		t.Fatalf("the same id read again: changed %v, %d OnChange calls; want no change, no call", changed, changes)
	}
	if d, err := saletest.New(master.Client, "").Gate.Try(ctx, voucher, 1, 101); err != nil || d.Err != nil {
		t.Fatalf("on the master: %v %v; want accepted", d.Err, err)
	}
	if n, err := master.Client.Do(ctx, "WAIT", 1, 10000).Int(); err != nil || n != 1 {
		t.Fatalf("the replica did not acknowledge the order: %d, %v", n, err)
	}
	store := saletest.New(replica.Client, "")
	if err := replica.Client.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	d, err := store.Gate.Try(ctx, voucher, 2, 102)
	if err != nil || d.Err != order.ErrPaused {
		t.Fatalf("right after the promotion, no program having read the new id: %v %v; want paused", d.Err, err)
	}
	if changed, err := epoch.Refresh(ctx); err != nil || !changed || changes != 2 || epoch.Current()[replica.Addr] == masterID {
		t.Fatalf("after the promotion: changed %v, %d OnChange calls, ids %v, err %v; want a new id", changed, changes, epoch.Current(), err)
	}
	if n := testutil.ToFloat64(epoch.Changes); n != 1 {
		t.Fatalf("%v changes counted, want 1", n)
	}
	if stock, _ := replica.Client.HGet(ctx, k.Voucher, "stock").Int(); stock != 9 {
		t.Fatalf("stock %d after one accepted and one paused attempt, want 9", stock)
	}
	if size, err := store.Repair.Size(ctx, voucher); err != nil || size.Epoch != masterID || size.RedisNow != epoch.Current()[replica.Addr] {
		t.Fatalf("the sale's size: %+v, %v; want built under %q, its server now under %q", size, err, masterID, epoch.Current()[replica.Addr])
	}

	plan := sale.Plan{Stock: 9, Buyers: map[int64]int64{1: 101}}
	if err := store.Repair.Rebuild(ctx, voucher, plan, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	if d, err := store.Gate.Try(ctx, voucher, 2, 102); err != nil || d.Err != nil {
		t.Fatalf("after the rebuild: %v %v; want accepted", d.Err, err)
	}
	if size, err := store.Repair.Size(ctx, voucher); err != nil || size.Epoch != epoch.Current()[replica.Addr] || size.Stock != 8 || size.Buyers != 2 {
		t.Fatalf("after the rebuild: %+v, %v; want epoch %q, stock 8, 2 buyers", size, err, epoch.Current())
	}
}

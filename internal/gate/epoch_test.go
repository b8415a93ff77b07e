package gate_test

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/seckill/seckill/internal/gate"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/internal/testsupport"
)

// A replica promoted by a failover has a replication id of its own, and
// the sales it holds (built under its old master's id) may miss writes
// the master acknowledged: the epoch sees the change, and the gate pauses
// those sales, taking nothing, until a rebuild stamps them with the new
// id.
func TestGatePausesASaleBuiltUnderAnotherReplicationID(t *testing.T) {
	ctx := context.Background()
	master, _ := testsupport.MustPrivateRedis(t)
	host, port, _ := net.SplitHostPort(master.Addr)
	replica, _ := testsupport.MustPrivateRedis(t, "--replicaof", host, port)

	const voucher = 3
	if err := gate.NewStore(master.Client, "").Warm(ctx, voucher, 10, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	masterID, err := gate.ReplicationID(ctx, master.Client)
	if err != nil {
		t.Fatal(err)
	}
	k := gate.NewStore(replica.Client, "").KeysOf(voucher)
	testsupport.Wait(t, 10*time.Second, "the replica has the sale", func() bool {
		return replica.Client.HGet(ctx, k.Voucher, "epoch").Val() == masterID
	})

	epoch := gate.NewEpoch(replica.Client, time.Second, slog.New(slog.DiscardHandler)).CountChanges(prometheus.NewRegistry())
	changes := 0
	epoch.OnChange = func(context.Context) { changes++ }
	if changed, err := epoch.Refresh(ctx); err != nil || changed || changes != 1 || epoch.Current() != masterID {
		t.Fatalf("first read: changed %v, %d OnChange calls, id %q, err %v; want no change, one call (a program starting during an outage "+
			"cannot tell) and the master's id %q", changed, changes, epoch.Current(), err, masterID)
	}
	if changed, _ := epoch.Refresh(ctx); changed || changes != 1 {
		t.Fatalf("the same id read again: changed %v, %d OnChange calls; want no change, no call", changed, changes)
	}
	store := gate.NewStore(replica.Client, "").WithEpoch(epoch)
	if err := replica.Client.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	if d, err := store.Try(ctx, voucher, 1, 101); err != nil || d.Err != nil {
		t.Fatalf("before the epoch is read again: %v %v; want accepted (the window a program's read interval leaves)", d.Err, err)
	}

	if changed, err := epoch.Refresh(ctx); err != nil || !changed || changes != 2 || epoch.Current() == masterID {
		t.Fatalf("after the promotion: changed %v, %d OnChange calls, id %q, err %v; want a new id", changed, changes, epoch.Current(), err)
	}
	if n := testutil.ToFloat64(epoch.Changes); n != 1 {
		t.Fatalf("%v changes counted, want 1", n)
	}
	d, err := store.Try(ctx, voucher, 2, 102)
	if err != nil || d.Err != order.ErrPaused {
		t.Fatalf("after the promotion: %v %v; want paused", d.Err, err)
	}
	if stock, _ := replica.Client.HGet(ctx, k.Voucher, "stock").Int(); stock != 9 {
		t.Fatalf("stock %d after one accepted and one paused attempt, want 9", stock)
	}

	plan := reconcile.Plan{Stock: 9, Buyers: map[int64]int64{1: 101}}
	if err := store.Rebuild(ctx, voucher, plan, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	if d, err := store.Try(ctx, voucher, 2, 102); err != nil || d.Err != nil {
		t.Fatalf("after the rebuild: %v %v; want accepted", d.Err, err)
	}
	if size, err := store.Size(ctx, voucher); err != nil || size.Epoch != epoch.Current() || size.Stock != 8 || size.Buyers != 2 {
		t.Fatalf("after the rebuild: %+v, %v; want epoch %q, stock 8, 2 buyers", size, err, epoch.Current())
	}
}

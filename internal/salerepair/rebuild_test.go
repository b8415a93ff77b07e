package salerepair_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/salerepair"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
)

// stall is past the production client's read timeout (saletest.Stall).
const stall = saletest.Stall

// A reconcile that stops part way through the rebuild leaves every bucket
// frozen, not the rebuilt ones selling beside one that is not: with
// bucket 0 at stock 3 having received 5 (net -2), buckets 1 and 2 rebuilt
// empty and bucket 0 left as it was, the buckets' net stock adds up to -2
// while bucket 0 holds 3, and buyers of buckets 1 and 2 heard "sold out".
// The next reconcile completes, and the sale sells what MySQL has left.
func TestReconcileStoppedPartWayLeavesEveryBucketFrozen(t *testing.T) {
	const n = 3
	g := saletest.NewRig(t, 30, n)
	ctx := context.Background()
	// Bucket 0's users buy its 10, move 5 from bucket 1, and buy 2 more.
	first := saletest.HomedIn(n, 0, 12)
	if c := saletest.Buy(t, g.Store, g.Voucher, first, 1); len(c.Accepted) != 12 {
		t.Fatalf("%d of 12 bought", len(c.Accepted))
	}
	if b0 := g.BucketVoucher(t, 0); b0[salestate.FieldStock] != "3" || b0[salestate.FieldReceived] != "5" {
		t.Fatalf("bucket 0 before the reconcile: %v, want stock 3 having received 5", b0)
	}
	g.Store.Repair.BeforeRebuildScript = func(b int) error {
		if b == 0 {
			return errors.New("the reconcile's process stopped")
		}
		return nil
	}
	_, err := g.Rec.Run(ctx, g.Voucher)
	g.Store.Repair.BeforeRebuildScript = nil
	if err == nil {
		t.Fatal("the reconcile stopped part way reported no error")
	}
	paused := func(when string) {
		t.Helper()
		for b := range n {
			user := saletest.HomedIn(n, b, 20)[19]
			if d, err := g.Store.Gate.Try(ctx, g.Voucher, user, 900+int64(b)); err != nil || !errors.Is(d.Err, order.ErrPaused) {
				t.Fatalf("a buyer of bucket %d %s: %+v %v, want paused", b, when, d, err)
			}
		}
	}
	paused("after the reconcile stopped part way")
	// The next reconcile fails before its rebuild (MySQL away): it must not
	// unfreeze the part-rebuilt sale on its way out.
	records := g.Rec.Records
	g.Rec.Records = failingRecords{}
	if _, err := g.Rec.Run(ctx, g.Voucher); err == nil {
		t.Fatal("a reconcile whose MySQL read failed reported no error")
	}
	g.Rec.Records = records
	paused("after a reconcile failed before its rebuild")
	if _, err := g.Rec.Run(ctx, g.Voucher); err != nil {
		t.Fatal(err)
	}
	var fresh []int64
	for b := range n {
		fresh = append(fresh, saletest.HomedIn(n, b, 40)[20:]...)
	}
	c := saletest.Buy(t, g.Store, g.Voucher, fresh, 4)
	if len(c.Accepted) != 30-12 || c.Early() != 0 {
		t.Fatalf("%d sold after the reconcile (%d 'sold out' before the last unit), want MySQL's 18 less none", len(c.Accepted), c.Early())
	}
}

// A freeze that no reconcile finished (its process died part way) shows as
// stale in the sale's size, which the order-writer's checks turn into a
// reconcile; a fresh one does not.
func TestAFreezeLeftBehindIsStale(t *testing.T) {
	const n = 3
	g := saletest.NewRig(t, 30, n)
	ctx := context.Background()
	if err := g.Store.Repair.Freeze(ctx, g.Voucher, 0); err != nil {
		t.Fatal(err)
	}
	size, err := g.Store.Repair.Size(ctx, g.Voucher)
	if err != nil || size.FrozenFor <= 0 || size.FrozenFor > time.Minute {
		t.Fatalf("size after a freeze: %+v %v, want frozen for a moment", size, err)
	}
	if check, _ := size.Violation(30, 0); check != "" {
		t.Fatalf("a fresh freeze is %q, want no violation", check)
	}
	long := time.Now().Add(-sale.StaleFreeze - time.Minute).UnixMilli()
	if err := g.R.Client.HSet(ctx, salestate.BucketKeys(g.R.Prefix, g.Voucher, n, 1).Voucher, salestate.FieldFrozen, long).Err(); err != nil {
		t.Fatal(err)
	}
	size, err = g.Store.Repair.Size(ctx, g.Voucher)
	if check, _ := size.Violation(30, 0); err != nil || check != sale.CheckFrozenStale {
		t.Fatalf("a freeze left %v ago: %+v %v is %q, want %q", sale.StaleFreeze+time.Minute, size, err, check, sale.CheckFrozenStale)
	}
	if _, err := g.Rec.Run(ctx, g.Voucher); err != nil {
		t.Fatal(err)
	}
	if size, err := g.Store.Repair.Size(ctx, g.Voucher); err != nil || size.FrozenFor != 0 {
		t.Fatalf("after the reconcile: %+v %v, want unfrozen", size, err)
	}
}

// A bucket whose reconcile write a failover lost is of an older generation
// and built under another replication id than its server's: suspect, it
// sells nothing (the gate pauses its buyers) until a reconcile rebuilds
// it. Unfreezing the sale — a later reconcile that failed releasing it —
// leaves it out of the generation check, as refill does: the other
// buckets, of one generation, sell again.
func TestUnfreezeLeavesASuspectBucketOutOfTheGenerationCheck(t *testing.T) {
	const n = 3
	g := saletest.NewRig(t, 30, n)
	ctx := context.Background()
	for b := range n {
		gen := "reconcile-2"
		if b == 1 {
			gen = "reconcile-1"
		}
		g.R.Client.HSet(ctx, salestate.BucketKeys(g.R.Prefix, g.Voucher, n, b).Voucher, salestate.FieldReconciled, gen)
	}
	g.R.Client.HSet(ctx, salestate.BucketKeys(g.R.Prefix, g.Voucher, n, 1).Voucher, salestate.FieldEpoch, "a-replication-id-of-before")
	if err := g.Store.Repair.Freeze(ctx, g.Voucher, 0); err != nil {
		t.Fatal(err)
	}
	if err := g.Store.Repair.Unfreeze(ctx, g.Voucher, 0); err != nil {
		t.Fatalf("unfreeze beside a suspect bucket of an older generation: %v", err)
	}
	c := saletest.Buy(t, g.Store, g.Voucher, append(saletest.HomedIn(n, 0, 10), saletest.HomedIn(n, 2, 10)...), 2)
	if len(c.Accepted) != 20 {
		t.Fatalf("%d of the other buckets' 20 units sold after the unfreeze", len(c.Accepted))
	}
	if d, err := g.Store.Gate.Try(ctx, g.Voucher, saletest.HomedIn(n, 1, 1)[0], 1); err != nil || !errors.Is(d.Err, order.ErrPaused) {
		t.Fatalf("a buyer of the suspect bucket: %+v %v, want paused", d, err)
	}
	// Healthy buckets of two generations still refuse the unfreeze.
	g.R.Client.HSet(ctx, salestate.BucketKeys(g.R.Prefix, g.Voucher, n, 2).Voucher, salestate.FieldReconciled, "reconcile-3")
	if err := g.Store.Repair.Freeze(ctx, g.Voucher, 0); err != nil {
		t.Fatal(err)
	}
	if err := g.Store.Repair.Unfreeze(ctx, g.Voucher, 0); !errors.Is(err, salerepair.ErrPartlyRebuilt) {
		t.Fatalf("unfreeze of healthy buckets of two generations: %v, want ErrPartlyRebuilt", err)
	}
}

// failingRecords is MySQL away.
type failingRecords struct{}

func (failingRecords) SaleTruth(context.Context, int64, []int64) (sale.Truth, bool, error) {
	return sale.Truth{}, false, errors.New("injected: MySQL is away")
}

// The reconcile's last step, resent after a stall (go-redis sends a
// command again when its reply times out), runs twice. An order the gate
// takes during the stall, paused or accepted depending on which of the
// runs Redis reads first, keeps its unit: the stock afterwards is the
// plan's less the orders taken. (Which run comes first is Redis's choice;
// TestRebuildAppliesOnceWhenResent pins the order down.)
func TestRebuildAppliesOnceWhenRedisStalls(t *testing.T) {
	r, store, voucher := saletest.Stallable(t, 5, nil)
	ctx := context.Background()
	if err := store.Repair.Freeze(ctx, voucher, 0); err != nil {
		t.Fatal(err)
	}
	buyer := saletest.New(r.Client, "") // an API instance: its own connection
	answered := make(chan error, 1)
	var done <-chan struct{}
	store.Repair.BeforeRebuildScript = func(int) error {
		done = testsupport.StallRedis(t, r.Addr, stall)
		go func() {
			time.Sleep(stall / 3) // the buyer comes while the master stalls
			d, err := buyer.Gate.Try(ctx, voucher, 99, 9999)
			if err == nil {
				err = d.Err
			}
			answered <- err
		}()
		return nil
	}
	plan := sale.Plan{Stock: 5, Buyers: map[int64]int64{}}
	if err := store.Repair.Rebuild(ctx, voucher, plan, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	<-done
	taken := 1
	if err := <-answered; errors.Is(err, order.ErrPaused) {
		taken = 0
	} else if err != nil {
		t.Fatalf("the order sent during the stall: %v", err)
	}
	k := store.KeysOf(voucher)
	if stock, _ := r.Client.HGet(ctx, k.Voucher, "stock").Int(); stock != 5-taken {
		t.Fatalf("stock %d after the rebuild (5) and %d order taken, want %d", stock, taken, 5-taken)
	}
	if r.Client.HExists(ctx, k.Voucher, "frozen").Val() {
		t.Fatal("still frozen after the rebuild")
	}
}

// The reconcile's last step sent again after an order was taken on the
// sale it unfroze changes nothing: the order keeps its unit and its buyer.
func TestRebuildAppliesOnceWhenResent(t *testing.T) {
	r, store, voucher := saletest.Warmed(t, 5)
	ctx := context.Background()
	rec := &resends{}
	client := r.NewClient(t)
	client.AddHook(rec)
	rebuilding := saletest.New(client, r.Prefix)
	if err := rebuilding.Repair.Freeze(ctx, voucher, 0); err != nil {
		t.Fatal(err)
	}
	plan := sale.Plan{Stock: 5, Buyers: map[int64]int64{1: 11}}
	if err := rebuilding.Repair.Rebuild(ctx, voucher, plan, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	if d, err := store.Gate.Try(ctx, voucher, 99, 9999); err != nil || d.Err != nil {
		t.Fatalf("order after the rebuild: %+v %v", d, err)
	}
	last := rec.args[len(rec.args)-1]
	if err := r.Client.Do(ctx, last...).Err(); err != nil {
		t.Fatalf("the rebuild's last step sent again: %v", err)
	}
	k := store.KeysOf(voucher)
	if stock, _ := r.Client.HGet(ctx, k.Voucher, "stock").Int(); stock != 4 {
		t.Fatalf("stock %d after the rebuild (5), one order and the resend, want 4", stock)
	}
	for _, u := range []string{"1", "99"} {
		if !r.Client.HExists(ctx, k.Buyers, u).Val() {
			t.Fatalf("buyer %s lost by the resend", u)
		}
	}
}

// resends records the arguments of every EVALSHA a client sends, so that
// a test can send one again as go-redis does after a timed-out reply.
type resends struct{ args [][]any }

func (h *resends) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *resends) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *resends) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			h.args = append(h.args, slices.Clone(cmd.Args()))
		}
		return next(ctx, cmd)
	}
}

// A rebuild of a sale in buckets puts each buyer in the home bucket, all
// the stock in bucket 0 and none moving: the gate then sells exactly the
// plan's stock, to new buyers only, from whichever bucket they live in.
func TestRebuildPutsEachBuyerInItsHomeBucket(t *testing.T) {
	const n = 3
	r, store, voucher := saletest.HotSale(t, 30, n)
	ctx := context.Background()
	buyers := map[int64]int64{}
	for u := int64(1); u <= 9; u++ {
		buyers[u] = 1000 + u
	}
	// Units moved before the rebuild: it starts every bucket afresh.
	if moved := saletest.Buy(t, store, voucher, saletest.HomedIn(n, 0, 15), 2); len(moved.Accepted) != 15 {
		t.Fatalf("%d of 15 bought before the rebuild", len(moved.Accepted))
	}
	plan := sale.Plan{Stock: 12, Buckets: n, Buyers: buyers}
	if err := store.Repair.Rebuild(ctx, voucher, plan, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	for b := range n {
		k := salestate.BucketKeys(r.Prefix, voucher, n, b)
		v := r.Client.HMGet(ctx, k.Voucher, salestate.FieldStock, salestate.FieldGiven, salestate.FieldReceived, salestate.FieldBuckets).Val()
		want := []any{"0", "0", "0", "3"}
		if b == 0 {
			want[0] = "12"
		}
		if !slices.Equal(v, want) {
			t.Errorf("bucket %d: stock, given, received, buckets %v, want %v", b, v, want)
		}
		for u, o := range r.Client.HGetAll(ctx, k.Buyers).Val() {
			uid, _ := strconv.ParseInt(u, 10, 64)
			if salestate.Home(uid, n) != b || strconv.FormatInt(buyers[uid], 10) != o {
				t.Errorf("bucket %d holds buyer %d with order %s", b, uid, o)
			}
		}
		if x := r.Client.HLen(ctx, k.Transfers).Val(); x != 0 {
			t.Errorf("bucket %d: %d transfers left", b, x)
		}
	}
	for u := int64(1); u <= 9; u++ {
		if d, err := store.Gate.Try(ctx, voucher, u, 5000+u); err != nil || !errors.Is(d.Err, order.ErrAlreadyBought) || d.OrderID != buyers[u] {
			t.Fatalf("user %d after the rebuild: %+v %v, want already bought order %d", u, d, err, buyers[u])
		}
	}
	var fresh []int64
	for u := int64(100); u < 140; u++ {
		fresh = append(fresh, u)
	}
	c := saletest.Buy(t, store, voucher, fresh, 8)
	if len(c.Accepted) != 12 {
		t.Fatalf("%d sold after the rebuild, want the plan's 12", len(c.Accepted))
	}
}

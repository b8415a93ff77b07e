package gate_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/orderdb"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/salerepair"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
	"github.com/seckill/seckill/lua"
)

// bucketRig is a sale in n buckets with its MySQL row, and a reconciler.
type bucketRig struct {
	r       *testsupport.Redis
	store   *saletest.Sales
	voucher int64
	rec     *reconcile.Reconciler
}

func newBucketRig(t *testing.T, stock int64, n int) *bucketRig {
	t.Helper()
	m, k := testsupport.MustMySQL(t), testsupport.MustKafka(t)
	g := &bucketRig{}
	g.r, g.store, g.voucher = hotSale(t, stock, n)
	m.MustSeedVoucherIn(t, g.voucher, stock, n)
	g.rec = &reconcile.Reconciler{Sale: g.store.Repair, Records: &orderdb.Orders{DB: m.DB},
		Backlog: &broker.Progress{Brokers: k.Brokers, Group: testsupport.Group(t), Topic: k.MustTopic(t, 1)},
		Wait:    20 * time.Second, Poll: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	return g
}

// bucketVoucher is bucket b's voucher hash.
func (g *bucketRig) bucketVoucher(t *testing.T, n, b int) map[string]string {
	t.Helper()
	v, err := g.r.Client.HGetAll(context.Background(), salestate.BucketKeys(g.r.Prefix, g.voucher, n, b).Voucher).Result()
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
	if b0 := g.bucketVoucher(t, n, 0); b0[salestate.FieldStock] != "3" || b0[salestate.FieldReceived] != "5" {
		t.Fatalf("bucket 0 before the reconcile: %v, want stock 3 having received 5", b0)
	}
	g.store.Repair.BeforeRebuildScript = func(b int) error {
		if b == 0 {
			return errors.New("the reconcile's process stopped")
		}
		return nil
	}
	_, err := g.rec.Run(ctx, g.voucher)
	g.store.Repair.BeforeRebuildScript = nil
	if err == nil {
		t.Fatal("the reconcile stopped part way reported no error")
	}
	paused := func(when string) {
		t.Helper()
		for b := range n {
			user := homedIn(n, b, 20)[19]
			if d, err := g.store.Gate.Try(ctx, g.voucher, user, 900+int64(b)); err != nil || !errors.Is(d.Err, order.ErrPaused) {
				t.Fatalf("a buyer of bucket %d %s: %+v %v, want paused", b, when, d, err)
			}
		}
	}
	paused("after the reconcile stopped part way")
	// The next reconcile fails before its rebuild (MySQL away): it must not
	// unfreeze the part-rebuilt sale on its way out.
	records := g.rec.Records
	g.rec.Records = failingRecords{}
	if _, err := g.rec.Run(ctx, g.voucher); err == nil {
		t.Fatal("a reconcile whose MySQL read failed reported no error")
	}
	g.rec.Records = records
	paused("after a reconcile failed before its rebuild")
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
	if err := g.store.Repair.Freeze(ctx, g.voucher, 0); err != nil {
		t.Fatal(err)
	}
	size, err := g.store.Repair.Size(ctx, g.voucher)
	if err != nil || size.FrozenFor <= 0 || size.FrozenFor > time.Minute {
		t.Fatalf("size after a freeze: %+v %v, want frozen for a moment", size, err)
	}
	if check, _ := size.Violation(30, 0); check != "" {
		t.Fatalf("a fresh freeze is %q, want no violation", check)
	}
	long := time.Now().Add(-sale.StaleFreeze - time.Minute).UnixMilli()
	if err := g.r.Client.HSet(ctx, salestate.BucketKeys(g.r.Prefix, g.voucher, n, 1).Voucher, salestate.FieldFrozen, long).Err(); err != nil {
		t.Fatal(err)
	}
	size, err = g.store.Repair.Size(ctx, g.voucher)
	if check, _ := size.Violation(30, 0); err != nil || check != sale.CheckFrozenStale {
		t.Fatalf("a freeze left %v ago: %+v %v is %q, want %q", sale.StaleFreeze+time.Minute, size, err, check, sale.CheckFrozenStale)
	}
	if _, err := g.rec.Run(ctx, g.voucher); err != nil {
		t.Fatal(err)
	}
	if size, err := g.store.Repair.Size(ctx, g.voucher); err != nil || size.FrozenFor != 0 {
		t.Fatalf("after the reconcile: %+v %v, want unfrozen", size, err)
	}
}

// window is bucket b's begin and end, ms.
func (g *bucketRig) window(t *testing.T, n, b int) [2]string {
	v := g.bucketVoucher(t, n, b)
	return [2]string{v[salestate.FieldBegin], v[salestate.FieldEnd]}
}

// A change of a sale whose bucket is frozen is refused before any step:
// every bucket keeps its stock and its window. A window change had been
// undone in stock only, leaving buckets with different windows.
func TestStockChangeOfAFrozenBucketChangesNoBucket(t *testing.T) {
	const n = 3
	g := newBucketRig(t, 30, n)
	ctx := context.Background()
	before := [n][2]string{}
	for b := range n {
		before[b] = g.window(t, n, b)
	}
	if err := g.r.Client.HSet(ctx, salestate.BucketKeys(g.r.Prefix, g.voucher, n, 2).Voucher, salestate.FieldFrozen, time.Now().UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	begin, end := time.Now().Add(time.Minute), time.Now().Add(3*time.Hour)
	for _, delta := range []int64{5, 0, -5} {
		if _, err := g.store.Gate.Adjust(ctx, g.voucher, delta, begin, end); !errors.Is(err, sale.ErrFrozen) {
			t.Fatalf("a change of %+d with bucket 2 frozen: %v, want ErrFrozen", delta, err)
		}
		for b := range n {
			if w := g.window(t, n, b); w != before[b] {
				t.Fatalf("after the refused change of %+d bucket %d's window is %v, was %v", delta, b, w, before[b])
			}
			if s := g.bucketVoucher(t, n, b)[salestate.FieldStock]; s != "10" {
				t.Fatalf("after the refused change of %+d bucket %d holds %s units, want its 10", delta, b, s)
			}
		}
	}
}

// A step that fails after the check (the bucket frozen meanwhile) undoes
// the steps before it, window too; when the undo fails (the new units sold
// meanwhile), the error is no refusal: the caller (voucher.ChangeSale)
// would otherwise take the units back out of MySQL while Redis sells them.
func TestAStockChangeWhoseUndoFailsIsNoRefusal(t *testing.T) {
	const n = 3
	g := newBucketRig(t, 30, n)
	ctx := context.Background()
	k1 := salestate.BucketKeys(g.r.Prefix, g.voucher, n, 1).Voucher
	freezeBucket1 := func(b int) {
		if b == 0 {
			g.r.Client.HSet(ctx, k1, salestate.FieldFrozen, time.Now().UnixMilli())
		}
	}
	oldWindow := g.window(t, n, 0)
	g.store.Gate.AfterAdjustStep = freezeBucket1
	_, err := g.store.Gate.Adjust(ctx, g.voucher, 5, time.Time{}, time.Now().Add(3*time.Hour))
	g.store.Gate.AfterAdjustStep = nil
	if !errors.Is(err, sale.ErrFrozen) || g.bucketVoucher(t, n, 0)[salestate.FieldStock] != "10" || g.window(t, n, 0) != oldWindow {
		t.Fatalf("a change whose second step met a freeze: %v, bucket 0 %v; want ErrFrozen and bucket 0 as it was", err, g.bucketVoucher(t, n, 0))
	}
	g.r.Client.HDel(ctx, k1, salestate.FieldFrozen)

	buyers := homedIn(n, 0, 20)
	g.store.Gate.AfterAdjustStep = func(b int) {
		freezeBucket1(b)
		if b == 0 {
			// Bucket 0's buyers take 12 of its 15 units: the undo of +5 fails.
			for i, u := range buyers[:12] {
				if d, err := g.store.Gate.Try(ctx, g.voucher, u, 5000+int64(i)); err != nil || d.Err != nil {
					t.Errorf("buyer %d: %v %v", u, d.Err, err)
				}
			}
		}
	}
	_, err = g.store.Gate.Adjust(ctx, g.voucher, 5, time.Time{}, time.Now().Add(3*time.Hour))
	g.store.Gate.AfterAdjustStep = nil
	if err == nil || errors.Is(err, sale.ErrFrozen) || errors.Is(err, sale.ErrNotWarmed) {
		t.Fatalf("a change whose undo failed: %v, want an error that is no refusal", err)
	}
	if s := g.bucketVoucher(t, n, 0)[salestate.FieldStock]; s != "3" {
		t.Fatalf("bucket 0 holds %s units, want the 15 less the 12 sold", s)
	}
}

// Reads of the buckets that straddle a rebuild (bucket 0 read before it,
// the others after) add up parts of two different sales; they make no
// "sold out" while bucket 0 holds units: the generations differ.
func TestBucketsOfTwoGenerationsMakeNoSoldOut(t *testing.T) {
	const n = 3
	g := newBucketRig(t, 30, n)
	ctx := context.Background()
	// Bucket 0 as before a rebuild (3 units, 5 received: net -2), buckets
	// 1 and 2 as after one (empty, of the rebuild's generation).
	b0 := salestate.BucketKeys(g.r.Prefix, g.voucher, n, 0).Voucher
	g.r.Client.HSet(ctx, b0, salestate.FieldStock, 3, salestate.FieldReceived, 5)
	for b := 1; b < n; b++ {
		g.r.Client.HSet(ctx, salestate.BucketKeys(g.r.Prefix, g.voucher, n, b).Voucher, salestate.FieldStock, 0, salestate.FieldReconciled, "rebuild-1")
	}
	user := homedIn(n, 1, 1)[0]
	d, err := g.store.Gate.Try(ctx, g.voucher, user, 1)
	if err != nil || errors.Is(d.Err, order.ErrSoldOut) {
		t.Fatalf("a buyer of bucket 1 while bucket 0 holds 3 units: %+v %v, want no 'sold out'", d, err)
	}
}

// A bucket built under another replication id than its server's (its
// master restarted or failed over, not yet reconciled) gets no units moved
// in: its buyers are told the sale is paused, and the units stay where the
// other buckets' buyers can buy them. Units moved in were stuck there (the
// gate pauses it, and it gives none), and the other buyers heard "moving
// stock" to the end.
func TestSuspectBucketGetsNoUnits(t *testing.T) {
	const n = 3
	g := newBucketRig(t, 30, n)
	ctx := context.Background()
	b1 := salestate.BucketKeys(g.r.Prefix, g.voucher, n, 1).Voucher
	g.r.Client.HSet(ctx, b1, salestate.FieldStock, 0, salestate.FieldEpoch, "a-replication-id-of-before")
	d, err := g.store.Gate.Try(ctx, g.voucher, homedIn(n, 1, 1)[0], 1)
	if err != nil || !errors.Is(d.Err, order.ErrPaused) {
		t.Fatalf("a buyer of the suspect bucket: %+v %v, want paused", d, err)
	}
	if s := g.bucketVoucher(t, n, 1)[salestate.FieldStock]; s != "0" {
		t.Fatalf("the suspect bucket holds %s units, want none moved in", s)
	}
	// The other buckets' 20 units to their 20 buyers.
	c := buy(t, g.store, g.voucher, append(homedIn(n, 0, 10), homedIn(n, 2, 10)...), 2)
	if len(c.accepted) != 20 {
		t.Fatalf("%d of the other buckets' 20 units sold", len(c.accepted))
	}
}

// failingRecords is MySQL away.
type failingRecords struct{}

func (failingRecords) SaleTruth(context.Context, int64, []int64) (sale.Truth, bool, error) {
	return sale.Truth{}, false, errors.New("injected: MySQL is away")
}

// loseReplies is a Redis hook under which a command that match accepts
// runs on the server and its reply is then lost, as under a timeout or a
// connection cut after the write: the first such reply only, or every one
// (a Redis that stops answering).
type loseReplies struct {
	match func(cmd redis.Cmder) bool
	every bool
	lost  atomic.Int32
}

func (h *loseReplies) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *loseReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *loseReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := next(ctx, cmd); err != nil || !h.match(cmd) || !h.every && h.lost.Load() > 0 {
			return err
		}
		h.lost.Add(1)
		err := fmt.Errorf("the reply was lost: %w", os.ErrDeadlineExceeded)
		cmd.SetErr(err)
		return err
	}
}

// A change of a sale in three buckets (6 units fewer, a new end) whose
// step on bucket 2 ran but whose reply was lost: the step is sent again
// under its id, the script answers it with its first answer (the units
// are taken once, not twice), and every bucket has the new window, 24
// units in all. When Redis does not answer at all after the loss, the
// other buckets are undone and the error is ErrChangeUnknown, no refusal:
// bucket 2 holds its step.
func TestAStepWhoseReplyIsLostIsSentAgain(t *testing.T) {
	const n = 3
	for _, c := range []struct {
		name  string
		every bool
	}{{"one reply lost", false}, {"every reply lost", true}} {
		t.Run(c.name, func(t *testing.T) {
			g := newBucketRig(t, 30, n)
			ctx := context.Background()
			k2 := salestate.BucketKeys(g.r.Prefix, g.voucher, n, 2).Voucher
			before := [n][2]string{}
			for b := range n {
				before[b] = g.window(t, n, b)
			}
			client := g.r.NewClient(t)
			hook := &loseReplies{every: c.every, match: func(cmd redis.Cmder) bool {
				args := cmd.Args()
				return cmd.Name() == "evalsha" && len(args) > 1 && args[1] == lua.AdjustVoucher.Hash() && slices.Contains(args, any(k2))
			}}
			// Loaded on every master first: a NOSCRIPT answer would send
			// the script by EVAL, past the hook's match.
			if err := lua.LoadAll(ctx, client); err != nil {
				t.Fatal(err)
			}
			client.AddHook(hook)
			end := time.Now().Add(5 * time.Hour).Truncate(time.Millisecond)
			_, err := saletest.New(client, g.r.Prefix).Gate.Adjust(ctx, g.voucher, -6, time.Time{}, end)
			if hook.lost.Load() == 0 {
				t.Fatal("no reply of bucket 2's step was lost: the test did not inject its fault")
			}
			newEnd := strconv.FormatInt(end.UnixMilli(), 10)
			stock := func(b int) int {
				v, _ := strconv.Atoi(g.bucketVoucher(t, n, b)[salestate.FieldStock])
				return v
			}
			if !c.every {
				total := 0
				for b := range n {
					if w := g.window(t, n, b); err != nil || w[1] != newEnd {
						t.Fatalf("bucket %d: end %s, err %v; want every bucket at the new end %s", b, w[1], err, newEnd)
					}
					total += stock(b)
				}
				if total != 24 {
					t.Fatalf("%d units in all after taking 6 of 30, want 24: the step sent again was applied twice, or not at all", total)
				}
				return
			}
			if !errors.Is(err, sale.ErrChangeUnknown) || errors.Is(err, sale.ErrFrozen) || errors.Is(err, sale.ErrNotWarmed) || errors.Is(err, sale.ErrBucketAway) {
				t.Fatalf("a step whose outcome stayed unknown: %v; want ErrChangeUnknown and no refusal", err)
			}
			for b := range n - 1 {
				if w := g.window(t, n, b); w != before[b] || stock(b) != 10 {
					t.Fatalf("bucket %d: window %v, stock %d after an unknown step; want them undone to %v, 10", b, w, stock(b), before[b])
				}
			}
			if w, s2 := g.window(t, n, 2), stock(2); w[1] != newEnd || s2 != 10 && s2 != 4 {
				t.Fatalf("bucket 2: end %s, stock %d; its step ran once (only the replies were lost): want %s and 10 or 4", w[1], s2, newEnd)
			}
		})
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
	g := newBucketRig(t, 30, n)
	ctx := context.Background()
	for b := range n {
		gen := "reconcile-2"
		if b == 1 {
			gen = "reconcile-1"
		}
		g.r.Client.HSet(ctx, salestate.BucketKeys(g.r.Prefix, g.voucher, n, b).Voucher, salestate.FieldReconciled, gen)
	}
	g.r.Client.HSet(ctx, salestate.BucketKeys(g.r.Prefix, g.voucher, n, 1).Voucher, salestate.FieldEpoch, "a-replication-id-of-before")
	if err := g.store.Repair.Freeze(ctx, g.voucher, 0); err != nil {
		t.Fatal(err)
	}
	if err := g.store.Repair.Unfreeze(ctx, g.voucher, 0); err != nil {
		t.Fatalf("unfreeze beside a suspect bucket of an older generation: %v", err)
	}
	c := buy(t, g.store, g.voucher, append(homedIn(n, 0, 10), homedIn(n, 2, 10)...), 2)
	if len(c.accepted) != 20 {
		t.Fatalf("%d of the other buckets' 20 units sold after the unfreeze", len(c.accepted))
	}
	if d, err := g.store.Gate.Try(ctx, g.voucher, homedIn(n, 1, 1)[0], 1); err != nil || !errors.Is(d.Err, order.ErrPaused) {
		t.Fatalf("a buyer of the suspect bucket: %+v %v, want paused", d, err)
	}
	// Healthy buckets of two generations still refuse the unfreeze.
	g.r.Client.HSet(ctx, salestate.BucketKeys(g.r.Prefix, g.voucher, n, 2).Voucher, salestate.FieldReconciled, "reconcile-3")
	if err := g.store.Repair.Freeze(ctx, g.voucher, 0); err != nil {
		t.Fatal(err)
	}
	if err := g.store.Repair.Unfreeze(ctx, g.voucher, 0); !errors.Is(err, salerepair.ErrPartlyRebuilt) {
		t.Fatalf("unfreeze of healthy buckets of two generations: %v, want ErrPartlyRebuilt", err)
	}
}

// The directory of a sale in buckets is lost (its master failed over
// before the write reached the replica) while the buckets are intact: an
// instance that does not remember the layout (a new one, or one whose
// memory of it expired) finds the buckets — by the window the order route
// reads first, and by the gate — and sells on, rather than telling every
// buyer "no such voucher" until a reconcile rewrites the directory. The
// buckets of an earlier sale under the same id (retired: an expiry) are
// not taken for it; a voucher with no sale is still unknown.
func TestALostDirectoryDoesNotStopTheSale(t *testing.T) {
	const n = 3
	r, _, voucher := hotSale(t, 30, n)
	ctx := context.Background()
	// An earlier sale of the voucher in more buckets, ended and retired:
	// an N whose bucket 0 is not the live sale's (a bucket's tag may not
	// depend on N, and a warm of the new sale then replaced the old one).
	m := n + 1
	for salestate.BucketKeys(r.Prefix, voucher, m, 0).Voucher == salestate.BucketKeys(r.Prefix, voucher, n, 0).Voucher {
		m++
	}
	old := earlierSale(t, r, voucher, m)
	if err := r.Client.Del(ctx, salestate.KeysFor(r.Prefix, voucher).Voucher).Err(); err != nil {
		t.Fatal(err)
	}
	fresh := saletest.New(r.Client, r.Prefix)
	if _, end, _, err := fresh.Records.Window(ctx, voucher); err != nil || end.Before(time.Now()) {
		t.Fatalf("the window of a sale whose directory is lost: ends %v, %v; want the live sale's", end, err)
	}
	for i, u := range homedIn(n, 1, 3) {
		if d, err := fresh.Gate.Try(ctx, voucher, u, 100+int64(i)); err != nil || d.Err != nil {
			t.Fatalf("buyer %d of a sale whose directory is lost: %+v %v, want accepted", u, d, err)
		}
	}
	if d, err := fresh.Gate.Try(ctx, voucher+1, 7, 200); err != nil || !errors.Is(d.Err, order.ErrUnknownVoucher) {
		t.Fatalf("a voucher with no sale: %+v %v, want unknown", d, err)
	}
	if ttl := r.Client.PTTL(ctx, old).Val(); ttl <= 0 {
		t.Fatalf("the earlier sale's bucket 0 lost its expiry (%v): the test no longer has a retired layout beside the live one", ttl)
	}
}

// earlierSale writes bucket 0 of an earlier sale of voucher in
// n buckets, ended and retired (its keys' expiry set), and returns its key.
func earlierSale(t *testing.T, r *testsupport.Redis, voucher int64, n int) string {
	t.Helper()
	k := salestate.BucketKeys(r.Prefix, voucher, n, 0).Voucher
	ctx := context.Background()
	ended := time.Now().Add(-time.Hour).UnixMilli()
	if err := r.Client.HSet(ctx, k, salestate.FieldStock, 0, salestate.FieldBuckets, n, salestate.FieldBegin, ended-1000, salestate.FieldEnd, ended).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Client.PExpire(ctx, k, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	return k
}

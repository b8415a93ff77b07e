package gate_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
	"github.com/seckill/seckill/lua"
)

// A change of a sale whose bucket is frozen is refused before any step:
// every bucket keeps its stock and its window. A window change had been
// undone in stock only, leaving buckets with different windows.
func TestStockChangeOfAFrozenBucketChangesNoBucket(t *testing.T) {
	const n = 3
	g := saletest.NewRig(t, 30, n)
	ctx := context.Background()
	before := [n][2]string{}
	for b := range n {
		before[b] = g.Window(t, b)
	}
	if err := g.R.Client.HSet(ctx, salestate.BucketKeys(g.R.Prefix, g.Voucher, n, 2).Voucher, salestate.FieldFrozen, time.Now().UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	begin, end := time.Now().Add(time.Minute), time.Now().Add(3*time.Hour)
	for _, delta := range []int64{5, 0, -5} {
		if _, err := g.Store.Gate.Adjust(ctx, g.Voucher, delta, begin, end); !errors.Is(err, sale.ErrFrozen) {
			t.Fatalf("a change of %+d with bucket 2 frozen: %v, want ErrFrozen", delta, err)
		}
		for b := range n {
			if w := g.Window(t, b); w != before[b] {
				t.Fatalf("after the refused change of %+d bucket %d's window is %v, was %v", delta, b, w, before[b])
			}
			if s := g.BucketVoucher(t, b)[salestate.FieldStock]; s != "10" {
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
	g := saletest.NewRig(t, 30, n)
	ctx := context.Background()
	k1 := salestate.BucketKeys(g.R.Prefix, g.Voucher, n, 1).Voucher
	freezeBucket1 := func(b int) {
		if b == 0 {
			g.R.Client.HSet(ctx, k1, salestate.FieldFrozen, time.Now().UnixMilli())
		}
	}
	oldWindow := g.Window(t, 0)
	g.Store.Gate.AfterAdjustStep = freezeBucket1
	_, err := g.Store.Gate.Adjust(ctx, g.Voucher, 5, time.Time{}, time.Now().Add(3*time.Hour))
	g.Store.Gate.AfterAdjustStep = nil
	if !errors.Is(err, sale.ErrFrozen) || g.BucketVoucher(t, 0)[salestate.FieldStock] != "10" || g.Window(t, 0) != oldWindow {
		t.Fatalf("a change whose second step met a freeze: %v, bucket 0 %v; want ErrFrozen and bucket 0 as it was", err, g.BucketVoucher(t, 0))
	}
	g.R.Client.HDel(ctx, k1, salestate.FieldFrozen)

	buyers := saletest.HomedIn(n, 0, 20)
	g.Store.Gate.AfterAdjustStep = func(b int) {
		freezeBucket1(b)
		if b == 0 {
			// Bucket 0's buyers take 12 of its 15 units: the undo of +5 fails.
			for i, u := range buyers[:12] {
				if d, err := g.Store.Gate.Try(ctx, g.Voucher, u, 5000+int64(i)); err != nil || d.Err != nil {
					t.Errorf("buyer %d: %v %v", u, d.Err, err)
				}
			}
		}
	}
	_, err = g.Store.Gate.Adjust(ctx, g.Voucher, 5, time.Time{}, time.Now().Add(3*time.Hour))
	g.Store.Gate.AfterAdjustStep = nil
	if err == nil || errors.Is(err, sale.ErrFrozen) || errors.Is(err, sale.ErrNotWarmed) {
		t.Fatalf("a change whose undo failed: %v, want an error that is no refusal", err)
	}
	if s := g.BucketVoucher(t, 0)[salestate.FieldStock]; s != "3" {
		t.Fatalf("bucket 0 holds %s units, want the 15 less the 12 sold", s)
	}
}

// Reads of the buckets that straddle a rebuild (bucket 0 read before it,
// the others after) add up parts of two different sales; they make no
// "sold out" while bucket 0 holds units: the generations differ.
func TestBucketsOfTwoGenerationsMakeNoSoldOut(t *testing.T) {
	const n = 3
	g := saletest.NewRig(t, 30, n)
	ctx := context.Background()
	// Bucket 0 as before a rebuild (3 units, 5 received: net -2), buckets
	// 1 and 2 as after one (empty, of the rebuild's generation).
	b0 := salestate.BucketKeys(g.R.Prefix, g.Voucher, n, 0).Voucher
	g.R.Client.HSet(ctx, b0, salestate.FieldStock, 3, salestate.FieldReceived, 5)
	for b := 1; b < n; b++ {
		g.R.Client.HSet(ctx, salestate.BucketKeys(g.R.Prefix, g.Voucher, n, b).Voucher, salestate.FieldStock, 0, salestate.FieldReconciled, "rebuild-1")
	}
	user := saletest.HomedIn(n, 1, 1)[0]
	d, err := g.Store.Gate.Try(ctx, g.Voucher, user, 1)
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
	g := saletest.NewRig(t, 30, n)
	ctx := context.Background()
	b1 := salestate.BucketKeys(g.R.Prefix, g.Voucher, n, 1).Voucher
	g.R.Client.HSet(ctx, b1, salestate.FieldStock, 0, salestate.FieldEpoch, "a-replication-id-of-before")
	d, err := g.Store.Gate.Try(ctx, g.Voucher, saletest.HomedIn(n, 1, 1)[0], 1)
	if err != nil || !errors.Is(d.Err, order.ErrPaused) {
		t.Fatalf("a buyer of the suspect bucket: %+v %v, want paused", d, err)
	}
	if s := g.BucketVoucher(t, 1)[salestate.FieldStock]; s != "0" {
		t.Fatalf("the suspect bucket holds %s units, want none moved in", s)
	}
	// The other buckets' 20 units to their 20 buyers.
	c := saletest.Buy(t, g.Store, g.Voucher, append(saletest.HomedIn(n, 0, 10), saletest.HomedIn(n, 2, 10)...), 2)
	if len(c.Accepted) != 20 {
		t.Fatalf("%d of the other buckets' 20 units sold", len(c.Accepted))
	}
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
			g := saletest.NewRig(t, 30, n)
			ctx := context.Background()
			k2 := salestate.BucketKeys(g.R.Prefix, g.Voucher, n, 2).Voucher
			before := [n][2]string{}
			for b := range n {
				before[b] = g.Window(t, b)
			}
			client := g.R.NewClient(t)
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
			_, err := saletest.New(client, g.R.Prefix).Gate.Adjust(ctx, g.Voucher, -6, time.Time{}, end)
			if hook.lost.Load() == 0 {
				t.Fatal("no reply of bucket 2's step was lost: the test did not inject its fault")
			}
			newEnd := strconv.FormatInt(end.UnixMilli(), 10)
			stock := func(b int) int {
				v, _ := strconv.Atoi(g.BucketVoucher(t, b)[salestate.FieldStock])
				return v
			}
			if !c.every {
				total := 0
				for b := range n {
					if w := g.Window(t, b); err != nil || w[1] != newEnd {
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
				if w := g.Window(t, b); w != before[b] || stock(b) != 10 {
					t.Fatalf("bucket %d: window %v, stock %d after an unknown step; want them undone to %v, 10", b, w, stock(b), before[b])
				}
			}
			if w, s2 := g.Window(t, 2), stock(2); w[1] != newEnd || s2 != 10 && s2 != 4 {
				t.Fatalf("bucket 2: end %s, stock %d; its step ran once (only the replies were lost): want %s and 10 or 4", w[1], s2, newEnd)
			}
		})
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
	r, _, voucher := saletest.HotSale(t, 30, n)
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
	for i, u := range saletest.HomedIn(n, 1, 3) {
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

package gate_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/gate"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
)

// stall is longer than the production client's read timeout, so go-redis
// gives up on the reply and sends the command again: both then run.
const stall = 1500 * time.Millisecond

// stalledVoucher is a voucher on sale with stock units in a Redis of the
// test's own, which the test may stall, and the gate on a client
// configured as the programs configure theirs (timeouts, retries), with a
// connection open as a serving program has.
func stalledVoucher(tb testing.TB, stock int64) (*testsupport.Redis, *saletest.Sales, int64) {
	return stalledVoucherOn(tb, clients[0].store, stock)
}

// stalledVoucherOn is stalledVoucher with the store newStore makes.
func stalledVoucherOn(tb testing.TB, newStore func(testing.TB, redis.UniversalClient, string) *saletest.Sales, stock int64) (*testsupport.Redis, *saletest.Sales, int64) {
	r, _ := testsupport.MustPrivateRedis(tb)
	store := newStore(tb, testsupport.MustProductionClient(tb, r.Addr), "")
	const voucher = 1
	if err := store.Gate.Warm(context.Background(), voucher, stock, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		tb.Fatal(err)
	}
	return r, store, voucher
}

// A stall past the client's read timeout must not make the gate decide
// twice: the buyer is told "accepted" with the order id the gate recorded,
// and exactly one unit is taken.
func TestGateDecidesOnceWhenRedisStalls(t *testing.T) {
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) { testGateDecidesOnceWhenRedisStalls(t, c.store) })
	}
}

func testGateDecidesOnceWhenRedisStalls(t *testing.T, newStore func(testing.TB, redis.UniversalClient, string) *saletest.Sales) {
	r, store, voucher := stalledVoucherOn(t, newStore, 5)
	ctx := context.Background()
	done := testsupport.StallRedis(t, r.Addr, stall)
	d, err := store.Gate.Try(ctx, voucher, 7, 4242)
	<-done
	if err != nil || d.Err != nil {
		t.Fatalf("attempt during a stall: decision %v, error %v; want accepted", d.Err, err)
	}
	k := store.KeysOf(voucher)
	if stock, _ := r.Client.HGet(ctx, k.Voucher, "stock").Int(); stock != 4 {
		t.Fatalf("stock %d after one accepted attempt, want 4", stock)
	}
	if n := r.Client.HLen(ctx, k.Pending).Val(); n != 1 || !r.Client.HExists(ctx, k.Pending, "4242").Val() {
		t.Fatalf("%d reservations, want the one of order 4242", n)
	}
}

// A stock change that Redis runs twice would leave Redis and MySQL apart.
func TestStockChangeAppliesOnceWhenRedisStalls(t *testing.T) {
	r, store, voucher := stalledVoucher(t, 5)
	ctx := context.Background()
	done := testsupport.StallRedis(t, r.Addr, stall)
	stock, err := store.Gate.Adjust(ctx, voucher, 3, time.Time{}, time.Time{})
	<-done
	if err != nil {
		t.Fatal(err)
	}
	got, _ := r.Client.HGet(ctx, store.KeysOf(voucher).Voucher, "stock").Int64()
	if stock != 8 || got != 8 {
		t.Fatalf("after +3 on 5: answered %d, Redis holds %d; want 8 and 8", stock, got)
	}
}

// The reconcile's last step, resent after a stall (go-redis sends a
// command again when its reply times out), runs twice. An order the gate
// takes during the stall, paused or accepted depending on which of the
// runs Redis reads first, keeps its unit: the stock afterwards is the
// plan's less the orders taken. (Which run comes first is Redis's choice;
// TestRebuildAppliesOnceWhenResent pins the order down.)
func TestRebuildAppliesOnceWhenRedisStalls(t *testing.T) {
	r, store, voucher := stalledVoucher(t, 5)
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

// A crowd on one bucket when Redis stalls past the production client's
// read timeout, through either client the api runs (the autopipeliner,
// and a plain client with its retries): every buyer is answered, either
// accepted with the order the gate recorded, or with an error that
// decided nothing for that buyer (ErrNotSent for those queued behind a
// call that got no reply; the call's own error for the one that sent it),
// which the api answers 503 "try again; if your order was taken, the
// answer says so". Each buyer's retry after the stall gets the order it
// had (already bought, with that order's id) or a new one: one unit per
// buyer, whatever the client sent twice.
func TestACrowdOnAStalledBucketIsDecidedOnce(t *testing.T) {
	for _, c := range clients {
		// A stall the client's retries outlast, and one they do not (its
		// read timeout 1 s, three tries).
		for _, stall := range []time.Duration{stall, 4 * time.Second} {
			t.Run(c.name+"/"+stall.String(), func(t *testing.T) {
				t.Parallel() // each on a Redis of its own
				testACrowdOnAStalledBucket(t, c.store, stall)
			})
		}
	}
}

func testACrowdOnAStalledBucket(t *testing.T, newStore func(testing.TB, redis.UniversalClient, string) *saletest.Sales, stall time.Duration) {
	const buyers, stock = 50, 100
	r, store, voucher := stalledVoucherOn(t, newStore, stock)
	ctx := context.Background()
	type answer struct {
		d   order.Decision
		err error
	}
	answers := make([]answer, buyers)
	done := testsupport.StallRedis(t, r.Addr, stall)
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Go(func() {
			d, err := store.Gate.Try(ctx, voucher, int64(100+i), int64(5000+i))
			answers[i] = answer{d, err}
		})
	}
	wg.Wait()
	<-done
	seen := map[string]int{}
	for _, a := range answers {
		switch {
		case a.err == nil && a.d.Err == nil:
			seen["accepted"]++
		case errors.Is(a.err, gate.ErrNotSent):
			seen["not sent"]++
		case a.err != nil:
			seen["the call's error"]++
		default:
			t.Errorf("a buyer answered %v during the stall: a refusal, not an undecided answer", a.d.Err)
		}
	}
	t.Logf("what %d buyers of one bucket were answered when Redis stalled %v: %v", buyers, stall, seen)
	for i := range buyers {
		d, err := store.Gate.Try(ctx, voucher, int64(100+i), int64(9000+i))
		first := answers[i].err == nil && answers[i].d.Err == nil
		switch {
		case err != nil:
			t.Fatalf("buyer %d's retry after the stall: %v", i, err)
		case first && (!errors.Is(d.Err, order.ErrAlreadyBought) || d.OrderID != int64(5000+i)):
			t.Fatalf("buyer %d, accepted as order %d, retried: %v order %d; want already bought, that order", i, 5000+i, d.Err, d.OrderID)
		case !first && d.Err != nil && (!errors.Is(d.Err, order.ErrAlreadyBought) || d.OrderID != int64(5000+i)):
			t.Fatalf("buyer %d, undecided in the stall, retried: %v order %d; want accepted, or already bought with the order the stall took", i, d.Err, d.OrderID)
		}
	}
	k := store.KeysOf(voucher)
	left, _ := r.Client.HGet(ctx, k.Voucher, "stock").Int()
	if pending, bought := r.Client.HLen(ctx, k.Pending).Val(), r.Client.HLen(ctx, k.Buyers).Val(); left != stock-buyers || pending != buyers || bought != buyers {
		t.Fatalf("stock %d, %d reservations, %d buyers after %d buyers each got one unit; want %d, %d, %d", left, pending, bought, buyers, stock-buyers, buyers, buyers)
	}
}

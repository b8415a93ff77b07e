package gate_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/gate"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
)

// stall is past the production client's read timeout (saletest.Stall).
const stall = saletest.Stall

// A stall past the client's read timeout must not make the gate decide
// twice: the buyer is told "accepted" with the order id the gate recorded,
// and exactly one unit is taken.
func TestGateDecidesOnceWhenRedisStalls(t *testing.T) {
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) { testGateDecidesOnceWhenRedisStalls(t, c.store) })
	}
}

func testGateDecidesOnceWhenRedisStalls(t *testing.T, newStore func(testing.TB, redis.UniversalClient, string) *saletest.Sales) {
	r, store, voucher := saletest.Stallable(t, 5, newStore)
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
	r, store, voucher := saletest.Stallable(t, 5, nil)
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
	r, store, voucher := saletest.Stallable(t, stock, newStore)
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

package gate_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/gate"
	"github.com/seckill/seckill/internal/testsupport"
)

// stall is longer than the production client's read timeout, so go-redis
// gives up on the reply and sends the command again: both then run.
const stall = 1500 * time.Millisecond

// stalledVoucher is a voucher on sale with stock units in a Redis of the
// test's own, which the test may stall, and the gate on a client
// configured as the programs configure theirs (timeouts, retries), with a
// connection open as a serving program has.
func stalledVoucher(tb testing.TB, stock int64) (*testsupport.Redis, *gate.Store, int64) {
	return stalledVoucherOn(tb, clients[0].store, stock)
}

// stalledVoucherOn is stalledVoucher with the store newStore makes.
func stalledVoucherOn(tb testing.TB, newStore func(testing.TB, *redis.Client, string) *gate.Store, stock int64) (*testsupport.Redis, *gate.Store, int64) {
	r, _ := testsupport.MustPrivateRedis(tb)
	store := newStore(tb, testsupport.MustProductionClient(tb, r.Addr), "")
	const voucher = 1
	if err := store.Warm(context.Background(), voucher, stock, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
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

func testGateDecidesOnceWhenRedisStalls(t *testing.T, newStore func(testing.TB, *redis.Client, string) *gate.Store) {
	r, store, voucher := stalledVoucherOn(t, newStore, 5)
	ctx := context.Background()
	done := testsupport.StallRedis(t, r.Addr, stall)
	d, err := store.Try(ctx, voucher, 7, 4242)
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
	stock, err := store.Adjust(ctx, voucher, 3, time.Time{}, time.Time{})
	<-done
	if err != nil {
		t.Fatal(err)
	}
	got, _ := r.Client.HGet(ctx, store.KeysOf(voucher).Voucher, "stock").Int64()
	if stock != 8 || got != 8 {
		t.Fatalf("after +3 on 5: answered %d, Redis holds %d; want 8 and 8", stock, got)
	}
}

package gate_test

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/gate"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
)

// The gate decides a batch of attempts one after the other, each as it
// would be decided alone: the stock running out inside a batch, a user or
// an attempt twice in one, an earlier buyer, a paused sale. What Redis
// holds afterwards is exactly the accepted attempts, each once.
func TestGateBatchDecidesEachAttemptAsAlone(t *testing.T) {
	type answer struct{ outcome, stock, order int64 }
	const accepted, bought, soldOut, paused = 0, 4, 5, 6
	for _, tc := range []struct {
		name   string
		stock  int64
		before [][2]int64 // {user, order} accepted in an earlier call
		field  string     // a field of the voucher set before the batch
		batch  [][2]int64
		want   []answer
	}{
		{name: "the stock runs out inside the batch", stock: 2,
			batch: [][2]int64{{1, 101}, {2, 102}, {3, 103}, {4, 104}},
			want:  []answer{{accepted, 1, 101}, {accepted, 0, 102}, {soldOut, 0, 0}, {soldOut, 0, 0}}},
		{name: "one user twice: the second attempt is already bought", stock: 5,
			batch: [][2]int64{{1, 101}, {1, 102}},
			want:  []answer{{accepted, 4, 101}, {bought, 4, 101}}},
		{name: "one attempt twice: one unit", stock: 5,
			batch: [][2]int64{{1, 101}, {1, 101}},
			want:  []answer{{accepted, 4, 101}, {accepted, 4, 101}}},
		{name: "an earlier buyer, and a retry of its order", stock: 5, before: [][2]int64{{1, 101}},
			batch: [][2]int64{{1, 102}, {1, 101}, {2, 102}},
			want:  []answer{{bought, 4, 101}, {accepted, 4, 101}, {accepted, 3, 102}}},
		{name: "frozen: nothing taken", stock: 5, field: salestate.FieldFrozen,
			batch: [][2]int64{{1, 101}, {2, 102}},
			want:  []answer{{paused, 5, 0}, {paused, 5, 0}}},
		{name: "built under another replication id: takers paused, an earlier buyer told", stock: 5,
			before: [][2]int64{{1, 101}}, field: salestate.FieldEpoch,
			batch: [][2]int64{{2, 102}, {1, 103}, {3, 104}},
			want:  []answer{{paused, 4, 0}, {bought, 4, 101}, {paused, 4, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, store, voucher := saletest.Warmed(t, tc.stock)
			ctx := context.Background()
			k := store.KeysOf(voucher)
			wantBuyers := map[string]string{}
			acceptedAt := map[int64]int64{}
			for _, b := range tc.before {
				res, err := store.Gate.TryBatch(ctx, voucher, b)
				if err != nil || res[0] != accepted {
					t.Fatalf("earlier attempt %v: %v, %v", b, res, err)
				}
				wantBuyers[strconv.FormatInt(b[0], 10)] = strconv.FormatInt(b[1], 10)
				acceptedAt[b[1]] = res[2]
			}
			if tc.field != "" {
				if err := r.Client.HSet(ctx, k.Voucher, tc.field, "another").Err(); err != nil {
					t.Fatal(err)
				}
			}
			res, err := store.Gate.TryBatch(ctx, voucher, tc.batch...)
			if err != nil || len(res) != 4*len(tc.batch) {
				t.Fatalf("batch: %v, %v", res, err)
			}
			stock := tc.stock - int64(len(tc.before))
			for i, w := range tc.want {
				got := answer{res[4*i], res[4*i+1], res[4*i+3]}
				if got != w {
					t.Errorf("attempt %d %v: {outcome, stock, order} = %v, want %v", i, tc.batch[i], got, w)
				}
				if at, ok := acceptedAt[got.order]; ok && got.outcome == accepted && res[4*i+2] != at {
					t.Errorf("attempt %d, a retry of order %d: accepted at %d, want the first acceptance's %d", i, got.order, res[4*i+2], at)
				}
				if w.outcome == accepted {
					wantBuyers[strconv.FormatInt(tc.batch[i][0], 10)] = strconv.FormatInt(w.order, 10)
				}
				stock = min(stock, w.stock)
			}
			buyers, err := r.Client.HGetAll(ctx, k.Buyers).Result()
			if err != nil || !maps.Equal(buyers, wantBuyers) {
				t.Errorf("buyers %v, %v; want %v", buyers, err, wantBuyers)
			}
			wantOrders := slices.Sorted(maps.Values(wantBuyers))
			pending, _ := r.Client.HKeys(ctx, k.Pending).Result()
			pendingAt, _ := r.Client.ZRange(ctx, k.PendingAt, 0, -1).Result()
			if slices.Sort(pending); !slices.Equal(pending, wantOrders) {
				t.Errorf("reservations %v, want %v", pending, wantOrders)
			}
			if slices.Sort(pendingAt); !slices.Equal(pendingAt, wantOrders) {
				t.Errorf("reservations by time %v, want %v", pendingAt, wantOrders)
			}
			if got, _ := r.Client.HGet(ctx, k.Voucher, salestate.FieldStock).Int64(); got != stock {
				t.Errorf("stock %d, want %d", got, stock)
			}
		})
	}
}

// A crowd arriving at once is decided in batches, sharing script calls,
// and the batches sell the stock exactly: every unit to one buyer, every
// other buyer told "sold out", one reservation per accepted order.
func TestGateBatchesACrowd(t *testing.T) {
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			// More than a thousand at once, as at a sale's opening: a healthy
			// master answers them all, however many queue.
			const stock, crowd = 500, 2000
			_, store, voucher := warmedVoucherOn(t, c.store, stock)
			ctx := context.Background()
			before := store.Gate.GateCalls()
			var (
				start    sync.WaitGroup
				done     sync.WaitGroup
				mu       sync.Mutex
				outcomes = map[error]int{}
				orders   = map[int64]int64{}
			)
			start.Add(1)
			for u := int64(1); u <= crowd; u++ {
				done.Go(func() {
					start.Wait()
					d, err := store.Gate.Try(ctx, voucher, u, 1000+u)
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						t.Errorf("user %d: %v", u, err)
						return
					}
					outcomes[d.Err]++
					if d.Err == nil {
						orders[d.OrderID] = u
					}
				})
			}
			start.Done()
			done.Wait()
			if outcomes[nil] != stock || outcomes[order.ErrSoldOut] != crowd-stock || len(orders) != stock {
				t.Fatalf("outcomes %v, %d distinct orders; want %d accepted, %d sold out", outcomes, len(orders), stock, crowd-stock)
			}
			for id, u := range orders {
				if id != 1000+u {
					t.Errorf("user %d accepted under order %d, want %d", u, id, 1000+u)
				}
			}
			tot, err := store.Totals(ctx, voucher)
			if err != nil || tot.Stock != 0 || tot.Pending != stock || tot.Buyers != stock {
				t.Fatalf("totals %+v, %v; want stock 0, %d reservations, %d buyers", tot, err, stock, stock)
			}
			if calls := store.Gate.GateCalls() - before; calls >= crowd {
				t.Fatalf("%d script calls for %d attempts released at once: no attempts shared a call", calls, crowd)
			} else {
				t.Logf("%d attempts in %d script calls", crowd, calls)
			}
		})
	}
}

// The batched script against the one it replaced, which decided one
// attempt per call (testdata): random batches — users and attempts twice,
// earlier buyers and retries of their orders, stock from 0 to 5, a sale
// frozen, under another replication id, not started or ended — decided
// in one call on one voucher and one attempt at a time on its twin. Every
// attempt's outcome, stock left and order id, and the buyers afterwards,
// are the same; the same batch sent again (go-redis re-sends a call whose
// reply timed out) gives every accepted attempt its first answer, taking
// nothing more.
func TestGateBatchMatchesOneAttemptAtATime(t *testing.T) {
	r := testsupport.MustRedis(t)
	ctx := context.Background()
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	one := redis.NewScript(read("../../lua/server.lua") + read("../../lua/sale.lua") + read("testdata/seckill_one_attempt.lua"))
	store := saletest.New(r.Client, r.Prefix)
	rng := rand.New(rand.NewPCG(1, 2))
	attempt := func(v int64, user, order int64) []int64 {
		keys := salestate.BucketKeys(r.Prefix, v, 1, 0).List()
		res, err := one.Run(ctx, r.Client, keys, strconv.FormatInt(user, 10), strconv.FormatInt(order, 10), "", 1).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for iter := range 300 {
		stock := int64(rng.IntN(6))
		batched, alone := 1+rand.Int64N(1<<40), 1+rand.Int64N(1<<40)
		earlier := int64(rng.IntN(3))
		for _, v := range []int64{batched, alone} {
			if err := store.Gate.Warm(ctx, v, stock, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			for u := range earlier {
				attempt(v, u+1, 500+u+1)
			}
		}
		field, value := "", any(nil)
		switch rng.IntN(5) {
		case 1:
			field, value = salestate.FieldFrozen, "1"
		case 2:
			field, value = salestate.FieldEpoch, "another"
		case 3:
			field, value = salestate.FieldBegin, time.Now().Add(time.Hour).UnixMilli()
		case 4:
			field, value = salestate.FieldEnd, time.Now().Add(-time.Minute).UnixMilli()
		}
		if field != "" {
			for _, v := range []int64{batched, alone} {
				r.Client.HSet(ctx, store.KeysOf(v).Voucher, field, value)
			}
		}
		var batch [][2]int64
		for range 1 + rng.IntN(8) {
			u := int64(1 + rng.IntN(5))
			o := 500 + u // a retry of an earlier buyer's order, or its first
			if rng.IntN(3) > 0 {
				o = int64(600 + rng.IntN(6))
			}
			batch = append(batch, [2]int64{u, o})
		}
		got, err := store.Gate.TryBatch(ctx, batched, batch...)
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range batch {
			want := attempt(alone, a[0], a[1])
			if g := got[4*i : 4*i+4]; g[0] != want[0] || g[1] != want[1] || g[3] != want[3] {
				t.Errorf("run %d (stock %d, %s set): attempt %d of %v: {outcome, stock, ms, order} %v in a batch, %v alone", iter, stock, field, i, batch, g, want)
			}
		}
		again, err := store.Gate.TryBatch(ctx, batched, batch...)
		if err != nil {
			t.Fatal(err)
		}
		for i := range batch {
			if got[4*i] == 0 && (again[4*i] != 0 || again[4*i+2] != got[4*i+2] || again[4*i+3] != got[4*i+3]) {
				t.Errorf("run %d: accepted attempt %d answered %v, sent again %v", iter, i, got[4*i:4*i+4], again[4*i:4*i+4])
			}
		}
		s1, err1 := r.Client.HGet(ctx, store.KeysOf(batched).Voucher, salestate.FieldStock).Int64()
		s2, err2 := r.Client.HGet(ctx, store.KeysOf(alone).Voucher, salestate.FieldStock).Int64()
		if err1 != nil || err2 != nil {
			t.Fatalf("run %d: reading the stock: %v, %v", iter, err1, err2)
		}
		if s1 != s2 {
			t.Errorf("run %d: stock %d after the batch sent twice, %d one attempt at a time", iter, s1, s2)
		}
		b1, _ := r.Client.HGetAll(ctx, store.KeysOf(batched).Buyers).Result()
		b2, _ := r.Client.HGetAll(ctx, store.KeysOf(alone).Buyers).Result()
		if !maps.Equal(b1, b2) {
			t.Errorf("run %d: buyers %v after the batch, %v one attempt at a time", iter, b1, b2)
		}
	}
}

// A master that stops answering while a crowd queues on one bucket: the
// call in flight times out, and every attempt queued behind it fails at
// once as not sent instead of each waiting for a call of its own to time
// out; nothing they asked for is taken. CLIENT PAUSE holds the real
// server's replies.
func TestGateBatchFailsTheQueueWhenTheMasterStalls(t *testing.T) {
	r, _ := testsupport.MustPrivateRedis(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr, ReadTimeout: 300 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	store := saletest.New(rdb, "")
	const voucher, crowd = 9, 300
	if err := store.Gate.Warm(ctx, voucher, 1000, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if d, err := store.Gate.Try(ctx, voucher, 1, 1); err != nil || d.Err != nil {
		t.Fatalf("first attempt: %v %v", d.Err, err)
	}
	before := store.Gate.GateCalls()
	if err := r.Client.Do(ctx, "CLIENT", "PAUSE", 2000, "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	var (
		wg                 sync.WaitGroup
		mu                 sync.Mutex
		notSent, undecided int
		undecidedUsers     = map[string]bool{}
	)
	for u := int64(2); u < 2+crowd; u++ {
		wg.Go(func() {
			d, err := store.Gate.Try(ctx, voucher, u, u)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, gate.ErrNotSent):
				notSent++
			case err != nil:
				undecided++
				undecidedUsers[strconv.FormatInt(u, 10)] = true
			default:
				t.Errorf("user %d while the master is paused: %v, want an error: not sent, or the timeout of its call", u, d.Err)
			}
		})
	}
	wg.Wait()
	calls := store.Gate.GateCalls() - before
	if notSent+undecided != crowd || notSent == 0 || calls > 2 {
		t.Fatalf("%d not sent, %d undecided, %d calls for %d attempts; want all answered and the queue failed with the first call "+
			"(2 calls at most: one attempt may arrive after the first call timed out)", notSent, undecided, calls, crowd)
	}
	t.Logf("%d attempts: %d undecided (in the call that timed out), %d not sent, %d calls", crowd, undecided, notSent, calls)
	testsupport.Wait(t, 10*time.Second, "the pause ends and the server answers", func() bool { return r.Client.Ping(ctx).Err() == nil })
	buyers, err := r.Client.HKeys(ctx, store.KeysOf(voucher).Buyers).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range buyers {
		if u != "1" && !undecidedUsers[u] {
			t.Errorf("user %s was answered not sent, and Redis has taken a unit for them", u)
		}
	}
}

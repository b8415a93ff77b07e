package gate_test

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/seckill/seckill/internal/gate"
	"github.com/seckill/seckill/internal/order"
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
		{name: "frozen: nothing taken", stock: 5, field: gate.FieldFrozen,
			batch: [][2]int64{{1, 101}, {2, 102}},
			want:  []answer{{paused, 5, 0}, {paused, 5, 0}}},
		{name: "built under another replication id: takers paused, an earlier buyer told", stock: 5,
			before: [][2]int64{{1, 101}}, field: gate.FieldEpoch,
			batch: [][2]int64{{2, 102}, {1, 103}, {3, 104}},
			want:  []answer{{paused, 4, 0}, {bought, 4, 101}, {paused, 4, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, store, voucher := warmedVoucher(t, tc.stock)
			ctx := context.Background()
			k := store.KeysOf(voucher)
			wantBuyers := map[string]string{}
			acceptedAt := map[int64]int64{}
			for _, b := range tc.before {
				res, err := store.TryBatch(ctx, voucher, b)
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
			res, err := store.TryBatch(ctx, voucher, tc.batch...)
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
			if got, _ := r.Client.HGet(ctx, k.Voucher, gate.FieldStock).Int64(); got != stock {
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
			const stock, crowd = 100, 400
			_, store, voucher := warmedVoucherOn(t, c.store, stock)
			ctx := context.Background()
			before := store.GateCalls()
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
					d, err := store.Try(ctx, voucher, u, 1000+u)
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
			if calls := store.GateCalls() - before; calls >= crowd {
				t.Fatalf("%d script calls for %d attempts released at once: no attempts shared a call", calls, crowd)
			} else {
				t.Logf("%d attempts in %d script calls", crowd, calls)
			}
		})
	}
}

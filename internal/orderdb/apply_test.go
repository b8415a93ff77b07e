package orderdb_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/orderdb"
	"github.com/seckill/seckill/internal/testsupport"
)

func ev(orderID, userID, voucherID int64) order.Event {
	return order.Event{OrderID: orderID, UserID: userID, VoucherID: voucherID, AcceptedAt: time.Now().UnixMilli() + orderID}
}

func TestApply(t *testing.T) {
	m := testsupport.MustMySQL(t)
	ctx := context.Background()
	m.MustSeedVoucher(t, 1, 3)

	out, err := orderdb.Apply(ctx, m.DB, []order.Event{ev(11, 1, 1), ev(12, 2, 1), ev(12, 2, 1), ev(13, 1, 1), ev(14, 3, 1), ev(15, 4, 1), ev(16, 5, 99)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{order.ReasonDuplicateUser: 1, order.ReasonSoldOut: 1, order.ReasonUnknownVoucher: 1}
	if out.Inserted != 3 || out.Already != 0 || len(out.Failed) != 3 {
		t.Fatalf("outcome %+v, want 3 inserted and failures %v", out, want)
	}
	for reason, n := range want {
		if out.Failed[reason] != n {
			t.Fatalf("failures %v, want %v", out.Failed, want)
		}
	}
	if got := m.MustSaleState(t, 1); got != (testsupport.SaleState{Orders: 3, Failures: 2, Stock: 0}) {
		t.Fatalf("voucher 1: %+v, want 3 orders, 2 failures, stock 0", got)
	}

	// The same batch again (a redelivery) changes nothing.
	out, err = orderdb.Apply(ctx, m.DB, []order.Event{ev(11, 1, 1), ev(12, 2, 1), ev(13, 1, 1), ev(14, 3, 1), ev(15, 4, 1), ev(16, 5, 99)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Inserted != 0 || out.Already != 6 || len(out.Failed) != 0 {
		t.Fatalf("redelivery: %+v, want all 6 already settled", out)
	}
	if got := m.MustSaleState(t, 1); got != (testsupport.SaleState{Orders: 3, Failures: 2, Stock: 0}) {
		t.Fatalf("after the redelivery: %+v", got)
	}
}

// Writers of one voucher in parallel (several partitions, several
// processes) never take more than the stock.
func TestApplyConcurrentWritersNeverOversell(t *testing.T) {
	m := testsupport.MustMySQL(t)
	ctx := context.Background()
	m.MustSeedVoucher(t, 7, 100)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			<-start
			for b := range 10 {
				var batch []order.Event
				for i := range 10 {
					n := int64(w*1000 + b*10 + i + 1)
					batch = append(batch, ev(n, n, 7))
				}
				if _, err := orderdb.Apply(ctx, m.DB, batch); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if got := m.MustSaleState(t, 7); got != (testsupport.SaleState{Orders: 100, Failures: 300, Stock: 0}) {
		t.Fatalf("400 orders on stock 100: %+v, want 100 orders, 300 failures, stock 0", got)
	}
}

// A batch of new orders that fits goes in with one INSERT; delivered again
// it meets its own rows, falls back to settling row by row and changes
// nothing; mixed with new orders, only those go in.
func TestApplyFastPathAndRedelivery(t *testing.T) {
	m := testsupport.MustMySQL(t)
	ctx := context.Background()
	m.MustSeedVoucher(t, 3, 10)
	batch := []order.Event{ev(31, 1, 3), ev(32, 2, 3), ev(33, 3, 3)}
	if out, err := orderdb.Apply(ctx, m.DB, batch); err != nil || out.Inserted != 3 || out.Already != 0 {
		t.Fatalf("first delivery: %+v, %v", out, err)
	}
	out, err := orderdb.Apply(ctx, m.DB, append(batch, ev(34, 4, 3)))
	if err != nil || out.Inserted != 1 || out.Already != 3 || len(out.Failed) != 0 {
		t.Fatalf("redelivery plus one new order: %+v, %v; want 1 inserted, 3 already", out, err)
	}
	if got := m.MustSaleState(t, 3); got != (testsupport.SaleState{Orders: 4, Failures: 0, Stock: 6}) {
		t.Fatalf("voucher 3: %+v, want 4 orders, stock 6", got)
	}
}

// An order whose id another order already holds (the id generator repeated
// it) is neither inserted nor taken for a redelivery: it comes back as
// collided, takes no stock, and the holder's row stays as it was.
func TestApplyReportsAnOrderIDCollision(t *testing.T) {
	m := testsupport.MustMySQL(t)
	ctx := context.Background()
	m.MustSeedVoucher(t, 1, 10)
	m.MustSeedVoucher(t, 2, 10)
	if out, err := orderdb.Apply(ctx, m.DB, []order.Event{ev(21, 1, 1)}); err != nil || out.Inserted != 1 {
		t.Fatalf("first order: %+v %v", out, err)
	}

	tests := []struct {
		name           string
		batch          []order.Event
		inserted       int
		already        int
		collided       []int64 // users whose order collided
		ordersOfVouch1 int64
	}{
		{"AnotherUserAcrossBatches", []order.Event{ev(21, 2, 1)}, 0, 0, []int64{2}, 1},
		{"AnotherVoucherAcrossBatches", []order.Event{ev(21, 1, 2)}, 0, 0, []int64{1}, 1},
		{"RedeliveryIsNoCollision", []order.Event{ev(21, 1, 1)}, 0, 1, nil, 1},
		{"WithinOneBatch", []order.Event{ev(31, 5, 1), ev(31, 6, 1), ev(31, 5, 1)}, 1, 0, []int64{6}, 2},
		{"NextToNewOrders", []order.Event{ev(41, 7, 1), ev(21, 8, 1), ev(42, 9, 1)}, 2, 0, []int64{8}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := orderdb.Apply(ctx, m.DB, tt.batch)
			if err != nil {
				t.Fatal(err)
			}
			var collided []int64
			for _, e := range out.Collided {
				collided = append(collided, e.UserID)
			}
			if out.Inserted != tt.inserted || out.Already != tt.already || len(out.Failed) != 0 || !slices.Equal(collided, tt.collided) {
				t.Fatalf("outcome %+v (collided users %v), want %d inserted, %d already, collided users %v",
					out, collided, tt.inserted, tt.already, tt.collided)
			}
			if got := m.MustSaleState(t, 1); got.Orders != tt.ordersOfVouch1 || got.Stock != 10-tt.ordersOfVouch1 || got.Failures != 0 {
				t.Fatalf("voucher 1: %+v, want %d orders and stock %d", got, tt.ordersOfVouch1, 10-tt.ordersOfVouch1)
			}
		})
	}
	var user int64
	if err := m.DB.QueryRow("SELECT user_id FROM tb_voucher_order WHERE id = 21").Scan(&user); err != nil || user != 1 {
		t.Fatalf("order 21 belongs to user %d (%v), want its first holder 1", user, err)
	}
	if got := m.MustSaleState(t, 2); got.Orders != 0 || got.Stock != 10 {
		t.Fatalf("voucher 2: %+v, want untouched", got)
	}
}

// A settled order changes nothing when it comes again, whatever happened
// meanwhile: an order that failed for want of stock stays failed after a
// restock, on the optimistic path and on the careful one alike.
func TestSettledOrderStaysSettled(t *testing.T) {
	for _, tt := range []struct {
		name  string
		batch []order.Event // the redelivery, with the failed order 21 in it
	}{
		{"Alone", []order.Event{ev(21, 1, 1)}},
		{"WithNewOrders", []order.Event{ev(21, 1, 1), ev(22, 2, 1), ev(23, 3, 1)}},
		{"WithARedelivery", []order.Event{ev(21, 1, 1), ev(20, 9, 1)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := testsupport.MustMySQL(t)
			ctx := context.Background()
			m.MustSeedVoucher(t, 1, 1)
			if _, err := orderdb.Apply(ctx, m.DB, []order.Event{ev(20, 9, 1), ev(21, 1, 1)}); err != nil {
				t.Fatal(err)
			}
			if got := m.MustSaleState(t, 1); got != (testsupport.SaleState{Orders: 1, Failures: 1, Stock: 0}) {
				t.Fatalf("before the restock: %+v, want order 20 and order 21 failed", got)
			}
			if _, err := m.DB.Exec("UPDATE tb_seckill_voucher SET stock = stock + 5 WHERE voucher_id = 1"); err != nil {
				t.Fatal(err)
			}
			out, err := orderdb.Apply(ctx, m.DB, tt.batch)
			if err != nil {
				t.Fatal(err)
			}
			var confirmed int
			if err := m.DB.QueryRow("SELECT COUNT(*) FROM tb_voucher_order WHERE id = 21").Scan(&confirmed); err != nil {
				t.Fatal(err)
			}
			news := int64(len(tt.batch)) - 1
			if tt.name == "WithARedelivery" {
				news = 0
			}
			if confirmed != 0 || out.Already != len(tt.batch)-int(news) {
				t.Fatalf("failed order 21 came again after a restock: outcome %+v, in tb_voucher_order %d times; want it settled already", out, confirmed)
			}
			if got := m.MustSaleState(t, 1); got != (testsupport.SaleState{Orders: 1 + news, Failures: 1, Stock: 5 - news}) {
				t.Fatalf("after the redelivery: %+v", got)
			}
		})
	}
}

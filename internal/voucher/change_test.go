package voucher_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/gate"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/orderdb"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
	"github.com/seckill/seckill/internal/voucher"
)

// racingSale is the gate with a buyer and the order-writer slipping in
// right after each stock change reaches Redis: a unit Redis has just been
// given is sold at once and settled in MySQL.
type racingSale struct {
	*gate.Store
	t      *testing.T
	m      *testsupport.MySQL
	buyer  int64
	failed []string
}

func (s *racingSale) Adjust(ctx context.Context, voucherID, delta int64, begin, end time.Time) (int64, error) {
	stock, err := s.Store.Adjust(ctx, voucherID, delta, begin, end)
	if err != nil || delta <= 0 {
		return stock, err
	}
	s.buyer++
	d, err := s.Try(ctx, voucherID, s.buyer, 9000+s.buyer)
	if err != nil || d.Err != nil {
		s.t.Fatalf("buyer after the restock: %v %v", d.Err, err)
	}
	out, err := orderdb.Apply(ctx, s.m.DB, []order.Event{{OrderID: 9000 + s.buyer, UserID: s.buyer, VoucherID: voucherID, AcceptedAt: d.AcceptedAt.UnixMilli()}})
	if err != nil {
		s.t.Fatal(err)
	}
	for reason := range out.Failed {
		s.failed = append(s.failed, reason)
	}
	return stock - 1, nil
}

// A restock goes to MySQL before Redis: a unit the gate sells the moment it
// appears in Redis must already be in MySQL, or the buyer told "accepted"
// gets a sold_out failure.
func TestRestockReachesMySQLBeforeRedis(t *testing.T) {
	r, m := testsupport.MustRedis(t), testsupport.MustMySQL(t)
	ctx := context.Background()
	const id = 5
	m.MustSeedVoucher(t, id, 0)
	store := gate.New(salestate.New(r.Client, r.Prefix))
	if err := store.Warm(ctx, id, 0, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	sale := &racingSale{Store: store, t: t, m: m}
	vs := &voucher.Vouchers{DB: m.DB, Sale: sale}
	if _, err := vs.ChangeSale(ctx, id, voucher.Change{AddStock: 3}); err != nil {
		t.Fatal(err)
	}
	if len(sale.failed) != 0 {
		t.Fatalf("a unit sold right after the restock failed in MySQL: %v", sale.failed)
	}
	if got := m.MustSaleState(t, id); got != (testsupport.SaleState{Orders: 1, Stock: 2}) {
		t.Fatalf("MySQL after +3 and one order: %+v, want 1 order and stock 2", got)
	}
}

// A second step that fails undoes the first, in either direction, so the
// two stores keep the same stock.
func TestHalfDoneChangesAreUndone(t *testing.T) {
	r, m := testsupport.MustRedis(t), testsupport.MustMySQL(t)
	ctx := context.Background()
	store := saletest.New(r.Client, r.Prefix)
	vs := &voucher.Vouchers{DB: m.DB, Sale: store.Gate}

	t.Run("RestockRedisRefuses", func(t *testing.T) {
		m.MustSeedVoucher(t, 7, 4) // its warm-up never happened
		if _, err := vs.ChangeSale(ctx, 7, voucher.Change{AddStock: 3}); !errors.Is(err, sale.ErrNotWarmed) {
			t.Fatalf("restock of a voucher Redis does not have: %v, want ErrNotWarmed", err)
		}
		if got := m.MustSaleState(t, 7); got.Stock != 4 {
			t.Fatalf("MySQL stock %d after a refused restock, want 4 (undone)", got.Stock)
		}
	})

	t.Run("ReductionMySQLRefuses", func(t *testing.T) {
		m.MustSeedVoucher(t, 8, 1) // MySQL has fewer than Redis
		if err := store.Gate.Warm(ctx, 8, 5, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, err := vs.ChangeSale(ctx, 8, voucher.Change{AddStock: -3}); err == nil {
			t.Fatal("a reduction MySQL cannot take succeeded")
		}
		if stock, _ := r.Client.HGet(ctx, store.KeysOf(8).Voucher, "stock").Int(); stock != 5 {
			t.Fatalf("Redis stock %d after MySQL refused, want 5 (undone)", stock)
		}
	})
}

// A stock change whose UPDATE reached MySQL and whose answer never came
// back (a node gone between the two): the api cannot tell whether MySQL
// took it. Whatever happened, Redis must not be left with more units than
// MySQL: a unit the gate sells must be in MySQL. The change is reported
// half done, naming the reconcile that mends it.
func TestChangesWhoseAnswerIsLostNeverLeaveRedisAbove(t *testing.T) {
	r, m := testsupport.MustRedis(t), testsupport.MustMySQL(t)
	ctx := context.Background()
	tap := testsupport.MustQueryTap(t, m.Addr)
	db := m.MustOpenThrough(t, tap)
	store := saletest.New(r.Client, r.Prefix)
	vs := &voucher.Vouchers{DB: db, Sale: store.Gate}
	update := func(q string) bool { return strings.HasPrefix(strings.TrimSpace(q), "UPDATE tb_seckill_voucher") }
	for _, tc := range []struct {
		name         string
		id, delta    int64
		mysql, redis int64 // the stocks after: the UPDATE was carried out
	}{
		{"Restock", 11, 3, 8, 5},    // no unit put on sale
		{"Reduction", 12, -3, 2, 2}, // not undone in Redis
	} {
		t.Run(tc.name, func(t *testing.T) {
			m.MustSeedVoucher(t, tc.id, 5)
			if err := store.Gate.Warm(ctx, tc.id, 5, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			var lost atomic.Bool
			tap.LoseNextAnswer(update, func([]string) { lost.Store(true) })
			_, err := vs.ChangeSale(ctx, tc.id, voucher.Change{AddStock: tc.delta})
			if !lost.Load() {
				t.Fatal("the tap lost no UPDATE's answer")
			}
			if !errors.Is(err, voucher.ErrStoresDisagree) || !strings.Contains(err.Error(), "seckillctl reconcile") {
				t.Fatalf("change whose answer was lost: %v, want ErrStoresDisagree naming the reconcile", err)
			}
			inMySQL := m.MustSaleState(t, tc.id).Stock
			totals, err := store.Totals(ctx, tc.id)
			if err != nil {
				t.Fatal(err)
			}
			if inMySQL != tc.mysql {
				t.Fatalf("MySQL stock %d, want %d: the UPDATE was carried out", inMySQL, tc.mysql)
			}
			if totals.Stock > inMySQL {
				t.Fatalf("Redis stock %d above MySQL's %d: the gate would sell units MySQL does not have", totals.Stock, inMySQL)
			}
			if totals.Stock != tc.redis {
				t.Fatalf("Redis stock %d, want %d", totals.Stock, tc.redis)
			}
		})
	}
}

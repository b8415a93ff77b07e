package reconcile_test

import (
	"testing"
	"time"

	"github.com/seckill/seckill/internal/reconcile"
)

// The invariants a sale in Redis must keep against MySQL, the first one
// broken named: MySQL has 10 units left and 5 orders.
func TestSaleViolation(t *testing.T) {
	ok := reconcile.SaleSize{Exists: true, Stock: 10, Buyers: 5, Epoch: "a", RedisNow: "a"}
	with := func(f func(*reconcile.SaleSize)) reconcile.SaleSize { s := ok; f(&s); return s }
	for _, tt := range []struct {
		name string
		sale reconcile.SaleSize
		want string
	}{
		{"as MySQL says", ok, ""},
		{"stock below MySQL's, buyers above its orders (orders on their way)", with(func(s *reconcile.SaleSize) { s.Stock, s.Buyers = 7, 8 }), ""},
		{"built before replication ids were stamped", with(func(s *reconcile.SaleSize) { s.Epoch = "" }), ""},
		{"missing", reconcile.SaleSize{}, reconcile.CheckVoucherMissing},
		{"an earlier release's layout", with(func(s *reconcile.SaleSize) { s.Outdated, s.Stock = true, 99 }), reconcile.CheckLayoutOutdated},
		{"another replication id", with(func(s *reconcile.SaleSize) { s.RedisNow, s.Stock = "b", 99 }), reconcile.CheckEpochChanged},
		{"frozen by a reconcile under way", with(func(s *reconcile.SaleSize) { s.FrozenFor = time.Minute }), ""},
		{"frozen past any reconcile's bound", with(func(s *reconcile.SaleSize) { s.FrozenFor = reconcile.StaleFreeze + time.Second; s.Stock = 11 }),
			reconcile.CheckFrozenStale},
		{"stock above MySQL's", with(func(s *reconcile.SaleSize) { s.Stock = 11 }), reconcile.CheckStockAboveMySQL},
		{"a buyer lost", with(func(s *reconcile.SaleSize) { s.Buyers = 4 }), reconcile.CheckBuyersLost},
		{"stock above and a buyer lost: the stock is named", with(func(s *reconcile.SaleSize) { s.Stock, s.Buyers = 11, 4 }), reconcile.CheckStockAboveMySQL},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := tt.sale.Violation(10, 5); got != tt.want {
				t.Fatalf("violation %q, want %q", got, tt.want)
			}
		})
	}
}

package sale_test

import (
	"testing"
	"time"

	"github.com/seckill/seckill/internal/sale"
)

// The invariants a sale in Redis must keep against MySQL, the first one
// broken named: MySQL has 10 units left and 5 orders.
func TestSaleViolation(t *testing.T) {
	ok := sale.Size{Exists: true, Stock: 10, Buyers: 5, Epoch: "a", RedisNow: "a"}
	with := func(f func(*sale.Size)) sale.Size { s := ok; f(&s); return s }
	for _, tt := range []struct {
		name string
		sale sale.Size
		want string
	}{
		{"as MySQL says", ok, ""},
		{"stock below MySQL's, buyers above its orders (orders on their way)", with(func(s *sale.Size) { s.Stock, s.Buyers = 7, 8 }), ""},
		{"built before replication ids were stamped", with(func(s *sale.Size) { s.Epoch = "" }), ""},
		{"missing", sale.Size{}, sale.CheckVoucherMissing},
		{"an earlier release's layout", with(func(s *sale.Size) { s.Outdated, s.Stock = true, 99 }), sale.CheckLayoutOutdated},
		{"another replication id", with(func(s *sale.Size) { s.RedisNow, s.Stock = "b", 99 }), sale.CheckEpochChanged},
		{"frozen by a reconcile under way", with(func(s *sale.Size) { s.FrozenFor = time.Minute }), ""},
		{"frozen past any reconcile's bound", with(func(s *sale.Size) { s.FrozenFor = sale.StaleFreeze + time.Second; s.Stock = 11 }),
			sale.CheckFrozenStale},
		{"stock above MySQL's", with(func(s *sale.Size) { s.Stock = 11 }), sale.CheckStockAboveMySQL},
		{"a buyer lost", with(func(s *sale.Size) { s.Buyers = 4 }), sale.CheckBuyersLost},
		{"stock above and a buyer lost: the stock is named", with(func(s *sale.Size) { s.Stock, s.Buyers = 11, 4 }), sale.CheckStockAboveMySQL},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := tt.sale.Violation(10, 5); got != tt.want {
				t.Fatalf("violation %q, want %q", got, tt.want)
			}
		})
	}
}

package orderdb_test

import (
	"context"
	"testing"

	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/orderdb"
	"github.com/seckill/seckill/internal/testsupport"
)

// The reconcile's view of MySQL is one snapshot: a batch the writer
// commits between SaleTruth's reads is either wholly in it (its unit
// taken, its buyer a holder, its id settled) or wholly out. Read in
// separate statements, the stock came from before the batch and the
// holders from after: a unit counted free for an order MySQL has.
func TestSaleTruthIsOneSnapshot(t *testing.T) {
	m := testsupport.MustMySQL(t)
	ctx := context.Background()
	m.MustSeedVoucher(t, 1, 10)
	late := ev(21, 7, 1)
	orders := &orderdb.Orders{DB: m.DB, AfterFirstTruthRead: func() {
		if _, err := orderdb.Apply(ctx, m.DB, []order.Event{late}); err != nil {
			t.Error(err)
		}
	}}
	truth, ok, err := orders.SaleTruth(ctx, 1, []int64{late.OrderID})
	if err != nil || !ok {
		t.Fatalf("SaleTruth: %v %v", ok, err)
	}
	_, holder := truth.Holders[late.UserID]
	settled := truth.Settled[late.OrderID]
	before := truth.Stock == 10 && !holder && !settled && truth.MaxOrderID == 0
	after := truth.Stock == 9 && holder && settled && truth.MaxOrderID == late.OrderID
	if !before && !after {
		t.Fatalf("truth mixes before and after the batch: stock %d, holder %v, settled %v, max order id %d",
			truth.Stock, holder, settled, truth.MaxOrderID)
	}
	if got := m.MustSaleState(t, 1); got.Orders != 1 {
		t.Fatalf("the batch was not committed: %+v", got)
	}
}

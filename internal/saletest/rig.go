package saletest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/orderdb"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/testsupport"
)

// Rig is a sale in n buckets with its MySQL row, and a reconciler.
type Rig struct {
	R       *testsupport.Redis
	Store   *Sales
	Voucher int64
	N       int // the sale's buckets
	Rec     *reconcile.Reconciler
}

// NewRig is a sale of stock units in n buckets, its MySQL row, and a
// reconciler of it.
func NewRig(t testing.TB, stock int64, n int) *Rig {
	t.Helper()
	m, k := testsupport.MustMySQL(t), testsupport.MustKafka(t)
	g := &Rig{N: n}
	g.R, g.Store, g.Voucher = HotSale(t, stock, n)
	m.MustSeedVoucherIn(t, g.Voucher, stock, n)
	g.Rec = &reconcile.Reconciler{Sale: g.Store.Repair, Records: &orderdb.Orders{DB: m.DB},
		Backlog: &broker.Progress{Brokers: k.Brokers, Group: testsupport.Group(t), Topic: k.MustTopic(t, 1)},
		Wait:    20 * time.Second, Poll: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	return g
}

// BucketVoucher is bucket b's voucher hash.
func (g *Rig) BucketVoucher(t testing.TB, b int) map[string]string {
	t.Helper()
	v, err := g.R.Client.HGetAll(context.Background(), salestate.BucketKeys(g.R.Prefix, g.Voucher, g.N, b).Voucher).Result()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Window is bucket b's begin and end, ms.
func (g *Rig) Window(t testing.TB, b int) [2]string {
	t.Helper()
	v := g.BucketVoucher(t, b)
	return [2]string{v[salestate.FieldBegin], v[salestate.FieldEnd]}
}

package voucher_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/gate"
	"github.com/seckill/seckill/internal/testsupport"
	"github.com/seckill/seckill/internal/voucher"
)

// The server makes a new voucher's commit and its answer never reaches
// the api, as when the node dies between the two (a failover): the
// voucher exists in MySQL. Create finds it there and puts its sale on in
// Redis, instead of an error that leaves a voucher in MySQL with no sale.
func TestCreateWhoseCommitAnswerIsLostIsComplete(t *testing.T) {
	r, m := testsupport.MustRedis(t), testsupport.MustMySQL(t)
	tap := testsupport.MustQueryTap(t, m.Addr)
	db := m.MustOpenThrough(t, tap)
	store := gate.NewStore(r.Client, r.Prefix)
	vs := &voucher.Vouchers{DB: db, Sale: store}
	var lost atomic.Bool
	tap.LoseNextCommitAnswer(func([]string) { lost.Store(true) })
	stock := int64(7)
	begin, end := time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	ctx := context.Background()
	id, err := vs.Create(ctx, voucher.Voucher{ShopID: 1, Title: "lost answer", PayValue: 100, ActualValue: 200,
		Type: voucher.TypeSeckill, Stock: &stock, BeginTime: &begin, EndTime: &end})
	if !lost.Load() {
		t.Fatal("the tap lost no COMMIT's answer")
	}
	if err != nil {
		t.Fatalf("Create after its commit's answer was lost: %v", err)
	}
	var inMySQL int64
	if err := m.DB.QueryRow("SELECT stock FROM tb_seckill_voucher WHERE voucher_id = ?", id).Scan(&inMySQL); err != nil || inMySQL != 7 {
		t.Fatalf("MySQL stock of voucher %d: %d, %v; want 7", id, inMySQL, err)
	}
	totals, err := store.Totals(ctx, id)
	if err != nil || totals.Stock != 7 {
		t.Fatalf("Redis of voucher %d: %+v, %v; want its sale on with 7 units", id, totals, err)
	}
}

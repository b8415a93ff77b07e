package voucher_test

import (
	"context"
	"errors"
	"strconv"
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

// The other side of a lost answer: the COMMIT never reached the server,
// which rolled the transaction back. The lookup finds no row, and the
// admin is told that nothing was created (503), with nothing on sale in
// Redis.
func TestCreateWhoseCommitNeverArrivedIsRefused(t *testing.T) {
	r, m := testsupport.MustRedis(t), testsupport.MustMySQL(t)
	tap := testsupport.MustQueryTap(t, m.Addr)
	db := m.MustOpenThrough(t, tap)
	store := gate.NewStore(r.Client, r.Prefix)
	vs := &voucher.Vouchers{DB: db, Sale: store}
	var lost atomic.Bool
	tap.LoseNextCommit(func([]string) { lost.Store(true) })
	stock := int64(7)
	begin, end := time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	title := "never committed " + strconv.FormatInt(time.Now().UnixNano(), 36)
	_, err := vs.Create(context.Background(), voucher.Voucher{ShopID: 1, Title: title, PayValue: 100, ActualValue: 200,
		Type: voucher.TypeSeckill, Stock: &stock, BeginTime: &begin, EndTime: &end})
	if !lost.Load() {
		t.Fatal("the tap lost no COMMIT")
	}
	if !errors.Is(err, voucher.ErrNotCreated) {
		t.Fatalf("Create whose COMMIT never arrived: %v; want ErrNotCreated", err)
	}
	var n int
	if err := m.DB.QueryRow("SELECT COUNT(*) FROM tb_voucher WHERE title = ?", title).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows titled %q, %v; want none", n, title, err)
	}
	if active, err := r.Client.SMembers(context.Background(), store.ActiveVouchers()).Result(); err != nil || len(active) != 0 {
		t.Fatalf("active sales in Redis: %v, %v; want none", active, err)
	}
}

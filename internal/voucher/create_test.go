package voucher_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/saletest"
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
	store := saletest.New(r.Client, r.Prefix)
	vs := &voucher.Vouchers{DB: db, Sale: store.Gate}
	var lost atomic.Bool
	tap.LoseNextCommitAnswer(func([]string) { lost.Store(true) })
	stock := int64(7)
	begin, end := time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	ctx := context.Background()
	id, err := vs.Create(ctx, voucher.Voucher{ShopID: 1, Title: "lost answer", PayValue: 100, ActualValue: 200,
		Type: voucher.TypeSeckill, Stock: &stock, BeginTime: &begin, EndTime: &end}, "")
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
	store := saletest.New(r.Client, r.Prefix)
	vs := &voucher.Vouchers{DB: db, Sale: store.Gate}
	var lost atomic.Bool
	tap.LoseNextCommit(func([]string) { lost.Store(true) })
	stock := int64(7)
	begin, end := time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	title := "never committed " + strconv.FormatInt(time.Now().UnixNano(), 36)
	_, err := vs.Create(context.Background(), voucher.Voucher{ShopID: 1, Title: title, PayValue: 100, ActualValue: 200,
		Type: voucher.TypeSeckill, Stock: &stock, BeginTime: &begin, EndTime: &end}, "")
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

// A proxy cut the admin's connection at COMMIT and delivered the COMMIT
// 500 ms later (HAProxy cuts live nodes' sessions): the creation's lookup
// found nothing, and without a key the admin was told nothing was made
// (ErrNotCreated) while the voucher landed; a retry made a second sale.
// With an Idempotency-Key the answer is "unknown: retry with the same
// key", and the retry answers the one voucher, its sale put on in Redis.
func TestACreationRetriedWithItsKeyIsMadeOnce(t *testing.T) {
	r, m := testsupport.MustRedis(t), testsupport.MustMySQL(t)
	tap := testsupport.MustQueryTap(t, m.Addr)
	store := saletest.New(r.Client, r.Prefix)
	vs := &voucher.Vouchers{DB: m.MustOpenThrough(t, tap), Sale: store.Gate}
	ctx := context.Background()
	stock := int64(7)
	begin, end := time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	for _, c := range []struct {
		name, key string
	}{{"without a key", ""}, {"with a key", "create-" + strconv.FormatInt(time.Now().UnixNano(), 36)}} {
		t.Run(c.name, func(t *testing.T) {
			title := c.name + " " + strconv.FormatInt(time.Now().UnixNano(), 36)
			v := voucher.Voucher{ShopID: 1, Title: title, PayValue: 100, ActualValue: 200, Type: voucher.TypeSeckill, Stock: &stock,
				BeginTime: &begin, EndTime: &end}
			landed := make(chan struct{})
			tap.DelayNextCommit(500*time.Millisecond, func([]string) { close(landed) })
			_, err := vs.Create(ctx, v, c.key)
			select {
			case <-landed:
			case <-time.After(10 * time.Second):
				t.Fatal("the tap never delivered the held COMMIT")
			}
			if c.key != "" && !errors.Is(err, voucher.ErrOutcomeUnknown) {
				t.Fatalf("a keyed creation whose COMMIT landed late: %v; want ErrOutcomeUnknown (retry with the same key)", err)
			}
			retried, err := vs.Create(ctx, v, c.key)
			if err != nil {
				t.Fatalf("the retry: %v", err)
			}
			var n int
			if err := m.DB.QueryRow("SELECT COUNT(*) FROM tb_voucher WHERE title = ?", title).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if c.key == "" {
				// What the key is for: without it the retry was a guess
				// (two vouchers when this test was written).
				t.Logf("%d vouchers titled %q after a keyless retry", n, title)
				return
			}
			if n != 1 {
				t.Fatalf("%d vouchers titled %q after a retry with the key; want 1", n, title)
			}
			var first int64
			if err := m.DB.QueryRow("SELECT id FROM tb_voucher WHERE title = ?", title).Scan(&first); err != nil || first != retried {
				t.Fatalf("the retry answered voucher %d; the one made is %d (%v)", retried, first, err)
			}
			if totals, err := store.Totals(ctx, retried); err != nil || totals.Stock != stock {
				t.Fatalf("Redis of voucher %d after the retry: %+v, %v; want its sale on with %d units", retried, totals, err, stock)
			}
			// The sale changes (as a sale that sells does), then a third
			// try with the key: the sale is left as it is, not warmed anew.
			if _, err := store.Gate.Adjust(ctx, retried, -2, begin, end); err != nil {
				t.Fatal(err)
			}
			if again, err := vs.Create(ctx, v, c.key); err != nil || again != retried {
				t.Fatalf("a third try with the key: %d, %v; want %d", again, err, retried)
			}
			if totals, err := store.Totals(ctx, retried); err != nil || totals.Stock != stock-2 {
				t.Fatalf("Redis of voucher %d after a third try with the key: %+v, %v; want the %d units it had, not its sale warmed anew",
					retried, totals, err, stock-2)
			}
			// Redis loses the sale after an order was taken (a failover
			// that lost its writes): a try with the key must not put it on
			// again with its whole stock and no buyers. Rebuilding it from
			// MySQL's orders is the sale check's job.
			if _, err := m.DB.Exec("INSERT INTO tb_voucher_order (id, user_id, voucher_id) VALUES (?, ?, ?)", time.Now().UnixNano(), 1, retried); err != nil {
				t.Fatal(err)
			}
			lost := r.Keys(t, r.Prefix+"*")
			if len(lost) == 0 {
				t.Fatal("no sale keys to lose")
			}
			for _, k := range lost { // one by one: a cluster's keys span slots
				if err := r.Client.Del(ctx, k).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if again, err := vs.Create(ctx, v, c.key); err != nil || again != retried {
				t.Fatalf("a try with the key after Redis lost the sale: %d, %v; want %d", again, err, retried)
			}
			if warmed := r.Keys(t, r.Prefix+"*"); len(warmed) != 0 {
				t.Fatalf("Redis after a try with the key once it lost voucher %d's sale with an order taken: %v; want nothing warmed (the sale check rebuilds it from MySQL)",
					retried, warmed)
			}
			other := v
			other.Title += " (another)"
			if _, err := vs.Create(ctx, other, c.key); !errors.Is(err, voucher.ErrKeyReused) {
				t.Fatalf("the key with another voucher: %v; want ErrKeyReused (422)", err)
			}
		})
	}
}

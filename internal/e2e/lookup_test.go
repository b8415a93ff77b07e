package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/testsupport"
)

// lookupTables are what an order lookup reads in MySQL.
var lookupTables = []string{"tb_voucher_order"}

// A crowd polling "did I get it?" must not reach MySQL while the sale
// runs: 500 polls of a confirmed order and 500 polls of "my order for this
// voucher" by a user without one cost no SELECT of the order tables. Once
// the sale's state has left Redis, each order costs at most one SELECT,
// however often it is polled.
func TestOrderLookupsCostNoMySQLDuringTheSale(t *testing.T) {
	st := stack{testsupport.MustRedis(t), testsupport.MustMySQL(t), testsupport.MustKafka(t)}
	tap := testsupport.MustQueryTap(t, st.mysql.Addr)
	cfg, err := mysql.ParseDSN(st.mysql.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = tap.Addr
	s := newSaleOn(t, st, map[string]string{"SECKILL_SALE_KEEP": "1s"},
		map[string]string{"SECKILL_MYSQL_DSN": cfg.FormatDSN(), "SECKILL_RATE_LOOKUP_USER": "off", "SECKILL_RATE_LOOKUP_IP": "off"})
	voucher := s.voucher(t, 10, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	v := strconv.FormatInt(voucher, 10)
	tokens := s.sessions(t, 1, 2)
	buyer, stranger := tokens[0], tokens[1]
	r := s.do(t, "POST", "/voucher-order/seckill/"+v, buyer, nil, "")
	orderID, _ := r.Data.(string)
	if r.Status != 200 || orderID == "" {
		t.Fatalf("buy: %+v", r)
	}
	s.audit(t, voucher, []string{orderID}, 1, 9)

	poll := func(path, token string, status int, what string) int {
		t.Helper()
		before := tap.Count(append([]string{"select"}, lookupTables...)...)
		for i := range 500 {
			r := s.do(t, "GET", path, token, nil, "")
			data, _ := r.Data.(map[string]any)
			if r.Status != status || status == 200 && (data["id"] != orderID || data["status"] != "confirmed") {
				t.Fatalf("poll %d of %s: %+v, want %d (%s)", i+1, path, r, status, what)
			}
		}
		return tap.Count(append([]string{"select"}, lookupTables...)...) - before
	}
	during := [2]int{poll("/voucher-order/"+orderID, buyer, 200, "confirmed"), poll("/voucher-order/of/voucher/"+v, stranger, 404, "no order")}
	t.Logf("SELECTs of the order tables over 500 polls during the sale: %d by order id, %d by voucher (a user without an order)", during[0], during[1])
	if during != [2]int{0, 0} {
		t.Errorf("during the sale, 500 polls cost %d and %d SELECTs, want none", during[0], during[1])
	}

	// End the sale; the writer retires it and its keys expire (SALE_KEEP 1s).
	end := time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)
	if r := s.do(t, "PUT", "/voucher/seckill/"+v, "", map[string]string{"X-Admin-Token": adminToken}, fmt.Sprintf(`{"endTime":%q}`, end)); r.Status != 200 {
		t.Fatalf("end the sale: %+v", r)
	}
	key := salestate.KeysFor(s.redis.Prefix, voucher).Voucher
	testsupport.Wait(t, 30*time.Second, "the sale's keys gone from Redis", func() bool {
		return s.redis.Client.Exists(context.Background(), key).Val() == 0
	})
	after := [2]int{poll("/voucher-order/"+orderID, buyer, 200, "confirmed"), poll("/voucher-order/of/voucher/"+v, stranger, 404, "no order")}
	t.Logf("after the sale: %d by order id, %d by voucher", after[0], after[1])
	if after[0] > 1 || after[1] > 1 {
		t.Errorf("after the sale, 500 polls cost %d and %d SELECTs, want at most one each", after[0], after[1])
	}
}

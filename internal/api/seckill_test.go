package api_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/internal/order"
)

func (a *testAPI) createVoucher(t *testing.T, stock int, begin, end time.Time) string {
	t.Helper()
	body := fmt.Sprintf(`{"shopId":1,"title":"t","subTitle":"s","rules":"r","payValue":100,"actualValue":1000,"stock":%d,"beginTime":%q,"endTime":%q}`,
		stock, begin.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339))
	res := call(t, "POST", a.URL+"/voucher/seckill", map[string]string{"X-Admin-Token": testAdminToken}, body)
	if res.Status != 200 || !res.Body.Success {
		t.Fatalf("create voucher: %d %s", res.Status, res.Raw)
	}
	return string(res.Body.Data)
}

func TestSeckillOutcomes(t *testing.T) {
	t.Parallel()
	a := startAPI(t, map[string]string{"SECKILL_ADMIN_TOKEN": testAdminToken, "SECKILL_RATE_SECKILL_USER": "off", "SECKILL_RATE_LOOKUP_USER": "off"})
	now := time.Now()
	open := a.createVoucher(t, 5, now.Add(-time.Hour), now.Add(time.Hour))
	early := a.createVoucher(t, 5, now.Add(time.Hour), now.Add(2*time.Hour))
	late := a.createVoucher(t, 5, now.Add(-2*time.Hour), now.Add(-time.Hour))
	empty := a.createVoucher(t, 0, now.Add(-time.Hour), now.Add(time.Hour))
	token, other := a.loggedIn(t, randomPhone()), a.loggedIn(t, randomPhone())
	auth := map[string]string{"authorization": token}

	res := call(t, "POST", a.URL+"/voucher-order/seckill/"+open, auth, nil)
	var orderID string
	if res.Status != 200 || !res.Body.Success || json.Unmarshal(res.Body.Data, &orderID) != nil || !regexp.MustCompile(`^[1-9][0-9]{9,18}$`).MatchString(orderID) {
		t.Fatalf("accepted order: %d %s, want the order id as a JSON string", res.Status, res.Raw)
	}

	tests := []struct {
		name, path string
		status     int
		outcome    *apperr.Error // for a 200
	}{
		{"AlreadyBought", "/voucher-order/seckill/" + open, 200, order.ErrAlreadyBought},
		{"NotStarted", "/voucher-order/seckill/" + early, 200, order.ErrNotStarted},
		{"Ended", "/voucher-order/seckill/" + late, 200, order.ErrEnded},
		{"StockZero", "/voucher-order/seckill/" + empty, 200, order.ErrSoldOut},
		{"UnknownVoucher", "/voucher-order/seckill/987654321", 200, order.ErrUnknownVoucher},
		{"IDNotANumber", "/voucher-order/seckill/abc", 400, nil},
		{"IDZero", "/voucher-order/seckill/0", 400, nil},
		{"IDNegative", "/voucher-order/seckill/-3", 400, nil},
		{"IDOverflow", "/voucher-order/seckill/99999999999999999999", 400, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, "POST", a.URL+tt.path, auth, nil)
			if res.Status != tt.status || res.Body.Success || res.Body.ErrorMsg == "" || tt.outcome != nil && res.Body.ErrorMsg != tt.outcome.Message {
				t.Fatalf("%d %s, want %d (outcome %v)", res.Status, res.Raw, tt.status, tt.outcome)
			}
		})
	}

	t.Run("OrderLookup", func(t *testing.T) {
		res := call(t, "GET", a.URL+"/voucher-order/"+orderID, auth, nil)
		var st struct {
			ID         string `json:"id"`
			Status     string `json:"status"`
			CreateTime string `json:"createTime"`
		}
		if res.Status != 200 || json.Unmarshal(res.Body.Data, &st) != nil || st.ID != orderID || st.Status != "pending" {
			t.Fatalf("owner's lookup: %d %s, want pending", res.Status, res.Raw)
		}
		if _, err := time.Parse(time.RFC3339, st.CreateTime); err != nil {
			t.Fatalf("createTime %q is not RFC 3339", st.CreateTime)
		}
		for _, c := range []struct{ who, id string }{{other, orderID}, {token, "123456789"}} {
			res := call(t, "GET", a.URL+"/voucher-order/"+c.id, map[string]string{"authorization": c.who}, nil)
			if res.Status != 404 || res.Body.Success {
				t.Fatalf("lookup of %s by someone else or unknown: %d %s, want 404", c.id, res.Status, res.Raw)
			}
		}
		if res := call(t, "GET", a.URL+"/voucher-order/x1", auth, nil); res.Status != 400 {
			t.Fatalf("malformed order id: %d", res.Status)
		}
	})

	// A client that lost its order id finds it by the voucher, and the
	// "already bought" answer names it too.
	t.Run("OrderOfVoucher", func(t *testing.T) {
		res := call(t, "GET", a.URL+"/voucher-order/of/voucher/"+open, auth, nil)
		var st struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		}
		if res.Status != 200 || json.Unmarshal(res.Body.Data, &st) != nil || st.ID != orderID || st.Status != "pending" {
			t.Fatalf("the buyer's order of the voucher: %d %s, want order %s pending", res.Status, res.Raw, orderID)
		}
		again := call(t, "POST", a.URL+"/voucher-order/seckill/"+open, auth, nil)
		var named string
		if again.Body.ErrorMsg != order.ErrAlreadyBought.Message || json.Unmarshal(again.Body.Data, &named) != nil || named != orderID {
			t.Fatalf("buying again: %s, want already bought naming order %s", again.Raw, orderID)
		}
		for _, c := range []struct{ who, voucher string }{{other, open}, {token, early}, {token, "987654321"}} {
			res := call(t, "GET", a.URL+"/voucher-order/of/voucher/"+c.voucher, map[string]string{"authorization": c.who}, nil)
			if res.Status != 404 || res.Body.Success {
				t.Fatalf("no order for voucher %s: %d %s, want 404", c.voucher, res.Status, res.Raw)
			}
		}
		if res := call(t, "GET", a.URL+"/voucher-order/of/voucher/x", auth, nil); res.Status != 400 {
			t.Fatalf("malformed voucher id: %d", res.Status)
		}
		if res := call(t, "GET", a.URL+"/voucher-order/of/voucher/"+open, nil, nil); res.Status != 401 {
			t.Fatalf("without a session: %d", res.Status)
		}
	})

	t.Run("VoucherList", func(t *testing.T) {
		res := call(t, "GET", a.URL+"/voucher/list/1", nil, nil)
		var list []map[string]any
		if res.Status != 200 || json.Unmarshal(res.Body.Data, &list) != nil || len(list) != 4 {
			t.Fatalf("list: %d %s", res.Status, res.Raw)
		}
		v := list[0]
		for _, field := range []string{"id", "shopId", "title", "subTitle", "rules", "payValue", "actualValue", "type", "status", "stock", "beginTime", "endTime"} {
			if _, ok := v[field]; !ok {
				t.Fatalf("voucher lacks %s: %v", field, v)
			}
		}
		if _, err := time.Parse(time.RFC3339, v["beginTime"].(string)); err != nil {
			t.Fatalf("beginTime %v is not RFC 3339", v["beginTime"])
		}
		ordinary := call(t, "POST", a.URL+"/voucher", map[string]string{"X-Admin-Token": testAdminToken},
			`{"shopId":2,"title":"plain","payValue":100,"actualValue":200}`)
		if ordinary.Status != 200 || !ordinary.Body.Success {
			t.Fatalf("ordinary voucher: %d %s", ordinary.Status, ordinary.Raw)
		}
		res = call(t, "GET", a.URL+"/voucher/list/2", nil, nil)
		if res.Status != 200 || strings.Contains(string(res.Body.Data), "stock") || strings.Contains(string(res.Body.Data), "null") {
			t.Fatalf("an ordinary voucher shows flash-sale fields or nulls: %s", res.Raw)
		}
	})
}

func TestCreateVoucherRejectsBadInput(t *testing.T) {
	t.Parallel()
	a := startAPI(t, map[string]string{"SECKILL_ADMIN_TOKEN": testAdminToken})
	admin := map[string]string{"X-Admin-Token": testAdminToken}
	for body, field := range map[string]string{
		// Each field well-formed, together no window: 422, the others 400.
		`{"title":"x","payValue":1,"actualValue":1,"stock":1,"beginTime":"2026-01-01T00:00:00Z","endTime":"2026-01-02T00:00:00Z"}`:                              "shopId",
		`{"shopId":1,"payValue":1,"actualValue":1,"stock":1,"beginTime":"2026-01-01T00:00:00Z","endTime":"2026-01-02T00:00:00Z"}`:                               "title",
		`{"shopId":1,"title":"x","payValue":1,"actualValue":1,"beginTime":"2026-01-01T00:00:00Z","endTime":"2026-01-02T00:00:00Z"}`:                             "stock",
		`{"shopId":1,"title":"x","payValue":1,"actualValue":1,"stock":-1,"beginTime":"2026-01-01T00:00:00Z","endTime":"2026-01-02T00:00:00Z"}`:                  "stock",
		`{"shopId":1,"title":"x","payValue":1,"actualValue":1,"stock":1,"beginTime":"2026-01-02T00:00:00Z","endTime":"2026-01-01T00:00:00Z"}`:                   "endTime must be after beginTime",
		`{"shopId":1,"title":"x","payValue":1,"actualValue":1,"stock":1,"beginTime":"2026-01-01T00:00:00Z","endTime":"2099-01-01T00:00:00Z"}`:                   "2038",
		`{"shopId":1,"title":"x","payValue":1,"actualValue":1,"stock":1}`:                                                                                       "beginTime and endTime",
		`{"shopId":1,"title":"x","payValue":1,"actualValue":1,"stock":1,"beginTime":"tomorrow","endTime":"2026-01-01T00:00:00Z"}`:                               "malformed",
		`{"shopId":1,"title":"x","payValue":1,"actualValue":1,"stock":"5","beginTime":"2026-01-01T00:00:00Z","endTime":"2026-01-02T00:00:00Z"}`:                 `field "stock" must be a number`,
		`{"shopId":1,"title":"x","payValue":1,"actualValue":1,"stock":5,"beginTime":"2026-01-01T00:00:00Z","endTime":"2026-01-02T00:00:00Z","stockBuckets":17}`: "stockBuckets",
		`{"shopId":1,"title":"x","payValue":1,"actualValue":1,"stock":5,"beginTime":"2026-01-01T00:00:00Z","endTime":"2026-01-02T00:00:00Z","stockBuckets":-1}`: "stockBuckets",
	} {
		want := 400
		if field == "endTime must be after beginTime" || field == "2038" {
			want = 422
		}
		res := call(t, "POST", a.URL+"/voucher/seckill", admin, body)
		if res.Status != want || res.Body.Success || !strings.Contains(res.Body.ErrorMsg, field) && (want == 422 || field == "stockBuckets") {
			t.Errorf("%s: %d %s, want %d (the %s)", body, res.Status, res.Raw, want, field)
		}
	}
}

// An admin changes a running sale: the gate and MySQL see the same stock
// and window.
func TestChangeSale(t *testing.T) {
	t.Parallel()
	a := startAPI(t, map[string]string{"SECKILL_ADMIN_TOKEN": testAdminToken, "SECKILL_RATE_SECKILL_USER": "off", "SECKILL_RATE_LOOKUP_USER": "off"})
	admin := map[string]string{"X-Admin-Token": testAdminToken}
	now := time.Now()
	id := a.createVoucher(t, 1, now.Add(-time.Hour), now.Add(time.Hour))
	buy := func(token string) response {
		return call(t, "POST", a.URL+"/voucher-order/seckill/"+id, map[string]string{"authorization": token}, nil)
	}
	if res := buy(a.loggedIn(t, randomPhone())); !res.Body.Success {
		t.Fatalf("first buyer: %s", res.Raw)
	}
	late := a.loggedIn(t, randomPhone())
	if res := buy(late); res.Body.ErrorMsg != order.ErrSoldOut.Message {
		t.Fatalf("second buyer: %s, want sold out", res.Raw)
	}
	mysqlStock := func() int {
		var n int
		if err := a.MySQL.DB.QueryRow("SELECT stock FROM tb_seckill_voucher WHERE voucher_id = ?", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	res := call(t, "PUT", a.URL+"/voucher/seckill/"+id, admin, `{"addStock":2}`)
	if res.Status != 200 || !strings.Contains(string(res.Body.Data), `"stock":2`) || mysqlStock() != 3 {
		t.Fatalf("restock: %d %s, MySQL stock %d (no writer runs here, so MySQL still counts the first order's unit)", res.Status, res.Raw, mysqlStock())
	}
	if res := buy(late); !res.Body.Success {
		t.Fatalf("after the restock: %s", res.Raw)
	}
	res = call(t, "PUT", a.URL+"/voucher/seckill/"+id, admin, `{"addStock":-5}`)
	if res.Status != 409 || mysqlStock() != 3 {
		t.Fatalf("removing more than remains: %d %s, MySQL stock %d", res.Status, res.Raw, mysqlStock())
	}
	future := now.Add(2 * time.Hour).UTC().Format(time.RFC3339)
	res = call(t, "PUT", a.URL+"/voucher/seckill/"+id, admin, `{"beginTime":"`+future+`","endTime":"`+now.Add(3*time.Hour).UTC().Format(time.RFC3339)+`"}`)
	if res.Status != 200 {
		t.Fatalf("moving the window: %d %s", res.Status, res.Raw)
	}
	if res := buy(a.loggedIn(t, randomPhone())); res.Body.ErrorMsg != order.ErrNotStarted.Message {
		t.Fatalf("after moving the window later: %s", res.Raw)
	}
	for body, status := range map[string]int{`{}`: 400, `{"endTime":"2000-01-01T00:00:00Z"}`: 409, `{"addStock":"x"}`: 400,
		`{"beginTime":"2030-01-02T00:00:00Z","endTime":"2030-01-01T00:00:00Z"}`: 422} {
		if res := call(t, "PUT", a.URL+"/voucher/seckill/"+id, admin, body); res.Status != status {
			t.Errorf("%s: %d %s, want %d", body, res.Status, res.Raw, status)
		}
	}
	if res := call(t, "PUT", a.URL+"/voucher/seckill/424242", admin, `{"addStock":1}`); res.Status != 404 {
		t.Errorf("unknown voucher: %d %s", res.Status, res.Raw)
	}
	if res := call(t, "PUT", a.URL+"/voucher/seckill/"+id, nil, `{"addStock":1}`); res.Status != 401 {
		t.Errorf("without the admin token: %d", res.Status)
	}
}

// A sale change that changes nothing in MySQL (the window it sets is the
// one it has) is done, not refused: MySQL counts changed rows, and a
// no-op used to be taken for a refusal and answered 500. A change MySQL
// really refuses is a 409 naming the bound.
func TestSaleChangeThatChangesNothing(t *testing.T) {
	t.Parallel()
	a := startAPI(t, map[string]string{"SECKILL_ADMIN_TOKEN": testAdminToken})
	now := time.Now()
	id := a.createVoucher(t, 5, now.Add(-time.Hour), now.Add(time.Hour))
	admin := map[string]string{"X-Admin-Token": testAdminToken}
	body := `{"addStock":0,"beginTime":"2000-01-01T00:00:00Z"}`
	for i := range 2 {
		if res := call(t, "PUT", a.URL+"/voucher/seckill/"+id, admin, body); res.Status != 200 || !res.Body.Success {
			t.Fatalf("change %d: %d %s, want 200", i+1, res.Status, res.Raw)
		}
	}
	// Redis has no unit MySQL lacks; MySQL alone is short (its row changed
	// under the API): the decrease is refused with its bound, and undone
	// in Redis.
	if _, err := a.MySQL.DB.Exec("UPDATE tb_seckill_voucher SET stock = 1 WHERE voucher_id = ?", id); err != nil {
		t.Fatal(err)
	}
	res := call(t, "PUT", a.URL+"/voucher/seckill/"+id, admin, `{"addStock":-3}`)
	if res.Status != 409 || !strings.Contains(res.Body.ErrorMsg, "100000000") {
		t.Fatalf("a decrease MySQL refuses: %d %s, want 409 naming the bound", res.Status, res.Raw)
	}
}

// The creating routes take an Idempotency-Key: the same key and body
// answer the first voucher's id (one voucher made), the key with another
// body 422, a key the server does not keep 400.
func TestCreatingAVoucherWithAnIdempotencyKey(t *testing.T) {
	t.Parallel()
	a := startAPI(t, map[string]string{"SECKILL_ADMIN_TOKEN": testAdminToken})
	now := time.Now().UTC()
	key := "k-" + randomPhone()
	body := func(title string) string {
		return fmt.Sprintf(`{"shopId":1,"title":%q,"payValue":100,"actualValue":1000,"stock":5,"beginTime":%q,"endTime":%q}`,
			title, now.Add(-time.Hour).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))
	}
	headers := func(key string) map[string]string {
		return map[string]string{"X-Admin-Token": testAdminToken, "Idempotency-Key": key}
	}
	for _, route := range []string{"/voucher/seckill", "/voucher"} {
		first := call(t, "POST", a.URL+route, headers(key), body("keyed"))
		again := call(t, "POST", a.URL+route, headers(key), body("keyed"))
		if first.Status != 200 || again.Status != 200 || string(first.Body.Data) != string(again.Body.Data) {
			t.Errorf("POST %s twice with one key: %d %s, then %d %s; want the same id twice", route, first.Status, first.Raw, again.Status, again.Raw)
		}
		if res := call(t, "POST", a.URL+route, headers(key), body("another")); res.Status != 422 || res.Body.Success {
			t.Errorf("POST %s with the key and another body: %d %s; want 422", route, res.Status, res.Raw)
		}
		for _, bad := range []string{"has space", strings.Repeat("k", 256), "é"} {
			if res := call(t, "POST", a.URL+route, headers(bad), body("bad key")); res.Status != 400 {
				t.Errorf("POST %s with Idempotency-Key %q: %d %s; want 400", route, bad, res.Status, res.Raw)
			}
		}
	}
}

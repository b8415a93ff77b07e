package api_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/internal/user"
)

const testAdminToken = "test-admin-token-0123456789"

// Every way a request can be wrong gets its status and a message that says
// what is wrong, in the Result envelope, with a request id.
func TestBadInputs(t *testing.T) {
	t.Parallel()
	a := startAPI(t, map[string]string{"SECKILL_API_BODY_LIMIT": "1024", "SECKILL_ADMIN_TOKEN": testAdminToken})
	valid := randomPhone()
	unknownToken := strings.Repeat("ab", 16)
	big := `{"phone":"` + valid + `","code":"` + strings.Repeat("1", 2000) + `"}`
	tests := []struct {
		name   string
		method string
		path   string
		header map[string]string
		body   any
		status int
		want   *apperr.Error // the outcome, for a 200
	}{
		{"code: missing phone", "POST", "/user/code", nil, nil, 400, nil},
		{"code: empty phone", "POST", "/user/code?phone=", nil, nil, 400, nil},
		{"code: short phone", "POST", "/user/code?phone=1380013800", nil, nil, 200, user.ErrInvalidPhone},
		{"code: letters", "POST", "/user/code?phone=1380013800a", nil, nil, 200, user.ErrInvalidPhone},
		{"code: landline prefix", "POST", "/user/code?phone=12800138000", nil, nil, 200, user.ErrInvalidPhone},
		{"code: huge phone", "POST", "/user/code?phone=" + strings.Repeat("1", 4000), nil, nil, 200, user.ErrInvalidPhone},
		{"code: wrong method", "GET", "/user/code?phone=" + valid, nil, nil, 405, nil},
		{"login: empty body", "POST", "/user/login", nil, "", 400, nil},
		{"login: truncated JSON", "POST", "/user/login", nil, `{"phone":"1`, 400, nil},
		{"login: malformed JSON", "POST", "/user/login", nil, `{phone:1}`, 400, nil},
		{"login: phone is a number", "POST", "/user/login", nil, `{"phone":13800138000,"code":"123456"}`, 400, nil},
		{"login: code is a number", "POST", "/user/login", nil, `{"phone":"` + valid + `","code":123456}`, 400, nil},
		{"login: code is an object", "POST", "/user/login", nil, `{"phone":"` + valid + `","code":{}}`, 400, nil},
		{"login: body is an array", "POST", "/user/login", nil, `[]`, 400, nil},
		{"login: two objects", "POST", "/user/login", nil, `{"phone":"1"} {"code":"2"}`, 400, nil},
		{"login: missing phone", "POST", "/user/login", nil, `{"code":"123456"}`, 400, nil},
		{"login: null phone", "POST", "/user/login", nil, `{"phone":null,"code":"123456"}`, 400, nil},
		{"login: missing code", "POST", "/user/login", nil, `{"phone":"` + valid + `"}`, 400, nil},
		{"login: password login", "POST", "/user/login", nil, `{"phone":"` + valid + `","password":"x"}`, 200, user.ErrPasswordLogin},
		{"login: invalid phone", "POST", "/user/login", nil, `{"phone":"123","code":"123456"}`, 200, user.ErrInvalidPhone},
		{"login: short code", "POST", "/user/login", nil, `{"phone":"` + valid + `","code":"12"}`, 200, user.ErrWrongCode},
		{"login: no code issued", "POST", "/user/login", nil, `{"phone":"` + randomPhone() + `","code":"123456"}`, 200, user.ErrNoCode},
		{"login: invalid UTF-8", "POST", "/user/login", nil, "{\"phone\":\"1\xff\",\"code\":\"123456\"}", 200, user.ErrInvalidPhone},
		{"login: body over the limit", "POST", "/user/login", nil, big, 413, nil},
		{"login: chunked body over the limit", "POST", "/user/login", nil, strings.NewReader(big), 413, nil},
		{"login: text/plain", "POST", "/user/login", map[string]string{"Content-Type": "text/plain"}, nil, 415, nil},
		{"login: wrong method", "GET", "/user/login", nil, nil, 405, nil},
		{"me: no authorization", "GET", "/user/me", nil, nil, 401, nil},
		{"me: garbage token", "GET", "/user/me", map[string]string{"authorization": "garbage"}, nil, 401, nil},
		{"me: unknown bearer token", "GET", "/user/me", map[string]string{"authorization": "Bearer " + unknownToken}, nil, 401, nil},
		{"me: wrong method", "POST", "/user/me", nil, nil, 405, nil},
		{"logout: no authorization", "POST", "/user/logout", nil, nil, 401, nil},
		{"logout: wrong method", "GET", "/user/logout", nil, nil, 405, nil},
		{"seckill: no authorization", "POST", "/voucher-order/seckill/1", nil, nil, 401, nil},
		{"seckill: expired session", "POST", "/voucher-order/seckill/1", map[string]string{"authorization": unknownToken}, nil, 401, nil},
		{"admin: no token", "POST", "/voucher/seckill", nil, nil, 401, nil},
		{"admin: wrong token", "POST", "/voucher/seckill", map[string]string{"X-Admin-Token": "nope"}, nil, 403, nil},
		{"admin: a user session is not an admin", "POST", "/voucher/seckill", map[string]string{"authorization": unknownToken}, nil, 401, nil},
		{"unknown route", "GET", "/no/such/route", nil, nil, 404, nil},
		{"versioned prefix is not a route", "POST", "/api/v1/user/code?phone=" + valid, nil, nil, 404, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, tt.method, a.URL+tt.path, tt.header, tt.body)
			if res.Status != tt.status {
				t.Fatalf("status %d, want %d: %s", res.Status, tt.status, res.Raw)
			}
			if res.Body.Success || res.Body.ErrorMsg == "" || tt.want != nil && res.Body.ErrorMsg != tt.want.Message {
				t.Fatalf("body %s, want success false and an errorMsg (outcome %v)", res.Raw, tt.want)
			}
			if res.Header.Get("X-Request-Id") == "" {
				t.Fatal("no X-Request-Id header")
			}
		})
	}
	if n := len(tests); n < 20 {
		t.Fatalf("only %d bad inputs", n)
	}
}

func TestAdminRoutes(t *testing.T) {
	t.Parallel()
	t.Run("RightToken", func(t *testing.T) {
		a := startAPI(t, map[string]string{"SECKILL_ADMIN_TOKEN": testAdminToken})
		// Past the guard, the handler itself judges the (empty) voucher.
		res := call(t, "POST", a.URL+"/voucher/seckill", map[string]string{"X-Admin-Token": testAdminToken}, `{}`)
		if res.Status != 400 || res.Body.Success || res.Body.ErrorMsg == "" {
			t.Fatalf("right admin token: %d %s", res.Status, res.Raw)
		}
		res = call(t, "POST", a.URL+"/voucher/seckill", map[string]string{"X-Admin-Token": testAdminToken + "x"}, nil)
		if res.Status != 403 {
			t.Fatalf("the token plus a character: %d %s", res.Status, res.Raw)
		}
	})
	t.Run("DisabledWithoutConfiguredToken", func(t *testing.T) {
		a := startAPI(t, nil)
		res := call(t, "POST", a.URL+"/voucher/seckill", map[string]string{"X-Admin-Token": "anything-at-all-123"}, nil)
		if res.Status != 403 || res.Body.Success {
			t.Fatalf("admin route with no token configured: %d %s", res.Status, res.Raw)
		}
	})
}

// A server fault answers 500 with a generic message; the cause goes to the
// log under the request id, never to the client.
func TestServerFaultHidesInternals(t *testing.T) {
	t.Parallel()
	a := startAPI(t, map[string]string{"SECKILL_CODE_COOLDOWN": "1ms"})
	if _, err := a.MySQL.DB.Exec("DROP TABLE tb_user"); err != nil {
		t.Fatal(err)
	}
	phone := randomPhone()
	res := a.login(t, phone, a.sendCode(t, phone))
	if res.Status != 500 || res.Body.Success || res.Body.ErrorMsg == "" {
		t.Fatalf("login with tb_user gone: %d %s", res.Status, res.Raw)
	}
	for _, leak := range []string{"tb_user", "Error 1146", "sql", "doesn't exist"} {
		if strings.Contains(res.Raw, leak) {
			t.Fatalf("the response leaks %q: %s", leak, res.Raw)
		}
	}
	id := res.Header.Get("X-Request-Id")
	logs := a.Logs.String()
	if id == "" || !strings.Contains(logs, "request_id="+id) || !strings.Contains(logs, "tb_user") {
		t.Fatalf("the log lacks the request id %q and the cause:\n%s", id, logs)
	}
}

// Every number an admin sends is bounded at the edge by what its column
// and the business accept: a 400 that names the field, never a 500 from
// the database.
func TestNumericInputsAreBounded(t *testing.T) {
	t.Parallel()
	a := startAPI(t, map[string]string{"SECKILL_ADMIN_TOKEN": testAdminToken})
	admin := map[string]string{"X-Admin-Token": testAdminToken}
	now := time.Now()
	open := a.createVoucher(t, 5, now.Add(-time.Hour), now.Add(time.Hour))
	window := fmt.Sprintf(`"beginTime":%q,"endTime":%q`, now.UTC().Format(time.RFC3339), now.Add(time.Hour).UTC().Format(time.RFC3339))
	shop := func(field string) string {
		return `{"name":"n","typeId":1,"x":120.1,"y":30.3,` + field + `}`
	}
	for _, tc := range []struct {
		name, method, path, body, field string
	}{
		{"AddStockOverflowsINT", "PUT", "/voucher/seckill/" + open, `{"addStock":3000000000}`, "addStock"},
		{"AddStockAboveTheCap", "PUT", "/voucher/seckill/" + open, `{"addStock":100000001}`, "addStock"},
		{"AddStockBelowTheCap", "PUT", "/voucher/seckill/" + open, `{"addStock":-3000000000}`, "addStock"},
		{"AddStockOnAnUnknownVoucher", "PUT", "/voucher/seckill/987654321", `{"addStock":3000000000}`, "addStock"},
		{"StockAboveTheCap", "POST", "/voucher/seckill", `{"shopId":1,"title":"t","payValue":1,"actualValue":2,"stock":3000000000,` + window + `}`, "stock"},
		{"PayValueNegative", "POST", "/voucher/seckill", `{"shopId":1,"title":"t","payValue":-1,"actualValue":2,"stock":1,` + window + `}`, "payValue"},
		{"ActualValueHuge", "POST", "/voucher", `{"shopId":1,"title":"t","payValue":1,"actualValue":1000000000000000}`, "actualValue"},
		{"ShopIDHuge", "POST", "/voucher", `{"shopId":9223372036854775807,"title":"t","payValue":1,"actualValue":2}`, "shopId"},
		{"ShopSoldOverflowsINT", "POST", "/shop", shop(`"sold":5000000000`), "sold"},
		{"ShopCommentsOverflowsINT", "POST", "/shop", shop(`"comments":5000000000`), "comments"},
		{"ShopAvgPriceHuge", "POST", "/shop", shop(`"avgPrice":1000000000000000`), "avgPrice"},
		{"ShopLongitude", "POST", "/shop", `{"name":"n","typeId":1,"x":181,"y":30}`, "x"},
		{"ShopLatitude", "PUT", "/shop", `{"id":1,"name":"n","typeId":1,"x":120,"y":-91}`, "y"},
		{"ShopTypeIDHuge", "POST", "/shop", `{"name":"n","typeId":9223372036854775807,"x":1,"y":1}`, "typeId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := call(t, tc.method, a.URL+tc.path, admin, tc.body)
			if res.Status != 400 || res.Body.Success || !strings.Contains(res.Body.ErrorMsg, tc.field) {
				t.Fatalf("%d %s, want 400 naming %s", res.Status, res.Raw, tc.field)
			}
		})
	}
	// Within its bounds, but past the cap with the stock the voucher has:
	// the voucher as it stands refuses it (409, the document's word for a
	// refusal no schema can state).
	res := call(t, "PUT", a.URL+"/voucher/seckill/"+open, admin, `{"addStock":99999999}`)
	if res.Status != 409 || !strings.Contains(res.Body.ErrorMsg, "100000000") {
		t.Fatalf("past the cap in total: %d %s, want 409 naming the cap", res.Status, res.Raw)
	}
}

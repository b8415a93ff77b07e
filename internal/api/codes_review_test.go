package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/testsupport"
)

func fromAddr(addr string) map[string]string { return map[string]string{"X-Forwarded-For": addr} }

// The per-phone ceiling is no lockout for the owner at a new address: past
// it, a new address still gets a code once the phone has had none for the
// slow interval, so strangers who used up the ceiling leave the owner a
// code within that interval, and the pump is bounded to one code per
// interval. Before, the fourth address was refused for the rest of the day.
func TestOwnerAtANewAddressPastTheCeiling(t *testing.T) {
	t.Parallel()
	a := startAPI(t, map[string]string{"SECKILL_API_TRUSTED_PROXIES": "127.0.0.1", "SECKILL_CODE_COOLDOWN": "1ms",
		"SECKILL_CODE_PHONE_DAILY_MAX": "3"})
	phone := randomPhone()
	for i := range 3 {
		if res := call(t, "POST", a.URL+"/user/code?phone="+phone, fromAddr(fmt.Sprintf("198.51.100.%d", i)), nil); res.Status != 200 {
			t.Fatalf("stranger %d's code: %d %s", i, res.Status, res.Raw)
		}
	}
	owner := fromAddr("203.0.113.9")
	if res := call(t, "POST", a.URL+"/user/code?phone="+phone, owner, nil); res.Status != 200 {
		t.Fatalf("the owner at a new address past the ceiling: %d %s, want a code", res.Status, res.Raw)
	}
	code := a.Inbox.last(t, phone)
	if res := call(t, "POST", a.URL+"/user/login", owner, `{"phone":"`+phone+`","code":"`+code+`"}`); res.Status != 200 || !res.Body.Success {
		t.Fatalf("the owner's login: %d %s", res.Status, res.Raw)
	}
	res := call(t, "POST", a.URL+"/user/code?phone="+phone, fromAddr("198.51.100.77"), nil)
	if res.Status != 429 || res.Header.Get("Retry-After") == "" {
		t.Fatalf("another new address within the slow interval: %d %s, want 429 with Retry-After", res.Status, res.Raw)
	}
}

// An IPv6 client is counted per /64, the block one subscriber gets: the
// addresses of one /64 share a code's cooldown; another /64 does not.
func TestIPv6IsCountedPer64(t *testing.T) {
	t.Parallel()
	a := startAPI(t, map[string]string{"SECKILL_API_TRUSTED_PROXIES": "127.0.0.1"})
	phone := randomPhone()
	if res := call(t, "POST", a.URL+"/user/code?phone="+phone, fromAddr("2001:db8:1:2::1"), nil); res.Status != 200 {
		t.Fatalf("first code: %d %s", res.Status, res.Raw)
	}
	if res := call(t, "POST", a.URL+"/user/code?phone="+phone, fromAddr("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), nil); res.Status != 429 {
		t.Fatalf("another address of the same /64 within the cooldown: %d %s, want 429", res.Status, res.Raw)
	}
	if res := call(t, "POST", a.URL+"/user/code?phone="+phone, fromAddr("2001:db8:1:3::1"), nil); res.Status != 200 {
		t.Fatalf("another /64: %d %s, want a code", res.Status, res.Raw)
	}
}

// A code request another site's page makes its visitors send is refused:
// Sec-Fetch-Site cross-site, or an Origin that is not the API's own (nor
// in SECKILL_API_ALLOWED_ORIGINS). Same-origin pages and clients that are
// no browser (no such headers) get their code.
func TestCrossSiteCodeRequestIsRefused(t *testing.T) {
	t.Parallel()
	a := startAPI(t, map[string]string{"SECKILL_CODE_COOLDOWN": "1ms", "SECKILL_API_ALLOWED_ORIGINS": "https://shop.example"})
	for _, tt := range []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"cross-site fetch", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"another site's origin", map[string]string{"Origin": "https://evil.example"}, 403},
		{"null origin", map[string]string{"Origin": "null"}, 403},
		{"same origin", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": a.URL}, 200},
		{"an allowed origin", map[string]string{"Origin": "https://shop.example"}, 200},
		{"an allowed origin's browser saying cross-site", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://shop.example"}, 200},
		// The course's nginx: its pages on another port of the API's host,
		// /api passed on with Host set to the upstream, and a browser that
		// sends no Fetch Metadata (plain HTTP to a host that is not
		// loopback, or an older browser).
		{"the same host on another port", map[string]string{"Origin": "http://127.0.0.1:18080"}, 200},
		{"another port of another host", map[string]string{"Origin": "http://localhost:18080"}, 403},
		{"a forwarded host from a client that is no proxy", map[string]string{"Origin": "https://evil.example", "X-Forwarded-Host": "evil.example"}, 403},
		{"typed in the address bar", map[string]string{"Sec-Fetch-Site": "none"}, 200},
		{"no browser", nil, 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, "POST", a.URL+"/user/code?phone="+randomPhone(), tt.header, nil)
			if res.Status != tt.want {
				t.Fatalf("%d %s, want %d", res.Status, res.Raw, tt.want)
			}
		})
	}
}

// Behind a trusted proxy the API's site is the host the proxy forwards:
// its own pages' origin is accepted, another site's still refused.
func TestCodeRequestBehindATrustedProxy(t *testing.T) {
	t.Parallel()
	a := startAPI(t, map[string]string{"SECKILL_CODE_COOLDOWN": "1ms", "SECKILL_API_TRUSTED_PROXIES": "127.0.0.1"})
	for _, tt := range []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"X-Forwarded-Host of the page's site", map[string]string{"Origin": "https://www.shop.example.com", "X-Forwarded-Host": "shop.example.com", "X-Forwarded-Proto": "https"}, 200},
		{"Forwarded of the page's site", map[string]string{"Origin": "https://shop.example.com", "Forwarded": "for=203.0.113.5;host=shop.example.com;proto=https"}, 200},
		{"another site's page", map[string]string{"Origin": "https://evil.example", "X-Forwarded-Host": "shop.example.com", "X-Forwarded-Proto": "https"}, 403},
		{"the page's site over plain HTTP", map[string]string{"Origin": "http://shop.example.com", "X-Forwarded-Host": "shop.example.com", "X-Forwarded-Proto": "https"}, 403},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, "POST", a.URL+"/user/code?phone="+randomPhone(), tt.header, nil)
			if res.Status != tt.want {
				t.Fatalf("%d %s, want %d", res.Status, res.Raw, tt.want)
			}
		})
	}
}

// The site's daily budget of codes: past it no code is sent to anyone
// (503 with Retry-After), and the metric shows the budget used.
func TestSiteWideCodeBudget(t *testing.T) {
	t.Parallel()
	a := startAPI(t, map[string]string{"SECKILL_CODE_COOLDOWN": "1ms", "SECKILL_CODE_SITE_DAILY_MAX": "3"})
	for i := range 3 {
		if res := call(t, "POST", a.URL+"/user/code?phone="+randomPhone(), nil, nil); res.Status != 200 {
			t.Fatalf("code %d within the budget: %d %s", i, res.Status, res.Raw)
		}
	}
	res := call(t, "POST", a.URL+"/user/code?phone="+randomPhone(), nil, nil)
	if res.Status != 503 || res.Header.Get("Retry-After") == "" || !strings.Contains(res.Body.ErrorMsg, "budget") {
		t.Fatalf("a code past the site's budget: %d %s, want 503 naming the budget, with Retry-After", res.Status, res.Raw)
	}
	_, metrics := testsupport.Get(t.Context(), a.Admin+"/metrics")
	for _, want := range []string{"seckill_login_codes_sent_total 3", "seckill_login_codes_refused_total{reason=\"site_budget\"} 1", "seckill_login_code_budget 3"} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("the metrics have no %q", want)
		}
	}
	_ = http.StatusOK
}

package api_test

import (
	"strconv"
	"testing"
)

func codeRequest(t *testing.T, a *testAPI, xff string) response {
	t.Helper()
	var h map[string]string
	if xff != "" {
		h = map[string]string{"X-Forwarded-For": xff}
	}
	return call(t, "POST", a.URL+"/user/code?phone="+randomPhone(), h, nil)
}

// X-Forwarded-For is believed only from a configured proxy, so a client
// cannot dodge a per-IP limit by sending a new address each time.
func TestPerIPLimitUsesTheRealClientIP(t *testing.T) {
	t.Parallel()
	t.Run("SpoofedHeaderFromAClientIsIgnored", func(t *testing.T) {
		a := startAPI(t, map[string]string{"SECKILL_RATE_CODE_IP": "3/1m"})
		for i := range 3 {
			if res := codeRequest(t, a, "10.0.0."+strconv.Itoa(i)); res.Status != 200 {
				t.Fatalf("request %d: %d %s", i+1, res.Status, res.Raw)
			}
		}
		res := codeRequest(t, a, "10.0.0.99")
		if res.Status != 429 {
			t.Fatalf("4th request with a new spoofed address: %d %s, want 429", res.Status, res.Raw)
		}
	})
	t.Run("TrustedProxyForwardsClients", func(t *testing.T) {
		a := startAPI(t, map[string]string{"SECKILL_RATE_CODE_IP": "3/1m", "SECKILL_API_TRUSTED_PROXIES": "127.0.0.1"})
		for i := range 6 {
			if res := codeRequest(t, a, "203.0.113."+strconv.Itoa(i)); res.Status != 200 {
				t.Fatalf("client %d behind the proxy: %d %s", i, res.Status, res.Raw)
			}
		}
		for i := range 3 {
			if res := codeRequest(t, a, "198.51.100.7"); res.Status != 200 {
				t.Fatalf("request %d of one forwarded client: %d %s", i+1, res.Status, res.Raw)
			}
		}
		// A client that prepends its own entry still counts as the
		// address the proxy saw.
		if res := codeRequest(t, a, "1.2.3.4, 198.51.100.7"); res.Status != 429 {
			t.Fatalf("4th request of one forwarded client: %d %s, want 429", res.Status, res.Raw)
		}
	})
}

func TestRateLimitedAnswer(t *testing.T) {
	t.Parallel()
	a := startAPI(t, map[string]string{"SECKILL_RATE_LOGIN_IP": "2/1m"})
	body := `{"phone":"123","code":"123456"}`
	for range 2 {
		call(t, "POST", a.URL+"/user/login", nil, body)
	}
	res := call(t, "POST", a.URL+"/user/login", nil, body)
	if res.Status != 429 || res.Body.Success || res.Body.ErrorMsg == "" {
		t.Fatalf("3rd login in the window: %d %s", res.Status, res.Raw)
	}
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err != nil || s < 1 || s > 60 {
		t.Fatalf("Retry-After %q, want 1..60 seconds", res.Header.Get("Retry-After"))
	}
}

// The two order-lookup routes share one per-user budget: a user polling
// in a loop gets 429 with Retry-After, whichever route it polls, while
// another user is still answered.
func TestOrderLookupsShareAPerUserLimit(t *testing.T) {
	t.Parallel()
	a := startAPI(t, map[string]string{"SECKILL_RATE_LOOKUP_USER": "4/1m"})
	polling, other := a.loggedIn(t, randomPhone()), a.loggedIn(t, randomPhone())
	paths := []string{"/voucher-order/123456789", "/voucher-order/of/voucher/987654321"}
	for i := range 4 {
		if res := call(t, "GET", a.URL+paths[i%2], map[string]string{"authorization": polling}, nil); res.Status != 404 {
			t.Fatalf("lookup %d: %d %s, want 404 (no such order)", i+1, res.Status, res.Raw)
		}
	}
	for _, p := range paths {
		res := call(t, "GET", a.URL+p, map[string]string{"authorization": polling}, nil)
		if res.Status != 429 || res.Body.Success || res.Header.Get("Retry-After") == "" {
			t.Fatalf("%s past the limit: %d %v %s, want 429 with Retry-After", p, res.Status, res.Header, res.Raw)
		}
	}
	if res := call(t, "GET", a.URL+paths[0], map[string]string{"authorization": other}, nil); res.Status != 404 {
		t.Fatalf("another user: %d %s, want 404", res.Status, res.Raw)
	}
}

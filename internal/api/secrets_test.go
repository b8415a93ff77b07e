package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/user"
)

// Without an SMS provider the API refuses to make a code rather than log
// it: whoever reads the logs must not be able to log in as anyone.
func TestLoginCodesAreNeverLoggedByDefault(t *testing.T) {
	t.Parallel()
	a := startAPIWith(t, nil, false, "http")
	phone := randomPhone()
	res := call(t, "POST", a.URL+"/user/code?phone="+phone, nil, nil)
	if res.Status != http.StatusServiceUnavailable || res.Body.Success || res.Body.ErrorMsg != user.ErrNoSender.Message {
		t.Fatalf("code without a sender: %d %s, want 503 ErrNoSender", res.Status, res.Raw)
	}
	if strings.Contains(a.Logs.String(), "code=") || a.Redis.Client.Exists(t.Context(), user.Keys{Prefix: a.Redis.Prefix}.Code(phone, "127.0.0.1")).Val() != 0 {
		t.Fatalf("a code was made or logged without a sender:\n%s", a.Logs.String())
	}
}

// Development mode logs the code, and says so loudly when it starts.
func TestDevelopmentModeLogsCodesAndSaysSo(t *testing.T) {
	t.Parallel()
	a := startAPIWith(t, map[string]string{"SECKILL_DEV_MODE": "true"}, false, "http")
	phone := randomPhone()
	if res := call(t, "POST", a.URL+"/user/code?phone="+phone, nil, nil); res.Status != 200 || !res.Body.Success {
		t.Fatalf("code in development mode: %d %s", res.Status, res.Raw)
	}
	code := a.Redis.Client.HGet(t.Context(), user.Keys{Prefix: a.Redis.Prefix}.Code(phone, "127.0.0.1"), "code").Val()
	logs := a.Logs.String()
	if code == "" || !strings.Contains(logs, "code="+code) || !strings.Contains(logs, "DEVELOPMENT MODE") {
		t.Fatalf("development mode: code %q, logs:\n%s", code, logs)
	}
}

// Metrics and profiles are served on the admin listener only, never on
// the port that faces clients.
func TestMetricsAndProfilesOnlyOnTheAdminListener(t *testing.T) {
	t.Parallel()
	a := startAPI(t, nil)
	for _, path := range []string{"/metrics", "/debug/pprof/", "/debug/pprof/profile?seconds=1"} {
		if res := call(t, "GET", a.URL+path, nil, nil); res.Status != http.StatusNotFound {
			t.Errorf("public GET %s: %d, want 404", path, res.Status)
		}
	}
	res, err := http.Get(a.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !strings.Contains(string(body), "seckill_http_requests_total") {
		t.Fatalf("admin /metrics: %d %.300s", res.StatusCode, body)
	}
	if res := call(t, "GET", a.URL+"/readyz", nil, nil); res.Status != 200 {
		t.Fatalf("public /readyz: %d, want 200 (load balancers ask it)", res.Status)
	}
}

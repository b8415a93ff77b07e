package api_test

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testsupport"
)

// fillToTheLimit leaves r just past its limit with keys that do not
// expire, so that neither volatile-lru nor noeviction has room to make: a
// write refused.
func fillToTheLimit(t *testing.T, r *testsupport.Redis) {
	t.Helper()
	testsupport.FillToTheLimit(t, r, 256<<10, 0)
}

// Redis at its memory limit refuses writes (OOM): that is an answer to
// give, not a fault. A route that must write answers 503 with Retry-After
// and says why, not 500 (POST /user/code; the order route answered 503
// already, its refusal wrapped as an order not taken). The admin listener's metrics show the master's
// memory against its limit and the keys it evicted on the way there (the
// buyer's session had an expiry, so it was among those the policy could
// evict).
func TestRedisAtItsMemoryLimitIsAnAnswer(t *testing.T) {
	t.Parallel()
	priv, _ := testsupport.MustPrivateRedis(t, "--maxmemory-policy", "volatile-lru")
	a := startAPI(t, map[string]string{"SECKILL_REDIS_ADDR": priv.Addr, "SECKILL_ADMIN_TOKEN": testAdminToken,
		"SECKILL_RATE_CODE_IP": "off", "SECKILL_RATE_LOGIN_IP": "off"})
	voucher := a.createVoucher(t, 10, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	token := a.loggedIn(t, randomPhone())
	fillToTheLimit(t, priv)

	for _, c := range []struct{ method, path string }{
		{"POST", "/user/code?phone=" + randomPhone()},
		{"POST", "/voucher-order/seckill/" + voucher},
	} {
		res := call(t, c.method, a.URL+c.path, map[string]string{"authorization": token}, nil)
		if res.Status != 503 || res.Header.Get("Retry-After") == "" || res.Body.Success {
			t.Errorf("%s %s with Redis at its limit: %d Retry-After %q %s; want 503 with Retry-After", c.method, c.path, res.Status, res.Header.Get("Retry-After"), res.Raw)
		}
	}
	_, metrics := testsupport.Get(context.Background(), a.Admin+"/metrics")
	limit, err := priv.Client.ConfigGet(context.Background(), "maxmemory").Result()
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string) float64 {
		for line := range strings.Lines(metrics) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+`{master="`+priv.Addr+`"} `); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatal(err)
				}
				return f
			}
		}
		t.Fatalf("the api's metrics lack %s of %s:\n%s", name, priv.Addr, grepLines(metrics, "seckill_redis_"))
		return 0
	}
	if got, want := value("seckill_redis_memory_limit_bytes"), limit["maxmemory"]; strconv.FormatFloat(got, 'f', 0, 64) != want {
		t.Errorf("seckill_redis_memory_limit_bytes %v, want the master's maxmemory %s", got, want)
	}
	if used := value("seckill_redis_memory_used_bytes"); used < 0.9*value("seckill_redis_memory_limit_bytes") {
		t.Errorf("seckill_redis_memory_used_bytes %v at the limit, want near %v", used, value("seckill_redis_memory_limit_bytes"))
	}
	if value("seckill_redis_evicted_keys_total") == 0 {
		t.Errorf("no eviction counted on the way to the limit (the session and the code had expiries)")
	}
}

// A login at Redis's memory limit answers 503 and uses nothing up: its
// code works once Redis has room again (it answered 500 after using the
// code up). Under noeviction, so that the code is not evicted on the way
// to the limit.
func TestALoginAtTheMemoryLimitKeepsItsCode(t *testing.T) {
	t.Parallel()
	priv, _ := testsupport.MustPrivateRedis(t, "--maxmemory-policy", "noeviction")
	for _, mode := range []string{"redis", "jwt"} {
		t.Run(mode, func(t *testing.T) {
			env := modeEnv(t, mode)
			maps.Copy(env, map[string]string{"SECKILL_REDIS_ADDR": priv.Addr, "SECKILL_RATE_CODE_IP": "off", "SECKILL_RATE_LOGIN_IP": "off"})
			a := startAPI(t, env)
			phone := randomPhone()
			code := a.sendCode(t, phone)
			fillToTheLimit(t, priv)
			res := a.login(t, phone, code)
			if res.Status != 503 || res.Header.Get("Retry-After") == "" || res.Body.Success {
				t.Errorf("POST /user/login with Redis at its limit: %d Retry-After %q %s; want 503 with Retry-After", res.Status,
					res.Header.Get("Retry-After"), res.Raw)
			}
			if err := priv.Client.ConfigSet(context.Background(), "maxmemory", "0").Err(); err != nil {
				t.Fatal(err)
			}
			if res := a.login(t, phone, code); res.Status != 200 || !res.Body.Success {
				t.Errorf("the login refused at the limit, tried again with its code once Redis had room: %d %s; want logged in", res.Status, res.Raw)
			}
		})
	}
}

func grepLines(text, prefix string) string {
	var out []string
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, prefix) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return strings.Join(out, "\n")
}

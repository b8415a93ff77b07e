package e2e

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testsupport"
)

// Two API processes share one Redis: a per-IP limit of N requests per 30 s
// (bursts up to N, one more every 5 s) holds across both: the (N+1)th gets
// 429 with Retry-After, and once that time has passed requests go through
// again.
func TestRateLimitHoldsAcrossTwoAPIInstances(t *testing.T) {
	s := stack{testsupport.MustRedis(t), testsupport.MustMySQL(t), testsupport.MustKafka(t)}
	bin := testsupport.MustBuild(t, "../../cmd/api")
	const n = 6
	var urls []string
	for range 2 {
		addr := testsupport.FreeAddr(t)
		env := s.env()
		env["SECKILL_API_ADDR"] = addr
		env["SECKILL_ADMIN_ADDR"] = testsupport.FreeAddr(t)
		env["SECKILL_DEV_MODE"] = "true"
		env["SECKILL_RATE_PREFIX"] = s.redis.Key("rate:")
		env["SECKILL_RATE_CODE_IP"] = fmt.Sprintf("%d/30s", n)
		testsupport.Start(t, bin, env)
		testsupport.Eventually(t, "http://"+addr+"/readyz", 200, 30*time.Second)
		urls = append(urls, "http://"+addr)
	}
	post := func(i int) *http.Response {
		phone := fmt.Sprintf("1%d%09d", 3+rand.IntN(7), rand.IntN(1_000_000_000))
		res, err := http.Post(urls[i%2]+"/user/code?phone="+phone, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}

	for i := range n {
		if res := post(i); res.StatusCode != 200 {
			t.Fatalf("request %d (instance %d): %d", i+1, i%2+1, res.StatusCode)
		}
	}
	limited := post(n)
	if limited.StatusCode != 429 {
		t.Fatalf("request %d across both instances: %d, want 429", n+1, limited.StatusCode)
	}
	retryAfter, err := strconv.Atoi(limited.Header.Get("Retry-After"))
	if err != nil || retryAfter < 1 || retryAfter > 5 {
		t.Fatalf("Retry-After %q, want 1..5 s (one request's share of 30 s)", limited.Header.Get("Retry-After"))
	}
	if res := post(n + 1); res.StatusCode != 429 {
		t.Fatalf("the other instance let request %d through: %d", n+2, res.StatusCode)
	}

	time.Sleep(time.Duration(retryAfter) * time.Second) // the test is about Retry-After: the window recovers in real time
	if res := post(0); res.StatusCode != 200 {
		t.Fatalf("after Retry-After: %d, want the window to have recovered", res.StatusCode)
	}
}

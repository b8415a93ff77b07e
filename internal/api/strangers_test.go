package api_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testsupport"
)

// usedMemory is Redis's used_memory, in bytes.
func usedMemory(t *testing.T, r *testsupport.Redis) int64 {
	t.Helper()
	info, err := r.Client.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no used_memory in INFO memory")
	return 0
}

// 100,000 requests for random unknown shop ids, from strangers who need no
// login, must not fill the Redis that holds the sale: it grows by less than
// 5 MB, and a sale running beside them sells its whole stock. The test has
// a Redis of its own, so that other tests' keys do not count; the
// per-address limit is raised so that the filter of shop ids, not the
// limit, is what stops them here.
func TestUnknownShopsCannotFillRedis(t *testing.T) {
	priv, _ := testsupport.MustPrivateRedis(t)
	a := startAPI(t, map[string]string{"SECKILL_REDIS_ADDR": priv.Addr, "SECKILL_ADMIN_TOKEN": testAdminToken,
		"SECKILL_RATE_SECKILL_USER": "off", "SECKILL_RATE_PUBLIC_IP": "1000000/1s",
		"SECKILL_RATE_CODE_IP": "off", "SECKILL_RATE_LOGIN_IP": "off"})
	const stock, buyers, strangers = 100, 200, 100_000
	now := time.Now()
	voucher := a.createVoucher(t, stock, now.Add(-time.Hour), now.Add(time.Hour))
	tokens := make([]string, buyers)
	for i := range tokens {
		tokens[i] = a.loggedIn(t, randomPhone())
	}
	before := usedMemory(t, priv)

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var found, failed atomic.Int64
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			for i := w; i < strangers; i += 32 {
				res, err := client.Get(fmt.Sprintf("%s/shop/%d", a.URL, 1_000_000+rand.Int64N(1<<40)))
				if err != nil {
					failed.Add(1)
					continue
				}
				res.Body.Close()
				if res.StatusCode != 200 {
					failed.Add(1)
				}
			}
		})
	}
	for _, token := range tokens {
		wg.Go(func() {
			res := call(t, "POST", a.URL+"/voucher-order/seckill/"+voucher, map[string]string{"authorization": token}, nil)
			if res.Status == 200 && res.Body.Success {
				found.Add(1)
			}
		})
	}
	wg.Wait()
	grown := usedMemory(t, priv) - before
	t.Logf("Redis grew by %.2f MB for %d unknown shop ids; %d of %d units sold; %d requests not answered 200",
		float64(grown)/(1<<20), strangers, found.Load(), stock, failed.Load())
	if found.Load() != stock {
		t.Fatalf("the sale beside them sold %d of %d units", found.Load(), stock)
	}
	if grown >= 5<<20 {
		t.Fatalf("Redis grew by %.1f MB for %d unknown shop ids, want under 5 MB", float64(grown)/(1<<20), strangers)
	}
}

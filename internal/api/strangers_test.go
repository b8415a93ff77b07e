package api_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testsupport"
)

// Requests for random unknown shop ids, from strangers who need no login,
// must not fill the Redis that holds the sale: what Redis holds must not
// grow with the number of ids asked for, and a sale running beside them
// sells its whole stock. Redis's own buffers and the sale's keys grow by
// about 2 MB whatever the number of strangers, so the growth is measured
// per id over a second wave of 20,000 after a first one: a cached "no such
// shop" per id costs about 210 bytes (key, value, expiry), the bound is
// 16. The test has a Redis of its own, so that other tests' keys do not
// count; the per-address limit is raised so that the filter of shop ids,
// not the limit, is what stops them here.
func TestUnknownShopsCannotFillRedis(t *testing.T) {
	t.Parallel()
	priv, _ := testsupport.MustPrivateRedis(t)
	a := startAPI(t, map[string]string{"SECKILL_REDIS_ADDR": priv.Addr, "SECKILL_ADMIN_TOKEN": testAdminToken,
		"SECKILL_RATE_SECKILL_USER": "off", "SECKILL_RATE_PUBLIC_IP": "1000000/1s",
		"SECKILL_RATE_CODE_IP": "off", "SECKILL_RATE_LOGIN_IP": "off"})
	const stock, buyers, firstWave, secondWave, bytesPerID = 100, 150, 3_000, 20_000, 16
	now := time.Now()
	voucher := a.createVoucher(t, stock, now.Add(-time.Hour), now.Add(time.Hour))
	tokens := make([]string, buyers)
	for i := range tokens {
		tokens[i] = a.loggedIn(t, randomPhone())
	}

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var found, failed atomic.Int64
	strangers := func(wg *sync.WaitGroup, n int) {
		for w := range 32 {
			wg.Go(func() {
				for i := w; i < n; i += 32 {
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
	}
	var first sync.WaitGroup
	strangers(&first, firstWave)
	for _, token := range tokens {
		first.Go(func() {
			res := call(t, "POST", a.URL+"/voucher-order/seckill/"+voucher, map[string]string{"authorization": token}, nil)
			if res.Status == 200 && res.Body.Success {
				found.Add(1)
			}
		})
	}
	first.Wait()
	if found.Load() != stock {
		t.Fatalf("the sale beside the strangers sold %d of %d units", found.Load(), stock)
	}
	before := testsupport.UsedMemory(t, priv.Client)
	var second sync.WaitGroup
	strangers(&second, secondWave)
	second.Wait()
	grown := testsupport.UsedMemory(t, priv.Client) - before
	t.Logf("Redis grew by %d bytes (%.1f per id) for %d more unknown shop ids; %d requests not answered 200",
		grown, float64(grown)/secondWave, secondWave, failed.Load())
	if grown >= secondWave*bytesPerID {
		t.Fatalf("Redis grew by %d bytes for %d unknown shop ids, want under %d a shop id", grown, secondWave, bytesPerID)
	}
}

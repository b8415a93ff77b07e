//go:build chaos

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/schema"
	"github.com/seckill/seckill/internal/shop"
	"github.com/seckill/seckill/internal/testsupport"
)

// Redis fills up under a running sale, as production runs it: the caches
// on a Redis of their own (allkeys-lru), the sale and the sessions on one
// that evicts nothing (noeviction). 200 buyers are logged in and a sale of
// 150 units is open; the first 100 buy. Then the caches' Redis is filled
// with four times the cache entries it has room for: it evicts them, and no buyer's
// session is lost. Then the sale's Redis is filled to its limit: every
// buyer is answered an outcome or 503 with Retry-After (never 401, never
// 500), and every session is still there. Once Redis has room the other
// 100 buy, and every accepted order settles exactly.
//
// On one Redis under volatile-lru (the layout before the caches had a
// Redis of their own) the cache entries evicted the sessions beside them.
func TestChaosRedisFillsUpUnderASale(t *testing.T) {
	sales, _ := testsupport.MustPrivateRedis(t, "--maxmemory-policy", "noeviction")
	caches, _ := testsupport.MustPrivateRedis(t, "--maxmemory-policy", "allkeys-lru")
	st := stack{sales, testsupport.MustMySQL(t), testsupport.MustKafka(t)}
	// Every session lookup asks Redis: what is asserted is what Redis
	// holds, not an instance's memory of it.
	s := newSaleOn(t, st, nil, map[string]string{"SECKILL_CACHE_REDIS_ADDR": caches.Addr, "SECKILL_SESSION_CACHE_TTL": "off"})
	if err := schema.Seed(context.Background(), st.mysql.DB); err != nil {
		t.Fatal(err)
	}
	invEnv, invAdmin := st.invalidatorEnv(t)
	invEnv["SECKILL_CACHE_REDIS_ADDR"] = caches.Addr
	testsupport.Start(t, testsupport.MustBuild(t, "../../cmd/cache-invalidator"), invEnv)
	testsupport.Eventually(t, "http://"+invAdmin+"/readyz", 200, 30*time.Second)
	cachesHoldShop1(t, s, st, caches)

	const stock, buyers = 150, 200
	v := s.voucher(t, stock, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	tokens := s.sessions(t, 1, buyers)
	path := "/voucher-order/seckill/" + strconv.FormatInt(v, 10)

	var mu sync.Mutex
	var orders []attempt
	tally := map[string]int{}
	// buy has each of tokens ask once. It returns the tokens told to try
	// again (503 with Retry-After), and the answers that are neither that
	// nor an outcome.
	buy := func(phase string, tokens []string) (again, wrong []string) {
		var wg sync.WaitGroup
		for _, tok := range tokens {
			wg.Go(func() {
				r := s.do(t, "POST", path, tok, nil, "")
				mu.Lock()
				defer mu.Unlock()
				id, _ := r.Data.(string)
				switch {
				case r.Status == 200 && r.Success:
					orders = append(orders, attempt{voucher: v, status: 200, orderID: id, token: tok, final: true})
					tally[phase+": accepted"]++
				case r.Status == 200:
					tally[fmt.Sprintf("%s: %s", phase, r.ErrorMsg)]++
				case r.Status == 503 && r.RetryAfter != "" && id == "":
					tally[fmt.Sprintf("%s: 503 %s", phase, r.ErrorMsg)]++
					again = append(again, tok)
				default:
					wrong = append(wrong, fmt.Sprintf("%d Retry-After %q %s %v", r.Status, r.RetryAfter, r.ErrorMsg, r.Data))
				}
			})
		}
		wg.Wait()
		return again, wrong
	}
	// lost is how many of the buyers' sessions the api no longer knows.
	lost := func() (n int, other []string) {
		for _, tok := range tokens {
			switch r := s.do(t, "GET", "/user/me", tok, nil, ""); r.Status {
			case 200:
			case 401:
				n++
			default:
				other = append(other, fmt.Sprintf("%d %s", r.Status, r.ErrorMsg))
			}
		}
		return n, other
	}

	if again, wrong := buy("before", tokens[:100]); len(again)+len(wrong) > 0 {
		t.Fatalf("before Redis filled up: %d told to try again, %d answered neither an outcome nor 503 (%q)", len(again), len(wrong), wrong)
	}

	// Cache entries (1 KB, an hour's TTL, as a shop page's): 16 MB into
	// the caches' Redis's 4 MB of room.
	written := testsupport.FillToTheLimit(t, caches, 4<<20, time.Hour)
	evicted := testsupport.InfoInt(t, caches.Client, "stats", "evicted_keys")
	n, other := lost()
	t.Logf("caches' Redis: %d cache entries written, %d evicted; sessions lost: %d of %d", written, evicted, n, buyers)
	if evicted == 0 {
		t.Fatalf("the caches' Redis evicted nothing: it was not filled past its limit")
	}
	if n > 0 || len(other) > 0 {
		t.Fatalf("%d of %d sessions lost, %d lookups answered otherwise (%q), while the caches' Redis evicted caches", n, buyers, len(other), other)
	}

	filled := testsupport.FillToTheLimit(t, sales, 256<<10, 0)
	again, wrong := buy("at the limit", tokens)
	n, other = lost()
	t.Logf("the sale's Redis at its limit (%d keys to fill it): %d answers neither an outcome nor 503 with Retry-After; sessions lost: %d, lookups answered otherwise: %d",
		filled, len(wrong), n, len(other))
	if len(wrong) > 0 {
		t.Errorf("at the limit %d buyers were answered neither an outcome nor 503 with Retry-After, e.g. %q", len(wrong), wrong[:min(3, len(wrong))])
	}
	if len(again) == 0 {
		t.Errorf("at the limit no buyer was told to try again: Redis took every write, so the limit was not tested")
	}
	if n > 0 || len(other) > 0 {
		t.Errorf("at the limit %d sessions lost, %d lookups answered neither 200 nor 401 (%q)", n, len(other), other[:min(3, len(other))])
	}

	if err := sales.Client.ConfigSet(context.Background(), "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	pending := tokens
	testsupport.Wait(t, 30*time.Second, "every buyer answered an outcome once Redis has room", func() bool {
		again, wrong := buy("after", pending)
		if len(wrong) > 0 {
			t.Fatalf("once Redis had room: %q", wrong)
		}
		pending = again
		return len(pending) == 0
	})
	t.Logf("answers: %v", tally)
	fates := settleSales(t, s, []int64{v}, stock, orders)
	t.Logf("fates: %v", fates)
}

// cachesHoldShop1: a shop page the api read is cached on the caches'
// Redis, not on the sale's, and a change of its row deletes it there (the
// cache-invalidator follows the binlog).
func cachesHoldShop1(t *testing.T, s *sale, st stack, caches *testsupport.Redis) {
	t.Helper()
	ctx := context.Background()
	key := shop.Keys{Prefix: st.redis.Prefix}.Shop(1)
	if r := s.do(t, "GET", "/shop/1", "", nil, ""); r.Status != 200 || !r.Success {
		t.Fatalf("GET /shop/1: %+v", r)
	}
	if caches.Client.Exists(ctx, key).Val() != 1 || st.redis.Client.Exists(ctx, key).Val() != 0 {
		t.Fatalf("shop 1 read: %s on the caches' Redis %d, on the sale's %d; want on the caches' only", key,
			caches.Client.Exists(ctx, key).Val(), st.redis.Client.Exists(ctx, key).Val())
	}
	// Until a change is seen: the follower may start after the first one.
	if !testsupport.Poll(20*time.Second, func() bool {
		if _, err := st.mysql.DB.Exec("UPDATE tb_shop SET comments = comments + 1 WHERE id = 1"); err != nil {
			t.Fatal(err)
		}
		return testsupport.Poll(300*time.Millisecond, func() bool { return caches.Client.Exists(ctx, key).Val() == 0 })
	}) {
		t.Fatalf("the changed shop's cache entry is still on the caches' Redis 20 s later")
	}
}

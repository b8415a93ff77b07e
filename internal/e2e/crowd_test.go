//go:build chaos

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
)

// attempt is one answer a buyer got: when, on which sale, what.
type attempt struct {
	at      time.Duration // answered, since the crowd began
	sent    time.Duration // asked, since the crowd began
	voucher int64
	status  int
	orderID string // accepted, or reserved (503 with an id: the relay delivers it)
	msg     string
	token   string
	final   bool // the buyer stopped here; otherwise told to try again, and did
	err     bool // no HTTP answer at all (a connection cut by a dying instance)
}

// crowd is buyers on sales: each arrives at random over the first 8 s and
// tries again 200 ms after an answer that says to (a 503 without an order;
// the load balancer's 502 or 504 when an instance died under the request)
// or no answer at all, for two minutes (two brokers of three down take
// about 35 s to come back after their restart).
type crowd struct {
	begin   time.Time
	mu      sync.Mutex
	answers []attempt
	wg      sync.WaitGroup
}

const (
	crowdArrival  = 8 * time.Second
	crowdPatience = 2 * time.Minute
)

// startCrowd sends perSale buyers (tokens in order) to each voucher, each
// buyer on a connection of its own, as real ones are: 200 shared
// connections held by requests waiting on a failing server would queue
// every other buyer behind them.
func startCrowd(t *testing.T, s *sale, vouchers []int64, tokens []string, perSale int) *crowd {
	s.client = &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4000, MaxConnsPerHost: 4000}}
	c := &crowd{begin: time.Now()}
	for i, v := range vouchers {
		for _, tok := range tokens[i*perSale : (i+1)*perSale] {
			c.wg.Go(func() {
				time.Sleep(time.Duration(rand.Int64N(int64(crowdArrival)))) // the buyers' arrivals spread over crowdArrival: the schedule, not a wait
				for {
					a := c.ask(s, v, tok)
					a.final = !(tryAgain(a) || a.err) || time.Since(c.begin) > crowdPatience
					c.mu.Lock()
					c.answers = append(c.answers, a)
					c.mu.Unlock()
					if a.final {
						return
					}
					time.Sleep(200 * time.Millisecond) // the buyer's pace of trying again, not a wait for an event
				}
			})
		}
	}
	return c
}

// tryAgain: an answer without an order that tells the buyer to come back.
func tryAgain(a attempt) bool {
	return a.orderID == "" && (a.status == 503 || a.status == 502 || a.status == 504)
}

// ask is one POST; a transport error (an instance killed mid-request) is
// an answer too, which the buyer retries.
func (c *crowd) ask(s *sale, voucher int64, token string) attempt {
	a := attempt{voucher: voucher, token: token, sent: time.Since(c.begin)}
	req, _ := http.NewRequest("POST", s.api+"/voucher-order/seckill/"+strconv.FormatInt(voucher, 10), nil)
	req.Header.Set("authorization", token)
	res, err := s.client.Do(req)
	a.at = time.Since(c.begin)
	if err != nil {
		a.err, a.msg = true, err.Error()
		return a
	}
	defer res.Body.Close()
	var r result
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
		a.status, a.msg = res.StatusCode, err.Error()
		return a
	}
	a.status, a.msg = res.StatusCode, r.ErrorMsg
	a.orderID, _ = r.Data.(string)
	return a
}

// wait returns every answer once every buyer has stopped.
func (c *crowd) wait() []attempt {
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	slices.SortFunc(c.answers, func(a, b attempt) int { return int(a.at - b.at) })
	return slices.Clone(c.answers)
}

// ordersOf is the final answers that carry an order (accepted, or
// reserved: 503 with its id), and a tally of every final answer.
func ordersOf(answers []attempt) (orders []attempt, tally map[string]int) {
	tally = map[string]int{}
	for _, a := range answers {
		switch {
		case !a.final:
		case a.status == 200 && a.orderID != "":
			tally["accepted"]++
			orders = append(orders, a)
		case a.status == 503 && a.orderID != "":
			tally["reserved (503 with its order id)"]++
			orders = append(orders, a)
		default:
			tally[fmt.Sprintf("%d %s", a.status, a.msg)]++
		}
	}
	return orders, tally
}

// settleSales is the audit: every sale settles (Redis's stock equals
// MySQL's, nothing pending), nothing oversold, nobody twice, a unit left
// is on sale, and every acknowledged order is confirmed or failed with a
// reason its buyer reads. It returns the orders' fates.
func settleSales(t *testing.T, s *sale, vouchers []int64, stock int, orders []attempt) map[string]int {
	t.Helper()
	ctx := context.Background()
	store := saletest.New(s.redis.Client, s.redis.Prefix)
	for i, v := range vouchers {
		lay, err := store.LayoutOf(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		var n, distinct, mysqlStock int
		testsupport.Wait(t, 90*time.Second, fmt.Sprintf("voucher %d: Redis's stock equals MySQL's, nothing pending", v), func() bool {
			if err := s.mysql.DB.QueryRow(`SELECT COUNT(*), COUNT(DISTINCT user_id), (SELECT stock FROM tb_seckill_voucher WHERE voucher_id = ?)
				FROM tb_voucher_order WHERE voucher_id = ?`, v, v).Scan(&n, &distinct, &mysqlStock); err != nil {
				t.Fatal(err)
			}
			var redisStock int
			var pending int64
			for b := range lay.N() {
				k := salestate.BucketKeys(s.redis.Prefix, v, lay.N(), b)
				st, err := s.redis.Client.HGet(ctx, k.Voucher, "stock").Int()
				if err != nil {
					return false
				}
				redisStock += st
				pending += s.redis.Client.HLen(ctx, k.Pending).Val()
			}
			return redisStock == mysqlStock && pending == 0
		})
		if n > stock || n+mysqlStock != stock || distinct != n {
			t.Fatalf("voucher %d: %d orders by %d users, stock %d of %d: oversold, a unit lost or someone twice", v, n, distinct, mysqlStock, stock)
		}
		if mysqlStock > 0 {
			tok := s.sessions(t, int64(100000+i), 1)[0]
			if r := s.do(t, "POST", "/voucher-order/seckill/"+strconv.FormatInt(v, 10), tok, nil, ""); r.Status != 200 || !r.Success {
				t.Fatalf("voucher %d has %d units left but a new buyer got %d %q", v, mysqlStock, r.Status, r.ErrorMsg)
			}
		}
	}
	fates := map[string]int{}
	for _, o := range orders {
		var r result
		testsupport.Wait(t, 30*time.Second, "order "+o.orderID+" settled", func() bool {
			r = s.do(t, "GET", "/voucher-order/"+o.orderID, o.token, nil, "")
			st, _ := r.Data.(map[string]any)
			return r.Status == 200 && st["status"] != "pending"
		})
		st, _ := r.Data.(map[string]any)
		status, _ := st["status"].(string)
		reason, _ := st["reason"].(string)
		switch {
		case status == "confirmed":
		case status == "failed" && reason != "":
		default:
			t.Fatalf("order %s (voucher %d, answered %d): %v", o.orderID, o.voucher, o.status, r.Data)
		}
		fates[status+" "+reason]++
	}
	t.Logf("the %d acknowledged orders, by what became of them: %v", len(orders), fates)
	return fates
}

// acceptedAt is when each order was accepted, sorted, split by whether its
// sale is among those kept.
func acceptedAt(orders []attempt, keep func(voucher int64) bool) (kept, others []time.Duration) {
	for _, o := range orders {
		if keep(o.voucher) {
			kept = append(kept, o.at)
		} else {
			others = append(others, o.at)
		}
	}
	slices.Sort(kept)
	slices.Sort(others)
	return kept, others
}

// longestGapAfter is the longest time between two consecutive moments of
// at that ends after from, and when it began.
func longestGapAfter(at []time.Duration, from time.Duration) (gap, began time.Duration) {
	for i := 1; i < len(at); i++ {
		if at[i] > from && at[i]-at[i-1] > gap {
			gap, began = at[i]-at[i-1], at[i-1]
		}
	}
	return gap, began
}

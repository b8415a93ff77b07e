package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/testsupport"
	"github.com/seckill/seckill/internal/user"
)

const adminToken = "e2e-admin-token-0123456789"

// sale is the whole system in processes: an API and an order-writer on the
// test's own database, key prefix, topics and group.
type sale struct {
	stack
	api, writerBin string
	apiAdmin       string // the API's admin listener: /metrics
	apiBin         string
	apiProc        *testsupport.Process // the first api instance
	apiEnv         map[string]string
	writerEnv      map[string]string
	writer         *testsupport.Process
	client         *http.Client
}

func newSale(t *testing.T) *sale {
	return newSaleOn(t, stack{testsupport.MustRedis(t), testsupport.MustMySQL(t), testsupport.MustKafka(t)}, nil, nil)
}

// newSaleOn runs an api and an order-writer on st, with more variables
// for both and apiOnly for the api.
func newSaleOn(t *testing.T, st stack, more, apiOnly map[string]string) *sale {
	s := &sale{stack: st}
	topic, dlq := s.kafka.MustTopic(t, 6), s.kafka.MustTopic(t, 1)
	shared := map[string]string{
		"SECKILL_KEY_PREFIX": s.redis.Prefix, "SECKILL_ORDERS_TOPIC": topic, "SECKILL_ORDERS_DLQ_TOPIC": dlq,
		"SECKILL_LOG_LEVEL": "warn",
	}
	maps.Copy(shared, more)
	apiEnv := s.env()
	for k, v := range shared {
		apiEnv[k] = v
	}
	apiEnv["SECKILL_RATE_PREFIX"] = s.redis.Key("rate:")
	apiEnv["SECKILL_RATE_SECKILL_IP"] = "off"
	apiEnv["SECKILL_RATE_SECKILL_USER"] = "off"
	apiEnv["SECKILL_RATE_LOOKUP_USER"] = "off"
	// The whole crowd comes from one address here: a per-address limit
	// would stop a test that reads every buyer's order.
	apiEnv["SECKILL_RATE_LOOKUP_IP"] = "off"
	apiEnv["SECKILL_ADMIN_TOKEN"] = adminToken
	maps.Copy(apiEnv, apiOnly)
	s.apiEnv, s.apiBin = apiEnv, testsupport.MustBuild(t, "../../cmd/api")
	var admin string
	s.api, admin, s.apiProc = s.startAPI(t)
	s.apiAdmin = "http://" + admin

	s.writerEnv = s.env()
	for k, v := range shared {
		s.writerEnv[k] = v
	}
	s.writerEnv["SECKILL_ADMIN_ADDR"] = testsupport.FreeAddr(t)
	if s.writerEnv["SECKILL_ORDER_GROUP"] == "" {
		s.writerEnv["SECKILL_ORDER_GROUP"] = testsupport.Group(t)
	}
	s.writerEnv["SECKILL_RELAY_AGE"] = "2s"
	s.writerEnv["SECKILL_RELAY_INTERVAL"] = "500ms"
	s.writerBin = testsupport.MustBuild(t, "../../cmd/order-writer")
	s.startWriter(t)
	s.client = &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 200, MaxConnsPerHost: 200}}
	return s
}

// startAPI starts one more api instance of the sale, on addresses of its
// own, and waits until it is ready: its URL, its admin address, its
// process.
func (s *sale) startAPI(t *testing.T) (url, admin string, p *testsupport.Process) {
	env := maps.Clone(s.apiEnv)
	addr := testsupport.FreeAddr(t)
	admin = testsupport.FreeAddr(t)
	env["SECKILL_API_ADDR"], env["SECKILL_ADMIN_ADDR"] = addr, admin
	p = testsupport.Start(t, s.apiBin, env)
	testsupport.Eventually(t, "http://"+addr+"/readyz", 200, 30*time.Second)
	return "http://" + addr, admin, p
}

func (s *sale) startWriter(t *testing.T) {
	s.writer = testsupport.Start(t, s.writerBin, s.writerEnv)
	testsupport.Eventually(t, "http://"+s.writerEnv["SECKILL_ADMIN_ADDR"]+"/readyz", 200, 30*time.Second)
}

type result struct {
	Status     int
	RetryAfter string // the header
	Success    bool   `json:"success"`
	ErrorMsg   string `json:"errorMsg"`
	Data       any    `json:"data"`
}

func (s *sale) do(t *testing.T, method, path, token string, header map[string]string, body string) result {
	return s.doAt(t, s.api, method, path, token, header, body)
}

// doAt is do on the api at base.
func (s *sale) doAt(t *testing.T, base, method, path, token string, header map[string]string, body string) result {
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("authorization", token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := s.client.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return result{}
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	r := result{Status: res.StatusCode, RetryAfter: res.Header.Get("Retry-After")}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Errorf("%s %s: %d %s", method, path, res.StatusCode, raw)
	}
	return r
}

// voucher creates a flash-sale voucher through the admin API.
func (s *sale) voucher(t *testing.T, stock int, begin, end time.Time) int64 {
	t.Helper()
	return s.voucherIn(t, stock, 1, begin, end)
}

// voucherIn is voucher with its stock in buckets.
func (s *sale) voucherIn(t *testing.T, stock, buckets int, begin, end time.Time) int64 {
	t.Helper()
	return s.voucherWith(t, stock, buckets, "none", begin, end)
}

// voucherWith is voucherIn with a bot check (none, path, challenge).
func (s *sale) voucherWith(t *testing.T, stock, buckets int, check string, begin, end time.Time) int64 {
	t.Helper()
	body := fmt.Sprintf(`{"shopId":1,"title":"e2e","payValue":100,"actualValue":1000,"stock":%d,"beginTime":%q,"endTime":%q,"stockBuckets":%d,"botCheck":%q}`,
		stock, begin.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339), buckets, check)
	r := s.do(t, "POST", "/voucher/seckill", "", map[string]string{"X-Admin-Token": adminToken}, body)
	id, ok := r.Data.(float64)
	if r.Status != 200 || !r.Success || !ok {
		t.Fatalf("create voucher: %+v", r)
	}
	return int64(id)
}

// sessions logs in n users straight in the session store (the login flow
// has its own tests): user ids from first.
func (s *sale) sessions(t *testing.T, first, n int64) []string {
	t.Helper()
	store := user.NewSessions(s.redis.Client, user.Keys{Prefix: s.redis.Prefix}, time.Hour)
	tokens := make([]string, n)
	for i := range n {
		tok, err := store.Create(context.Background(), user.User{ID: first + i, NickName: "e2e"})
		if err != nil {
			t.Fatal(err)
		}
		tokens[i] = tok
	}
	return tokens
}

// buy fires one order per token, all at once, and tallies the answers:
// the ids of accepted orders (200), of reserved ones (503 with the order
// id: the relay will deliver them), and the count of every other answer.
func (s *sale) buy(t *testing.T, voucher int64, tokens []string) (accepted, reserved []string, msgs map[string]int) {
	var mu sync.Mutex
	msgs = map[string]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, tok := range tokens {
		wg.Go(func() {
			<-start
			r := s.do(t, "POST", "/voucher-order/seckill/"+strconv.FormatInt(voucher, 10), tok, nil, "")
			mu.Lock()
			defer mu.Unlock()
			id, _ := r.Data.(string)
			switch {
			case r.Status == 200 && r.Success:
				accepted = append(accepted, id)
				return
			case r.Status == 503 && id != "":
				reserved = append(reserved, id)
				return
			}
			msgs[fmt.Sprintf("%d %s", r.Status, r.ErrorMsg)]++
		})
	}
	close(start)
	wg.Wait()
	return accepted, reserved, msgs
}

// audit waits until MySQL holds want orders of voucher and checks them:
// no user twice, every accepted id among them, MySQL stock and Redis stock
// as expected, no reservation pending.
func (s *sale) audit(t *testing.T, voucher int64, accepted []string, want, stockLeft int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // for the orders and the reservations both
	var orders int
	testsupport.PollEvery(time.Until(deadline), 100*time.Millisecond, func() bool {
		if err := s.mysql.DB.QueryRow("SELECT COUNT(*) FROM tb_voucher_order WHERE voucher_id = ?", voucher).Scan(&orders); err != nil {
			t.Fatal(err)
		}
		return orders >= want
	})
	var users, failures, dbStock int
	err := s.mysql.DB.QueryRow(`SELECT COUNT(DISTINCT user_id), (SELECT COUNT(*) FROM tb_voucher_order_failure),
		(SELECT stock FROM tb_seckill_voucher WHERE voucher_id = ?) FROM tb_voucher_order WHERE voucher_id = ?`, voucher, voucher).
		Scan(&users, &failures, &dbStock)
	if err != nil {
		t.Fatal(err)
	}
	if orders != want || users != want || failures != 0 || dbStock != stockLeft {
		t.Fatalf("MySQL: %d orders, %d distinct users, %d failures, stock %d; want %d, %d, 0, %d", orders, users, failures, dbStock, want, want, stockLeft)
	}
	for _, id := range accepted {
		var n int
		_ = s.mysql.DB.QueryRow("SELECT COUNT(*) FROM tb_voucher_order WHERE id = ?", id).Scan(&n)
		if n != 1 {
			t.Fatalf("accepted order %s is not in MySQL", id)
		}
	}
	keys := salestate.KeysFor(s.redis.Prefix, voucher).Voucher
	if rs, _ := s.redis.Client.HGet(context.Background(), keys, "stock").Int(); rs != stockLeft {
		t.Fatalf("Redis stock %d, want %d", rs, stockLeft)
	}
	pending := salestate.KeysFor(s.redis.Prefix, voucher).Pending
	testsupport.PollEvery(time.Until(deadline), 100*time.Millisecond, func() bool { return s.redis.Client.HLen(context.Background(), pending).Val() == 0 })
	if n := s.redis.Client.HLen(context.Background(), pending).Val(); n != 0 {
		t.Fatalf("%d reservations still pending", n)
	}
}

// 2,000 users at once on a stock of 100: exactly 100 orders, 1,900 clear
// sold-out answers, nobody twice; then one user firing 50 requests at once
// gets one order.
func TestFlashSaleNoOversellNoDuplicate(t *testing.T) {
	s := newSale(t)
	voucher := s.voucher(t, 100, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	accepted, _, msgs := s.buy(t, voucher, s.sessions(t, 1, 2000))
	if len(accepted) != 100 || msgs["200 sold out"] != 1900 || len(msgs) != 1 {
		t.Fatalf("%d accepted, other answers %v; want 100 and 1900 × sold out", len(accepted), msgs)
	}
	s.audit(t, voucher, accepted, 100, 0)

	one := s.voucher(t, 10, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	tok := s.sessions(t, 5000, 1)[0]
	same := make([]string, 50)
	for i := range same {
		same[i] = tok
	}
	accepted, _, msgs = s.buy(t, one, same)
	if len(accepted) != 1 || msgs["200 you already have an order for this voucher: one per user"] != 49 {
		t.Fatalf("one user × 50: %d accepted, %v", len(accepted), msgs)
	}
	s.audit(t, one, accepted, 1, 9)
}

// The order-writer is stopped in the middle of a sale, by SIGKILL or by
// SIGTERM, and started again: still exactly the stock in orders, none
// doubled, none lost.
func TestWriterStoppedMidSale(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			s := newSale(t)
			voucher := s.voucher(t, 300, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
			tokens := s.sessions(t, 1, 600)
			var all []string
			accepted, _, _ := s.buy(t, voucher, tokens[:200])
			all = append(all, accepted...)
			s.writer.Signal(t, sig)
			code, err := s.writer.Wait(10 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if sig == syscall.SIGTERM && code != 0 {
				t.Fatalf("exit code %d after SIGTERM, want 0\n%s", code, s.writer.Output())
			}
			accepted, _, _ = s.buy(t, voucher, tokens[200:])
			all = append(all, accepted...)
			if len(all) != 300 {
				t.Fatalf("%d accepted, want 300", len(all))
			}
			s.startWriter(t)
			s.audit(t, voucher, all, 300, 0)
		})
	}
}

// Two order-writers in the group share the sales: the events are keyed by
// voucher, so each sale's orders go to one partition and one writer. With
// twelve sales over six partitions both write orders (all twelve landing
// on one writer's three partitions has odds of 1 in 2,048), and together
// exactly every sale's stock, none twice.
func TestTwoWritersShareTheSales(t *testing.T) {
	t.Parallel()
	s := newSale(t)
	first := s.writerEnv["SECKILL_ADMIN_ADDR"]
	second := testsupport.FreeAddr(t)
	s.writerEnv["SECKILL_ADMIN_ADDR"] = second
	s.startWriter(t)
	s.waitForGroupOf(t, 2)
	tokens := s.sessions(t, 1, 50)
	var keys []string
	for range 12 {
		voucher := s.voucher(t, 50, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
		keys = append(keys, salestate.KeysFor(s.redis.Prefix, voucher).Voucher)
		accepted, _, _ := s.buy(t, voucher, tokens)
		s.audit(t, voucher, accepted, 50, 0)
	}
	s.redis.MustSpread(t, keys...)
	t.Logf("12 sales on %d Redis masters", s.redis.MastersOf(t, keys...))
	for _, admin := range []string{first, second} {
		metrics := testsupport.Eventually(t, "http://"+admin+"/metrics", 200, 5*time.Second)
		var inserted float64
		for _, line := range strings.Split(metrics, "\n") {
			if v, ok := strings.CutPrefix(line, "seckill_orders_inserted_total "); ok {
				inserted, _ = strconv.ParseFloat(v, 64)
			}
		}
		if inserted == 0 {
			t.Fatalf("the writer at %s wrote no order: the sales were not shared", admin)
		}
		t.Logf("writer %s inserted %.0f orders", admin, inserted)
	}
}

// waitForGroupOf waits until the order-writers' group is stable with n
// members that each hold partitions, so a sale that follows is shared.
func (s *sale) waitForGroupOf(t *testing.T, n int) {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(s.kafka.Brokers...), Timeout: 10 * time.Second}
	group := s.writerEnv["SECKILL_ORDER_GROUP"]
	var last string
	if !testsupport.PollEvery(60*time.Second, 200*time.Millisecond, func() bool {
		res, err := client.DescribeGroups(context.Background(), &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
		if err != nil || len(res.Groups) != 1 {
			last = fmt.Sprintf("describe group: %v", err)
			return false
		}
		g := res.Groups[0]
		assigned := 0
		for _, m := range g.Members {
			for _, tp := range m.MemberAssignments.Topics {
				if len(tp.Partitions) > 0 {
					assigned++
					break
				}
			}
		}
		last = fmt.Sprintf("state %s, %d members, %d with partitions", g.GroupState, len(g.Members), assigned)
		return g.GroupState == "Stable" && len(g.Members) == n && assigned == n
	}) {
		t.Fatalf("group %s never had %d members holding partitions: %s", group, n, last)
	}
}

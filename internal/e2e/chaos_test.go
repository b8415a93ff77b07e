//go:build chaos

package e2e

// The failure tests stop and start the shared servers, so they run alone:
// `make test` runs them after the main suite, with -tags chaos -p 1.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/schema"
	"github.com/seckill/seckill/internal/testsupport"
)

func stackCtl(t *testing.T, args ...string) {
	t.Helper()
	path := os.Getenv("SECKILL_TEST_STACK")
	if path == "" {
		t.Fatal("SECKILL_TEST_STACK must name deploy/local/stack.sh: these tests stop and start the servers (make test sets it)")
	}
	out, err := exec.Command(path, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("stack.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// Kafka stops in the middle of a sale: the API answers each order clearly
// (accepted, or 503 saying whether the order was reserved or not taken);
// once Kafka is back every accepted or reserved order ends in MySQL and
// MySQL holds exactly the units Redis gave out.
func TestChaosKafkaStopsDuringSale(t *testing.T) {
	s := newSale(t)
	t.Cleanup(func() { stackCtl(t, "up") })
	voucher := s.voucher(t, 300, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	tokens := s.sessions(t, 1, 600)

	accepted, _, _ := s.buy(t, voucher, tokens[:100])
	if len(accepted) != 100 {
		t.Fatalf("%d accepted before the outage, want 100", len(accepted))
	}
	stackCtl(t, "stop", "kafka")
	ok, reserved, msgs := s.buy(t, voucher, tokens[100:300])
	accepted = append(accepted, ok...)
	for msg, n := range msgs {
		if !strings.HasPrefix(msg, "503 flash sale temporarily unavailable: your order was not taken") {
			t.Errorf("%d × %q during the outage: not a clear answer", n, msg)
		}
	}
	t.Logf("during the outage: %d accepted, %d reserved, other answers %v", len(ok), len(reserved), msgs)
	stackCtl(t, "up")
	testsupport.Eventually(t, s.api+"/readyz", 200, 60*time.Second)

	more, moreReserved, _ := s.buy(t, voucher, tokens[300:])
	accepted = append(append(append(accepted, more...), reserved...), moreReserved...)
	taken := len(accepted)
	if taken > 300 {
		t.Fatalf("%d orders accepted or reserved on a stock of 300", taken)
	}
	s.audit(t, voucher, accepted, taken, 300-taken)
}

// MySQL stops while the writer runs: the writer fetches the orders that
// keep coming, fails to write them, commits no offset and skips nothing;
// once MySQL is back every order lands.
func TestChaosMySQLStopsUnderTheWriter(t *testing.T) {
	s := newSaleOn(t, stack{testsupport.MustRedis(t), testsupport.MustMySQL(t), testsupport.MustKafka(t)},
		map[string]string{"SECKILL_ORDER_STUCK_AFTER": "1s"}, nil)
	t.Cleanup(func() { stackCtl(t, "up") })
	voucher := s.voucher(t, 200, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	tokens := s.sessions(t, 1, 200)

	first, _, _ := s.buy(t, voucher, tokens[:100])
	s.audit(t, voucher, first, 100, 100)
	committed := committedOffsets(t, s)
	if committed != 100 {
		t.Fatalf("committed offsets %d after 100 orders landed, want 100", committed)
	}

	stackCtl(t, "stop", "mariadb")
	second, _, _ := s.buy(t, voucher, tokens[100:])
	if len(second) != 100 {
		t.Fatalf("%d accepted while MySQL is down, want 100: the hot path needs no MySQL", len(second))
	}
	// The writer has the new orders and keeps failing on them: not an
	// idle writer that never fetched, which would commit nothing either.
	testsupport.Wait(t, 30*time.Second, "the writer reports a batch it keeps failing on", func() bool {
		_, metrics := testsupport.Get(context.Background(), "http://"+s.writerEnv["SECKILL_ADMIN_ADDR"]+"/metrics")
		return strings.Contains(metrics, `seckill_consumer_batches_stuck_total{consumer="orders"} `) &&
			!strings.Contains(metrics, `seckill_consumer_batches_stuck_total{consumer="orders"} 0`)
	})
	if now := committedOffsets(t, s); now != committed {
		t.Fatalf("offsets moved from %d to %d while MySQL was down", committed, now)
	}
	stackCtl(t, "up")
	s.audit(t, voucher, append(first, second...), 200, 0)
}

// MariaDB stops for 20 s under a sale sold through two api instances
// behind the shipped HAProxy, which checks each through its /readyz. The
// sale needs no MySQL, so every order is accepted through the outage;
// both instances stay in the balancer (round robin: each keeps taking
// orders to the outage's end, which a backend marked down would not); and
// once MySQL is back every accepted order lands.
func TestChaosMySQLStopsBehindTheBalancer(t *testing.T) {
	s := newSaleOn(t, stack{testsupport.MustRedis(t), testsupport.MustMySQL(t), testsupport.MustKafka(t)}, nil,
		map[string]string{"SECKILL_API_TRUSTED_PROXIES": balancerSource(t)})
	t.Cleanup(func() { stackCtl(t, "up") })
	second, secondAdmin, _ := s.startAPI(t)
	admins := []string{s.apiAdmin, "http://" + secondAdmin}
	const stock = 1000
	voucher := s.voucher(t, stock, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	tokens := s.sessions(t, 1, 900)
	lb, haproxy := startLoadBalancer(t, balancerHTTP, s.api, second)
	s.api = lb

	accepted, _, msgs := s.buy(t, voucher, tokens[:20])
	if len(accepted) != 20 {
		t.Fatalf("%d of 20 accepted before the outage: %v", len(accepted), msgs)
	}
	stackCtl(t, "stop", "mariadb")
	stopped := time.Now()
	// Buyers every 500 ms for 20 s; the instances' accepted counts at the
	// outage's middle and at its end.
	var middle []float64
	next := 20
	for time.Since(stopped) < 20*time.Second {
		batch := tokens[next : next+20]
		next += 20
		ok, reserved, msgs := s.buy(t, voucher, batch)
		accepted = append(accepted, ok...)
		if len(ok) != len(batch) {
			t.Fatalf("%.1f s into the MySQL outage: %d of %d accepted, %d reserved, other answers %v",
				time.Since(stopped).Seconds(), len(ok), len(batch), len(reserved), msgs)
		}
		if middle == nil && time.Since(stopped) > 10*time.Second {
			middle = acceptedOn(t, admins)
		}
		time.Sleep(500 * time.Millisecond) // the crowd's pace, not a wait for an event
	}
	end := acceptedOn(t, admins)
	if log := haproxy.Output(); strings.Contains(log, " is DOWN") {
		t.Errorf("HAProxy took an api out during the MySQL outage:\n%s", log)
	}
	for i := range admins {
		if end[i] <= middle[i] {
			t.Errorf("api %d took no order in the outage's last 10 s (accepted %v then %v): the balancer took it out", i+1, middle[i], end[i])
		}
	}
	t.Logf("%d orders accepted through the balancer in a 20 s MySQL outage; the instances' accepted counts %v at its middle, %v at its end",
		len(accepted)-20, middle, end)
	stackCtl(t, "up")
	s.audit(t, voucher, accepted, len(accepted), stock-len(accepted))
}

// acceptedOn is each api's seckill_sale_answers_total{outcome="accepted"}.
func acceptedOn(t *testing.T, admins []string) []float64 {
	t.Helper()
	out := make([]float64, len(admins))
	for i, a := range admins {
		_, metrics := testsupport.Get(context.Background(), a+"/metrics")
		const name = `seckill_sale_answers_total{outcome="accepted"} `
		at := strings.Index(metrics, name)
		if at < 0 {
			t.Fatalf("%s/metrics has no %s", a, name)
		}
		line, _, _ := strings.Cut(metrics[at+len(name):], "\n")
		v, err := strconv.ParseFloat(line, 64)
		if err != nil {
			t.Fatalf("%s/metrics: %s%s: %v", a, name, line, err)
		}
		out[i] = v
	}
	return out
}

// Redis restarts (its data kept by the AOF, its script cache gone): the
// gate answers NOSCRIPT and go-redis reloads the script; the restart gave
// Redis a new replication id, so the sale pauses until the order-writer has
// reconciled it from MySQL, and buyers who try again in a moment get their
// orders.
func TestChaosRedisRestart(t *testing.T) {
	s := newSale(t)
	t.Cleanup(func() { stackCtl(t, "up") })
	voucher := s.voucher(t, 20, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	tokens := s.sessions(t, 1, 20)
	first, _, _ := s.buy(t, voucher, tokens[:10])
	// The stop is a SIGTERM, on which Redis fsyncs its AOF: the first ten
	// buyers and the stock survive, and the audit checks it.
	stackCtl(t, "stop", "redis")
	stackCtl(t, "up")
	testsupport.Eventually(t, s.api+"/readyz", 200, 30*time.Second)
	second := buyRetrying(t, s, voucher, tokens[10:], time.Minute)
	if len(second.accepted) != 10 {
		t.Fatalf("after the Redis restart: %v; tried again: %v", second.tally, second.retried)
	}
	t.Logf("after the restart: %v; tried again: %v", second.tally, second.retried)
	s.audit(t, voucher, append(first, slices.Collect(maps.Keys(second.accepted))...), 20, 0)
}

func committedOffsets(t *testing.T, s *sale) int64 {
	t.Helper()
	topic := s.writerEnv["SECKILL_ORDERS_TOPIC"]
	client := &kafka.Client{Addr: kafka.TCP(s.kafka.Brokers...), Timeout: 10 * time.Second}
	res, err := client.OffsetFetch(context.Background(), &kafka.OffsetFetchRequest{
		GroupID: s.writerEnv["SECKILL_ORDER_GROUP"], Topics: map[string][]int{topic: {0, 1, 2, 3, 4, 5}}})
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, p := range res.Topics[topic] {
		if p.CommittedOffset > 0 {
			total += p.CommittedOffset
		}
	}
	return total
}

// Redis stops while rows change: the cache-invalidator hands the failed
// deletes to the retry topic; once Redis is back every affected key is
// deleted, the retry topic is drained and nothing is dead-lettered.
func TestChaosRedisDownUnderTheInvalidator(t *testing.T) {
	s := stack{testsupport.MustRedis(t), testsupport.MustMySQL(t), testsupport.MustKafka(t)}
	t.Cleanup(func() { stackCtl(t, "up") })
	if err := schema.Seed(context.Background(), s.mysql.DB); err != nil {
		t.Fatal(err)
	}
	retry, dlq := s.kafka.MustTopic(t, 1), s.kafka.MustTopic(t, 1)
	env := s.env()
	admin := testsupport.FreeAddr(t)
	group := testsupport.Group(t)
	env["SECKILL_ADMIN_ADDR"] = admin
	env["SECKILL_INVALIDATE_RETRY_TOPIC"] = retry
	env["SECKILL_INVALIDATE_DLQ_TOPIC"] = dlq
	env["SECKILL_INVALIDATE_GROUP"] = group
	env["SECKILL_INVALIDATE_DELETE_TIMEOUT"] = "300ms"
	env["SECKILL_INVALIDATE_MAX_ATTEMPTS"] = "30"
	proc := testsupport.Start(t, testsupport.MustBuild(t, "../../cmd/cache-invalidator"), env)
	testsupport.Eventually(t, "http://"+admin+"/readyz", 200, 30*time.Second)
	ctx := context.Background()

	// Following: a first change is seen.
	probe := s.redis.Key("cache:shop:{6}")
	if !testsupport.Poll(20*time.Second, func() bool {
		s.redis.Client.Set(ctx, probe, "stale", 0)
		s.mysql.DB.Exec("UPDATE tb_shop SET comments = comments + 1 WHERE id = 6")
		return testsupport.Poll(300*time.Millisecond, func() bool { return s.redis.Client.Exists(ctx, probe).Val() == 0 })
	}) {
		t.Fatalf("the invalidator is not following:\n%s", proc.Output())
	}
	var keys []string
	for id := 1; id <= 5; id++ {
		k := fmt.Sprintf("%scache:shop:{%d}", s.redis.Prefix, id)
		s.redis.Client.Set(ctx, k, "stale", 0)
		keys = append(keys, k)
	}
	// A key of an unchanged row: it must survive the restart, or the
	// deletes below would prove nothing. The stop is a SIGTERM, on which
	// Redis fsyncs its AOF.
	control := s.redis.Prefix + "cache:shop:{99}"
	s.redis.Client.Set(ctx, control, "kept", 0)
	stackCtl(t, "stop", "redis")
	for id := 1; id <= 5; id++ {
		if _, err := s.mysql.DB.Exec("UPDATE tb_shop SET sold = sold + 1 WHERE id = ?", id); err != nil {
			t.Fatal(err)
		}
	}
	testsupport.Wait(t, 30*time.Second, "5 failed deletes on the retry topic", func() bool { return lastOffsetOf(t, s, retry) >= 5 })
	stackCtl(t, "up")
	for _, k := range keys {
		testsupport.Wait(t, 60*time.Second, k+" deleted", func() bool { return s.redis.Client.Exists(ctx, k).Val() == 0 })
	}
	if v := s.redis.Client.Get(ctx, control).Val(); v != "kept" {
		t.Fatalf("the control key is %q after the restart: Redis lost its data, so the deletes prove nothing", v)
	}
	testsupport.Wait(t, 30*time.Second, "the retry topic drained", func() bool {
		client := &kafka.Client{Addr: kafka.TCP(s.kafka.Brokers...), Timeout: 10 * time.Second}
		res, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{retry: {0}}})
		return err == nil && len(res.Topics[retry]) == 1 && res.Topics[retry][0].CommittedOffset == lastOffsetOf(t, s, retry)
	})
	if n := lastOffsetOf(t, s, dlq); n != 0 {
		t.Fatalf("%d keys dead-lettered", n)
	}
}

// MariaDB restarts under the cache-invalidator: it reconnects and keeps
// deleting the keys of changed rows.
func TestChaosMySQLRestartUnderTheInvalidator(t *testing.T) {
	s := stack{testsupport.MustRedis(t), testsupport.MustMySQL(t), testsupport.MustKafka(t)}
	t.Cleanup(func() { stackCtl(t, "up") })
	if err := schema.Seed(context.Background(), s.mysql.DB); err != nil {
		t.Fatal(err)
	}
	env, admin := s.invalidatorEnv(t)
	testsupport.Start(t, testsupport.MustBuild(t, "../../cmd/cache-invalidator"), env)
	testsupport.Eventually(t, "http://"+admin+"/readyz", 200, 30*time.Second)
	ctx := context.Background()
	invalidated := func(id int) bool {
		k := fmt.Sprintf("%scache:shop:{%d}", s.redis.Prefix, id)
		s.redis.Client.Set(ctx, k, "stale", 0)
		if _, err := s.mysql.DB.Exec("UPDATE tb_shop SET sold = sold + 1 WHERE id = ?", id); err != nil {
			return false
		}
		return testsupport.Poll(2*time.Second, func() bool { return s.redis.Client.Exists(ctx, k).Val() == 0 })
	}
	testsupport.Wait(t, 20*time.Second, "the invalidator following", func() bool { return invalidated(1) })
	stackCtl(t, "stop", "mariadb")
	stackCtl(t, "up")
	testsupport.Wait(t, 60*time.Second, "a change after the restart invalidated", func() bool { return invalidated(2) })
}

func lastOffsetOf(t *testing.T, s stack, topic string) int64 {
	t.Helper()
	conn, err := kafka.DialLeader(context.Background(), "tcp", s.kafka.Brokers[0], topic, 0)
	if err != nil {
		return -1
	}
	defer conn.Close()
	n, err := conn.ReadLastOffset()
	if err != nil {
		return -1
	}
	return n
}

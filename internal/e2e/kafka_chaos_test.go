//go:build chaos

package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/testsupport"
)

// The system as production runs it, faulted: the stack's Kafka cluster of
// three brokers (replication factor 3, min.insync.replicas 2), api
// instances behind HAProxy, several order-writers; twenty sales of 100,
// 3,000 buyers who try again after a 503 without an order or a cut
// connection. Every partition of the test's orders topic is led by the
// broker that coordinates the writers' group, so killing it moves both at
// once.
const (
	kafkaSales   = 20
	kafkaStock   = 100
	kafkaBuyers  = 150 // per sale: 3,000 in all
	kafkaFaultAt = 3 * time.Second
	// kafkaStallBound is the longest the buyers' acceptances, or the
	// writers' inserts while orders wait for them, may stop after a leader
	// change and a coordinator move: the dead node is fenced 3 s after its
	// last heartbeat (stack-kafka.sh), the API probes every 500 ms, a writer
	// group's session is 6 s (broker.InGroup), and its rebalance follows
	// (9.3 s measured). kafka-go's defaults (a 30 s session, a 30 s
	// rebalance) alone allow a longer stop than this.
	kafkaStallBound = 25 * time.Second
)

type kafkaRig struct {
	*sale
	leader  int // leads every partition of the orders topic, coordinates the group
	apis    []*testsupport.Process
	writers []*testsupport.Process
	// writerAdmins are the writers' admin addresses, for their goroutines
	// when they fall silent.
	writerAdmins []string
	// inserted samples the test database's order count every 100 ms.
	mu       sync.Mutex
	inserted []sample
}

// logWriterGoroutines logs the writers' goroutines that are in kafka-go or
// the consumer: where a writer that fell silent waits.
func (r *kafkaRig) logWriterGoroutines(t *testing.T) {
	for i, admin := range r.writerAdmins {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, dump := testsupport.Get(ctx, "http://"+admin+"/debug/pprof/goroutine?debug=2")
		cancel()
		var kept []string
		for g := range strings.SplitSeq(dump, "\n\n") {
			if strings.Contains(g, "segmentio/kafka-go") || strings.Contains(g, "internal/broker") {
				kept = append(kept, g)
			}
		}
		t.Logf("order-writer %d: %d goroutines in kafka-go or the consumer:\n%s", i+1, len(kept), strings.Join(kept, "\n\n"))
	}
}

type sample struct {
	at time.Duration
	n  int
}

func newKafkaRig(t *testing.T, apis, writers int) *kafkaRig {
	k := testsupport.MustKafkaCluster(t)
	group, leader := groupAndCoordinator(t, k)
	topic := k.MustTopicLedBy(t, 6, leader)
	st := stack{testsupport.MustRedis(t), testsupport.MustMySQL(t), k}
	s := newSaleOn(t, st, map[string]string{"SECKILL_ORDERS_TOPIC": topic, "SECKILL_ORDER_GROUP": group,
		"SECKILL_SOLDOUT_TTL": "1ms", "SECKILL_PPROF": "true"}, nil)
	r := &kafkaRig{sale: s, leader: leader, apis: []*testsupport.Process{s.apiProc}, writers: []*testsupport.Process{s.writer},
		writerAdmins: []string{s.writerEnv["SECKILL_ADMIN_ADDR"]}}
	for range writers - 1 {
		s.writerEnv["SECKILL_ADMIN_ADDR"] = testsupport.FreeAddr(t)
		s.startWriter(t)
		r.writers = append(r.writers, s.writer)
		r.writerAdmins = append(r.writerAdmins, s.writerEnv["SECKILL_ADMIN_ADDR"])
	}
	s.waitForGroupOf(t, writers)
	if apis > 1 {
		backends := []string{s.api}
		for range apis - 1 {
			url, _, p := s.startAPI(t)
			backends = append(backends, url)
			r.apis = append(r.apis, p)
		}
		s.api, _ = startLoadBalancer(t, balancerHTTP, backends...)
	}
	return r
}

// groupAndCoordinator is a consumer group name of the test's own and the
// broker that coordinates it. On a fresh cluster the first group lookup
// creates __consumer_offsets, and Kafka answers "coordinator not
// available" until its partitions have leaders: that is waited out.
func groupAndCoordinator(t *testing.T, k *testsupport.Kafka) (string, int) {
	client := &kafka.Client{Addr: kafka.TCP(k.Brokers...), Timeout: 10 * time.Second}
	name := testsupport.Group(t)
	var coordinator int
	var err error
	if !testsupport.Poll(time.Minute, func() bool {
		var res *kafka.FindCoordinatorResponse
		res, err = client.FindCoordinator(context.Background(), &kafka.FindCoordinatorRequest{Key: name, KeyType: kafka.CoordinatorKeyTypeConsumer})
		if err == nil && res.Error != nil {
			err = res.Error
		}
		if err == nil && res.Coordinator != nil {
			coordinator = res.Coordinator.NodeID
			return true
		}
		return false
	}) {
		t.Fatalf("find coordinator of %s for a minute: %v", name, err)
	}
	return name, coordinator
}

// sale runs the crowd on twenty new sales, calls fault at kafkaFaultAt,
// and returns every answer once the crowd is done.
func (r *kafkaRig) run(t *testing.T, fault func(c *crowd)) (answers []attempt, vouchers []int64) {
	for range kafkaSales {
		vouchers = append(vouchers, r.voucher(t, kafkaStock, time.Now().Add(-time.Minute), time.Now().Add(time.Hour)))
	}
	tokens := r.sessions(t, 1, kafkaSales*kafkaBuyers)
	c := startCrowd(t, r.sale, vouchers, tokens, kafkaBuyers)
	done := make(chan struct{})
	go func() {
		for {
			var n int
			if err := r.mysql.DB.QueryRow("SELECT COUNT(*) FROM tb_voucher_order").Scan(&n); err == nil {
				r.mu.Lock()
				r.inserted = append(r.inserted, sample{time.Since(c.begin), n})
				r.mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	time.Sleep(kafkaFaultAt) // the fault falls a set time into the crowd: the test is about a fault under load
	fault(c)
	answers = c.wait()
	// The writers' catch-up is sampled too: until MySQL holds every
	// order the buyers were given.
	orders, _ := ordersOf(answers)
	caughtUp := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.inserted) > 0 && r.inserted[len(r.inserted)-1].n >= len(orders)
	}
	if !testsupport.Poll(90*time.Second, caughtUp) {
		r.logWriterGoroutines(t)
		t.Fatal("waited 90s for every acknowledged order in MySQL")
	}
	close(done)
	return answers, vouchers
}

// report logs and returns what the issue asks of each fault: the orders
// accepted while it lasted, the longest gap without an acceptance after
// it began (while the sales had more than 5 % of their stock left), when
// the acceptances resumed, and the writers' longest stall while accepted
// orders waited for MySQL.
func (r *kafkaRig) report(t *testing.T, name string, answers []attempt, faultEnd time.Duration) (gap, stall time.Duration) {
	orders, tally := ordersOf(answers)
	retried := map[string]int{}
	during := 0
	for _, a := range answers {
		if !a.final {
			retried[fmt.Sprintf("%d %.40s", a.status, a.msg)]++
		}
		if a.final && a.orderID != "" && a.at >= kafkaFaultAt && a.at < faultEnd {
			during++
		}
	}
	at, _ := acceptedAt(orders, func(int64) bool { return true })
	gap, gapAt := longestGapAfter(at[:len(at)*95/100], kafkaFaultAt)
	r.mu.Lock()
	samples := append([]sample(nil), r.inserted...)
	r.mu.Unlock()
	var stallAt time.Duration
	for i, j := 0, 0; i < len(samples); i = j {
		// j: the first sample after i with more orders in MySQL.
		for j = i + 1; j < len(samples) && samples[j].n == samples[i].n; j++ {
		}
		if j < len(samples) && samples[i].at >= kafkaFaultAt && samples[j].at-samples[i].at > stall {
			stall, stallAt = samples[j].at-samples[i].at, samples[i].at
		}
	}
	// Recovered: the last answer after the fault that was not an order
	// or a business answer (a 503 tried again, a cut connection).
	var lastRetry time.Duration
	for _, a := range answers {
		if !a.final && a.at >= kafkaFaultAt {
			lastRetry = a.at
		}
	}
	t.Logf("%s: final answers %v; tried again: %v", name, tally, retried)
	t.Logf("%s: %d orders accepted while the fault lasted (%v to %v); the longest gap without an acceptance %v, from %v (the fault at %v); "+
		"the last answer to try again %v after the fault; the writers' longest stall %v, from %v; %d orders in all",
		name, during, kafkaFaultAt, faultEnd.Round(time.Millisecond), gap.Round(time.Millisecond), gapAt.Round(time.Millisecond), kafkaFaultAt,
		max(0, lastRetry-kafkaFaultAt).Round(time.Millisecond), stall.Round(time.Millisecond), stallAt.Round(time.Millisecond), len(orders))
	for answer, n := range tally {
		if answer != "accepted" && !strings.HasPrefix(answer, "reserved") && !strings.HasPrefix(answer, "200 ") {
			t.Errorf("%d buyers were finally answered %q: a fault must end in an order, a business refusal, or a 503 tried again", n, answer)
		}
	}
	return gap, stall
}

// The broker that leads every partition of the orders topic and
// coordinates the writers' group is killed mid-sale. Two in-sync replicas
// remain: the API keeps accepting once the leadership moves, the writers
// follow the new leaders and the new coordinator, nothing is lost.
func TestChaosKafkaLeaderKilled(t *testing.T) {
	restartKafkaAfter(t)
	r := newKafkaRig(t, 1, 2)
	answers, vouchers := r.run(t, func(*crowd) { stackCtl(t, "kill", "kafka-node", strconv.Itoa(r.leader)) })
	gap, stall := r.report(t, "leader and coordinator killed", answers, time.Minute)
	orders, _ := ordersOf(answers)
	fates := settleSales(t, r.sale, vouchers, kafkaStock, orders)
	if fates["confirmed "] != len(orders) {
		t.Fatalf("a replicated topic lost orders with one broker of three: %v", fates)
	}
	if gap > kafkaStallBound || stall > kafkaStallBound {
		t.Fatalf("acceptances stopped %v, the writers %v; want both within %v", gap, stall, kafkaStallBound)
	}
}

// The broker that leads every partition and coordinates the writers'
// group freezes mid-sale (SIGSTOP: its connections stay open, nothing
// answers) and wakes 6 s later. The controller fences it 3 s after its
// last heartbeat and moves the leadership; the publishes caught on it time
// out and their orders are relayed; nothing is lost.
func TestChaosKafkaLeaderFrozen(t *testing.T) {
	restartKafkaAfter(t)
	r := newKafkaRig(t, 1, 2)
	leader := strconv.Itoa(r.leader)
	t.Cleanup(func() { stackCtl(t, "thaw", "kafka-node", leader) })
	var thawed time.Duration
	answers, vouchers := r.run(t, func(c *crowd) {
		stackCtl(t, "freeze", "kafka-node", leader)
		time.Sleep(kafkaOutage) // the outage's length is the point
		stackCtl(t, "thaw", "kafka-node", leader)
		thawed = time.Since(c.begin)
	})
	r.mustLoseNothing(t, "leader and coordinator frozen", answers, vouchers, thawed)
}

// The same broker is cut off from everything that reaches it on its
// client port (the programs, and the followers that fetch from it) for
// 6 s, while it still talks to the controller: it stays the leader, and
// no publish to it is answered. The publishes time out and their orders
// are relayed; nothing is lost.
func TestChaosKafkaLeaderCutOff(t *testing.T) {
	restartKafkaAfter(t)
	r := newKafkaRig(t, 1, 2)
	addr := brokerAddr(t, r.kafka, r.leader)
	var healed time.Duration
	answers, vouchers := r.run(t, func(c *crowd) {
		heal := testsupport.CutOff(t, addr)
		time.Sleep(kafkaOutage) // the outage's length is the point
		heal()
		healed = time.Since(c.begin)
	})
	r.mustLoseNothing(t, "leader cut off", answers, vouchers, healed)
}

// kafkaOutage is how long the frozen or cut-off broker stays so: longer
// than the controller's fence (3 s), as the Redis tests freeze a master.
const kafkaOutage = 6 * time.Second

// mustLoseNothing reports the fault and fails unless every order the
// buyers were given is in MySQL and the sale went on within the bound.
func (r *kafkaRig) mustLoseNothing(t *testing.T, name string, answers []attempt, vouchers []int64, faultEnd time.Duration) {
	t.Helper()
	gap, stall := r.report(t, name, answers, faultEnd)
	orders, _ := ordersOf(answers)
	if fates := settleSales(t, r.sale, vouchers, kafkaStock, orders); fates["confirmed "] != len(orders) {
		t.Fatalf("orders lost to the fault: %v", fates)
	}
	if gap > kafkaStallBound || stall > kafkaStallBound {
		t.Fatalf("acceptances stopped %v, the writers %v; want both within %v", gap, stall, kafkaStallBound)
	}
}

// brokerAddr is the address the cluster gives broker id.
func brokerAddr(t *testing.T, k *testsupport.Kafka, id int) string {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(k.Brokers...), Timeout: 10 * time.Second}
	md, err := client.Metadata(context.Background(), &kafka.MetadataRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range md.Brokers {
		if b.ID == id {
			return net.JoinHostPort(b.Host, strconv.Itoa(b.Port))
		}
	}
	t.Fatalf("no broker %d in %v", id, md.Brokers)
	return ""
}

// Two brokers of three die: a partition has one replica in sync, fewer
// than min.insync.replicas, so no order could be made durable. The API
// refuses before the gate (503, nothing taken) instead of accepting orders
// it cannot keep; the orders caught in flight are reserved and relayed.
// The brokers come back and the sale resumes.
func TestChaosKafkaTwoBrokersDown(t *testing.T) {
	restartKafkaAfter(t)
	r := newKafkaRig(t, 1, 1)
	const outage = 9 * time.Second
	var stockAt []int // the sales' stock left in Redis, from 4 s into the outage until its end
	var restarted time.Duration
	answers, vouchers := r.run(t, func(c *crowd) {
		for n := 1; n <= 3; n++ {
			if n != r.leader {
				stackCtl(t, "kill", "kafka-node", strconv.Itoa(n))
			}
		}
		time.Sleep(4 * time.Second) // the outage's length is the point: its first 4 s, then samples until its end
		// Sampling the rest of the outage every 500 ms, not a wait.
		for end := time.Now().Add(outage - 4*time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
			stockAt = append(stockAt, r.stockLeft(t))
		}
		restarted = time.Since(c.begin)
		stackCtl(t, "up", "--kafka-brokers", "3")
	})
	_, _ = r.report(t, "two brokers down", answers, restarted)
	for i, n := range stockAt {
		if n != stockAt[0] {
			t.Fatalf("the stock left moved from %d to %d during the outage (sample %d): a unit was taken with no durable queue", stockAt[0], n, i)
		}
	}
	var refused, taken int
	for _, a := range answers {
		// Asked 2 s after the kill or later (the api probes every 500 ms),
		// before the restart.
		if a.sent < kafkaFaultAt+2*time.Second || a.sent >= restarted {
			continue
		}
		switch {
		case a.orderID != "":
			taken++
		case a.status == 503 && strings.Contains(a.msg, "not taken"):
			refused++
		}
	}
	t.Logf("asked from 2 s into the outage until the restart: %d refused before the gate, %d taken; stock left from 4 s in: %v", refused, taken, stockAt)
	if taken != 0 || refused == 0 {
		t.Fatalf("%d orders taken and %d refused while two brokers of three were down; want none taken, the crowd refused", taken, refused)
	}
	orders, _ := ordersOf(answers)
	if fates := settleSales(t, r.sale, vouchers, kafkaStock, orders); fates["confirmed "] != len(orders) {
		t.Fatalf("orders lost to the outage: %v", fates)
	}
}

// One of two api instances behind the balancer is killed mid-sale: its
// buyers in flight see an error (and ask again) or their order, never a
// lost acceptance (a reservation it made is published by the relay); the
// other instance keeps serving.
func TestChaosAPIInstanceKilled(t *testing.T) {
	r := newKafkaRig(t, 2, 1)
	answers, vouchers := r.run(t, func(*crowd) {
		r.apis[1].Signal(t, syscall.SIGKILL)
	})
	gap, _ := r.report(t, "api instance killed", answers, time.Minute)
	cut := 0
	for _, a := range answers {
		if a.at >= kafkaFaultAt && (a.err || tryAgain(a)) {
			cut++
		}
	}
	t.Logf("answers without an order after the kill (cut connections, the balancer's 502s, 503s), all tried again: %d", cut)
	orders, _ := ordersOf(answers)
	if fates := settleSales(t, r.sale, vouchers, kafkaStock, orders); fates["confirmed "] != len(orders) {
		t.Fatalf("orders lost with an api instance: %v", fates)
	}
	if gap > 5*time.Second {
		t.Fatalf("acceptances stopped %v after one api instance of two died", gap)
	}
}

// One of two order-writers is killed mid-batch: its partitions move to
// the other, nothing is lost or written twice.
func TestChaosOrderWriterKilled(t *testing.T) {
	r := newKafkaRig(t, 1, 2)
	answers, vouchers := r.run(t, func(*crowd) {
		r.writers[1].Signal(t, syscall.SIGKILL)
	})
	_, stall := r.report(t, "order-writer killed", answers, time.Minute)
	orders, _ := ordersOf(answers)
	if fates := settleSales(t, r.sale, vouchers, kafkaStock, orders); fates["confirmed "] != len(orders) {
		t.Fatalf("orders lost with an order-writer: %v", fates)
	}
	if stall > kafkaStallBound {
		t.Fatalf("the writers stopped %v after one of two died; want within %v", stall, kafkaStallBound)
	}
}

// restartKafkaAfter starts the nodes a test killed again once it ends.
// Called first, so that it runs after the test's own cleanups.
func restartKafkaAfter(t *testing.T) {
	t.Cleanup(func() { stackCtl(t, "up", "--kafka-brokers", "3") })
}

// stockLeft is the sum of the test's sales' stock left in Redis.
func (r *kafkaRig) stockLeft(t *testing.T) int {
	keys := r.redis.Keys(t, salestate.VoucherPattern(r.redis.Prefix))
	total := 0
	for _, k := range keys {
		n, _ := r.redis.Client.HGet(context.Background(), k, "stock").Int()
		total += n
	}
	return total
}

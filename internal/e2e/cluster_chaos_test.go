//go:build chaos

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/testsupport"
	"github.com/seckill/seckill/internal/user"
)

// A master of a Redis Cluster dies under a running sale, for real: an api
// and two order-writers on a cluster of the test's own (three masters,
// each with a replica), twenty sales spread over the three masters, 3,000
// buyers. The cluster promotes the dead master's replica by itself; the
// gate pauses the sales that master held (their state was built under its
// replication id), the writers reconcile them from MySQL, and they sell
// again, while the sales on the other masters go on.
func TestChaosClusterMasterKilled(t *testing.T) {
	runClusterFault(t, clusterFault{name: "kill -9", do: func(t *testing.T, c *testsupport.Cluster, master string) {
		if err := c.Nodes[master].Process.Kill(); err != nil {
			t.Fatal(err)
		}
	}})
}

// A master frozen past the node timeout (SIGSTOP) is failed over like a
// dead one; woken (SIGCONT), it finds its replica promoted and returns as
// its replica.
func TestChaosClusterMasterFrozen(t *testing.T) {
	runClusterFault(t, clusterFault{name: "SIGSTOP for 6 s", do: func(t *testing.T, c *testsupport.Cluster, master string) {
		p := c.Nodes[master].Process
		if err := p.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(6*time.Second, func() { _ = p.Signal(syscall.SIGCONT) })
	}})
}

// CLUSTER FAILOVER on a replica: the replica waits until it has every
// write of its master, then takes over. Nothing is lost, so no accepted
// order fails; the sales it holds pause for their reconcile (the new
// master's replication id is another) and sell again.
func TestChaosClusterManualFailover(t *testing.T) {
	runClusterFault(t, clusterFault{name: "CLUSTER FAILOVER", lossless: true, do: func(t *testing.T, c *testsupport.Cluster, master string) {
		replica := redis.NewClient(&redis.Options{Addr: c.ReplicaOf(t, master)})
		defer replica.Close()
		if err := replica.Do(context.Background(), "CLUSTER", "FAILOVER").Err(); err != nil {
			t.Fatal(err)
		}
	}})
}

type clusterFault struct {
	name     string
	lossless bool // no accepted order may fail
	do       func(t *testing.T, c *testsupport.Cluster, master string)
}

const (
	clusterSales   = 20
	clusterStock   = 100
	clusterBuyers  = 150 // per sale: 3,000 in all
	clusterFaultAt = 3 * time.Second
	// resumeBound is how long after the fault the sales of the failed
	// master may take to sell again: the cluster's failover (node timeout
	// 2 s, then an election), the client's slot map reload (1 s), the
	// order-writer's check and the reconcile.
	resumeBound = 30 * time.Second
	// failoverGoal is how soon after the promotion the failed master's
	// sales are to sell again, and the longest the other masters' sales
	// may go without an accept: every program learns the promotion (the
	// slot map read from every node at once every 500 ms, the replication
	// ids read without waiting for a frozen master, a check round stuck on
	// it abandoned), then the writer catches up (its batches no longer
	// wait for a frozen master's calls) and reconciles (waiting for the
	// writer once). The test prints both figures against it, and on a miss
	// the writers' reconcile lines; it asserts the looser bounds below,
	// which leave room for a loaded machine (timings are measured, not
	// asserted: docs/redis-cluster.md has the runs).
	failoverGoal = time.Second
	// resumeAfterPromotion and survivingGap bound the same two figures:
	// before, a freeze took up to 2.5 s to sell again (the slot map's
	// reload asking the frozen node first, the writer's batch retry asleep
	// up to 1.7 s), and the surviving sales stopped for 4 s.
	resumeAfterPromotion = 2 * time.Second
	survivingGap         = 2 * time.Second
	// survivingGoal is the share of their rate before the fault the other
	// masters' sales are to keep from the fault to the promotion, printed
	// against it; survivingFloor is what the test asserts: a third of the
	// buyers' sessions live on the failed master and retry until it is
	// replaced, and their retries (each refusal logged at debug, under the
	// race detector, on two cores) slow everyone's answers.
	survivingGoal, survivingFloor = 0.5, 0.25
	// rateWindow is the shortest time after the fault their rate is
	// judged over: about a hundred accepts at the crowd's pace.
	rateWindow = 500 * time.Millisecond
)

func runClusterFault(t *testing.T, f clusterFault) {
	cl := testsupport.MustPrivateCluster(t)
	st := stack{cl.Redis, testsupport.MustMySQL(t), testsupport.MustKafka(t)}
	// The api logs why it refused each request (debug): the causes of a
	// pause on the surviving masters are printed with it.
	s := newSaleOn(t, st, map[string]string{"SECKILL_REDIS_EPOCH_INTERVAL": "200ms", "SECKILL_SOLDOUT_TTL": "1ms",
		"SECKILL_SALE_CHECK_INTERVAL": "1s"}, map[string]string{"SECKILL_LOG_LEVEL": "debug"})
	admins := []string{s.writerEnv["SECKILL_ADMIN_ADDR"], testsupport.FreeAddr(t)}
	s.writerEnv["SECKILL_ADMIN_ADDR"] = admins[1]
	writers := []*testsupport.Process{s.writer}
	s.startWriter(t)
	writers = append(writers, s.writer)
	s.waitForGroupOf(t, 2)
	ctx := context.Background()

	owner := map[int64]string{}
	onMaster := map[string][]int64{}
	var vouchers []int64
	for range clusterSales {
		v := s.voucher(t, clusterStock, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
		vouchers = append(vouchers, v)
		owner[v] = cl.MasterOf(t, salestate.KeysFor(s.redis.Prefix, v).Voucher)
		onMaster[owner[v]] = append(onMaster[owner[v]], v)
	}
	if len(onMaster) != 3 {
		t.Fatalf("%d sales on %d masters; want all three", clusterSales, len(onMaster))
	}
	// The victim: the master with the most sales, whatever else it holds
	// (a counter of the order ids among them: the api's generator leases
	// from another one then).
	var victim string
	for m, vs := range onMaster {
		if victim == "" || len(vs) > len(onMaster[victim]) {
			victim = m
		}
	}
	t.Logf("sales by master: %v; %s on %s (%d sales)", onMaster, f.name, victim, len(onMaster[victim]))
	tokens := s.sessions(t, 1, clusterSales*clusterBuyers)

	c := startCrowd(t, s, vouchers, tokens, clusterBuyers)
	begin := c.begin
	// When Redis finished the failover: the victim's replica says it is
	// a master.
	replica := cl.ReplicaOf(t, victim)
	promoted := promotionOf(replica, begin)
	time.Sleep(clusterFaultAt) // the fault falls a set time into the crowd: the test is about a fault under load
	f.do(t, cl, victim)
	answers := c.wait()
	t.Logf("cluster after the fault:\n%s", cl.Describe(t))

	orders, tally := ordersOf(answers)
	retried := map[string]int{}
	// timeline: per half second since the crowd began, the answers on the
	// surviving masters' sales and on the failed master's.
	type slot struct{ accepted, retried, other int }
	timeline := map[bool]map[int]*slot{true: {}, false: {}}
	for _, a := range answers {
		at := int(a.at / (500 * time.Millisecond))
		m := timeline[owner[a.voucher] != victim]
		if m[at] == nil {
			m[at] = &slot{}
		}
		switch {
		case !a.final:
			retried[a.msg]++
			m[at].retried++
		case a.orderID != "" && a.status == 200:
			m[at].accepted++
		default:
			m[at].other++
		}
	}
	t.Logf("final answers: %v; 503s answered and tried again: %v", tally, retried)
	for answer, n := range tally {
		if !strings.HasPrefix(answer, "accepted") && !strings.HasPrefix(answer, "reserved") && !strings.HasPrefix(answer, "200 ") {
			t.Errorf("%d buyers were finally answered %q: a failover must answer an order, a business refusal, or 503 to try again", n, answer)
		}
	}
	var line strings.Builder
	for at := range 24 {
		sv, fl := timeline[true][at], timeline[false][at]
		if sv == nil {
			sv = &slot{}
		}
		if fl == nil {
			fl = &slot{}
		}
		fmt.Fprintf(&line, "\n  %4.1fs  surviving: %4d accepted %4d retried %4d refused   failed master's: %4d accepted %4d retried %4d refused",
			float64(at)/2, sv.accepted, sv.retried, sv.other, fl.accepted, fl.retried, fl.other)
	}
	t.Logf("answers by half second (the fault at %v):%s", clusterFaultAt, line.String())

	// The surviving masters' sales went on: the longest gap between two
	// orders they accepted, from the fault until they sold out. The failed
	// master's sales stopped, and sold again: their longest gap.
	// A third of the buyers' sessions live on the failed master too: those
	// buyers wait for its failover whatever sale they buy, and the last
	// units of the surviving sales go to them. The gap is counted while
	// the surviving sales had more than 5 % of their stock left.
	survivors, affected := acceptedAt(orders, func(v int64) bool { return owner[v] != victim })
	gap, gapAt := longestGapAfter(survivors[:len(survivors)*95/100], clusterFaultAt)
	t.Logf("surviving masters' sales: %d orders, the longest gap after the fault %v (from %v after the crowd began; the fault at %v)",
		len(survivors), gap.Round(time.Millisecond), gapAt.Round(time.Millisecond), clusterFaultAt)
	// Their rate before the fault, and from the fault to the promotion
	// (or until they had sold 95 %, if sooner).
	var promotedAt time.Duration
	select {
	case promotedAt = <-promoted:
	default:
		t.Fatalf("the replica %s of the failed master was never promoted", replica)
	}
	const from = time.Second
	// A failover quicker than rateWindow leaves too few accepts to judge a
	// rate by: at 200 a second, 14 in a 66 ms manual failover, which one
	// pause of 130 ms (far under survivingGap, asserted below) makes 0.
	until := min(max(promotedAt, clusterFaultAt+rateWindow), survivors[len(survivors)*95/100])
	var before, during int
	for _, at := range survivors {
		switch {
		case at >= from && at < clusterFaultAt:
			before++
		case at >= clusterFaultAt && at < until:
			during++
		}
	}
	rateBefore := float64(before) / (clusterFaultAt - from).Seconds()
	rateDuring := float64(during) / (until - clusterFaultAt).Seconds()
	t.Logf("surviving masters' sales: %.0f accepts/s before the fault, %.0f/s from the fault to %v (%.0f %%; the goal %.0f %%)", rateBefore, rateDuring,
		until.Round(time.Millisecond), 100*rateDuring/rateBefore, 100*survivingGoal)
	if rateDuring < survivingFloor*rateBefore {
		t.Errorf("the surviving masters' sales fell to %.0f accepts/s during the failover from %.0f; want at least %.0f %%", rateDuring,
			rateBefore, 100*survivingFloor)
	}
	if gap > failoverGoal {
		// What the surviving sales' buyers were answered while none of
		// them was accepted: the request that stalled, and why.
		var during strings.Builder
		sessionsOn := map[bool]int{}
		for _, a := range answers {
			if owner[a.voucher] != victim && a.sent < gapAt+gap && a.at > gapAt {
				// Where the buyer's session lives: the failed master's slots
				// are its replica's now.
				m := cl.MasterOf(t, user.Keys{Prefix: s.redis.Prefix}.Session(a.token))
				sessionsOn[m == victim || m == replica]++
				fmt.Fprintf(&during, "\n  sent %v answered %v (%v), session on the failed master %v: %d %q", a.sent.Round(time.Millisecond),
					a.at.Round(time.Millisecond), (a.at - a.sent).Round(time.Millisecond), m == victim || m == replica, a.status, a.msg)
			}
		}
		t.Logf("the surviving sales' requests in the gap, by whether the buyer's session lives on the failed master: %v", sessionsOn)
		t.Logf("the surviving sales' requests in flight during their longest gap:%s", during.String())
		causes := map[string]int{}
		for line := range strings.Lines(s.apiProc.Output()) {
			if _, cause, ok := strings.Cut(line, "msg=\"request refused\""); ok {
				if _, e, ok := strings.Cut(cause, " err="); ok {
					causes[strings.TrimSpace(e)]++
				}
			}
		}
		t.Logf("why the api refused requests (all sales, the whole run): %v", causes)
	}
	pause, pauseAt := longestGapAfter(affected, clusterFaultAt)
	t.Logf("the failed master's sales: %d orders, stopped %v from %v, the last at %v", len(affected), pause.Round(time.Millisecond),
		pauseAt.Round(time.Millisecond), affected[len(affected)-1].Round(time.Millisecond))
	resumed := pauseAt + pause
	t.Logf("Redis promoted %s %v after the fault; the failed master's sales sold again %v after that", replica,
		(promotedAt - clusterFaultAt).Round(time.Millisecond), (resumed - promotedAt).Round(time.Millisecond))
	if resumed-promotedAt > failoverGoal {
		// Where the time went: when each writer saw the new replication id
		// and when it had rebuilt each sale, beside the crowd's clock.
		t.Logf("over the %v goal; the crowd began at %s, the writers' reconciles:", failoverGoal, begin.UTC().Format("15:04:05.000"))
		for i, w := range writers {
			for line := range strings.Lines(w.Output()) {
				if strings.Contains(line, "failed over since") || strings.Contains(line, "reconciled from MySQL") || strings.Contains(line, "sale check") {
					t.Logf("writer %d: %s", i+1, strings.TrimSpace(line))
				}
			}
		}
	}
	if resumed-promotedAt > resumeAfterPromotion {
		t.Errorf("the failed master's sales sold again %v after the promotion; want within %v", (resumed - promotedAt).Round(time.Millisecond),
			resumeAfterPromotion)
	}
	if pause > resumeBound {
		t.Fatalf("the failed master's sales sold again only %v after they stopped; want within %v", pause, resumeBound)
	}
	if gap > survivingGap {
		t.Fatalf("the surviving masters' sales stopped for %v during the failover; want at most %v", gap, survivingGap)
	}

	fates := settleSales(t, s, vouchers, clusterStock, orders)

	// The sales of the failed master, and only those, were reconciled for
	// their new replication id.
	reconciled := map[string]float64{}
	for _, admin := range admins {
		metrics := testsupport.Eventually(t, "http://"+admin+"/metrics", 200, 10*time.Second)
		for line := range strings.Lines(metrics) {
			if strings.HasPrefix(line, "seckill_invariant_violations_total{") || strings.HasPrefix(line, "seckill_reconciles_total{") {
				name, value, _ := strings.Cut(strings.TrimSpace(line), " ")
				n, _ := strconv.ParseFloat(value, 64)
				reconciled[name] += n
			}
		}
	}
	t.Logf("the writers' reconciles: %v", reconciled)
	for _, v := range vouchers {
		k := salestate.KeysFor(s.redis.Prefix, v).Voucher
		was := s.redis.Client.HGet(ctx, k, "reconciled").Val() != ""
		if was != (owner[v] == victim) {
			t.Fatalf("voucher %d on %s (the failed master: %s) reconciled: %v; want the failed master's sales only", v, owner[v], victim, was)
		}
	}
	if n := reconciled[`seckill_invariant_violations_total{check="epoch_changed"}`]; n < float64(len(onMaster[victim])) {
		t.Fatalf("%v sales found under an old replication id; want the failed master's %d at least", n, len(onMaster[victim]))
	}
	if f.lossless && fates["confirmed "] != len(orders) {
		t.Fatalf("a lossless failover failed orders: %v", fates)
	}
}

// A master that holds one stock bucket of a hot voucher dies under its
// sale: one voucher of 3,000 units in 3 buckets on the cluster's 3
// masters, 3,000 buyers (as many units as buyers, so that the other
// buckets do not run dry during the outage and need the failed one's
// units). The buyers whose home is that bucket are paused until the
// cluster promotes its replica and the writer reconciles the sale; the
// others keep buying, stopped only while the reconcile rebuilds the sale.
// Then the same audit as every failure test: every unit sold once, Redis
// and MySQL agree, every acknowledged order settled.
func TestChaosClusterBucketMasterKilled(t *testing.T) {
	const buckets, stock, buyers = 3, 3000, 3000
	cl := testsupport.MustPrivateCluster(t)
	st := stack{cl.Redis, testsupport.MustMySQL(t), testsupport.MustKafka(t)}
	s := newSaleOn(t, st, map[string]string{"SECKILL_REDIS_EPOCH_INTERVAL": "200ms", "SECKILL_SOLDOUT_TTL": "1ms",
		"SECKILL_SALE_CHECK_INTERVAL": "1s"}, nil)
	v := s.voucherIn(t, stock, buckets, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	owner := make([]string, buckets)
	for b := range buckets {
		owner[b] = cl.MasterOf(t, salestate.BucketKeys(s.redis.Prefix, v, buckets, b).Voucher)
	}
	victim := 1
	if owner[0] == owner[1] || owner[1] == owner[2] || owner[0] == owner[2] {
		t.Fatalf("buckets on %v: want the buckets on three masters", owner)
	}
	t.Logf("buckets on %v; kill -9 of bucket %d's master %s", owner, victim, owner[victim])
	const first = 1
	tokens := s.sessions(t, first, buyers)
	home := map[string]int{}
	for i, tok := range tokens {
		home[tok] = salestate.Home(int64(first+i), buckets)
	}
	c := startCrowd(t, s, []int64{v}, tokens, buyers)
	time.Sleep(clusterFaultAt) // the fault falls a set time into the crowd: the test is about a fault under load
	if err := cl.Nodes[owner[victim]].Process.Kill(); err != nil {
		t.Fatal(err)
	}
	answers := c.wait()
	orders, tally := ordersOf(answers)
	t.Logf("final answers: %v", tally)
	for answer, n := range tally {
		if !strings.HasPrefix(answer, "accepted") && !strings.HasPrefix(answer, "reserved") && !strings.HasPrefix(answer, "200 ") {
			t.Errorf("%d buyers were finally answered %q: a failover must answer an order, a business refusal, or 503 to try again", n, answer)
		}
	}
	var others, victims []time.Duration
	for _, o := range orders {
		if home[o.token] == victim {
			victims = append(victims, o.at)
		} else {
			others = append(others, o.at)
		}
	}
	slices.Sort(others)
	slices.Sort(victims)
	gap, gapAt := longestGapAfter(others[:len(others)*95/100], clusterFaultAt)
	pause, pauseAt := longestGapAfter(victims, clusterFaultAt)
	t.Logf("the other buckets' buyers: %d orders, the longest gap after the fault %v (from %v; the fault at %v)",
		len(others), gap.Round(time.Millisecond), gapAt.Round(time.Millisecond), clusterFaultAt)
	t.Logf("the failed bucket's buyers: %d orders, stopped %v from %v", len(victims), pause.Round(time.Millisecond), pauseAt.Round(time.Millisecond))
	if pause > resumeBound {
		t.Fatalf("the failed bucket's buyers bought again only %v after they stopped; want within %v", pause, resumeBound)
	}
	// The failed bucket's buyers stop for the failover and the reconcile
	// (about 4 s here); the others only for the rebuild, which freezes
	// every bucket of the sale until all are rebuilt (160-793 ms here;
	// TestReconcileFreezesOnlyTheSuspectBucketWhileTheWriterCatchesUp shows
	// the rest without a clock).
	if gap > 2*time.Second {
		t.Fatalf("the other buckets' buyers stopped for %v during the failover", gap)
	}
	settleSales(t, s, []int64{v}, stock, orders)
	var reconciled []string
	for b := range buckets {
		reconciled = append(reconciled, s.redis.Client.HGet(context.Background(), salestate.BucketKeys(s.redis.Prefix, v, buckets, b).Voucher, "reconciled").Val())
	}
	t.Logf("the buckets' generations after the sale: %v", reconciled)
}

// promotionOf reports, once, how long after begin the replica said it is
// a master: when Redis finished the failover (within a minute).
func promotionOf(replica string, begin time.Time) <-chan time.Duration {
	promoted := make(chan time.Duration, 1)
	go func() {
		n := redis.NewClient(&redis.Options{Addr: replica, MaxRetries: -1, ReadTimeout: 200 * time.Millisecond})
		defer n.Close()
		for time.Since(begin) < time.Minute {
			if role, err := n.Do(context.Background(), "ROLE").Slice(); err == nil && role[0] == "master" {
				promoted <- time.Since(begin)
				return
			}
			time.Sleep(20 * time.Millisecond) // this poll times the promotion on a goroutine of its own: not a Wait
		}
	}()
	return promoted
}

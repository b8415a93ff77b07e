//go:build chaos

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/jwtauth"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/testsupport"
	"github.com/seckill/seckill/internal/user"
)

const (
	partitionSales    = 6
	partitionRate     = 40                 // attempts per sale per second, each a new buyer
	partitionStock    = partitionRate * 30 // more than the longest run's attempts: no sale sells out
	partitionOtherGap = time.Second
	// partitionResume: the cut-off master's sales sell again within this of
	// the promotion.
	partitionResume = time.Second
)

// A master is cut off from the cluster bus and from its replica for 10 s
// while the api still reaches it (a network partition, not a death): six
// sales, two on each master, each at a steady 40 attempts a second. The
// cluster promotes the replica on the majority's side; the api's calls to
// the cut-off master fail once it learns it is in the minority; at the
// heal it rejoins as a replica. From the cut to 15 s after the heal, the
// failed-over master's sales go no longer without an order than until a
// second after the promotion, the other sales never more than a second,
// and nothing accepted is lost. The sale check runs at its default
// interval: a reconcile that failed is not hidden by the next check.
func TestChaosClusterMasterPartitioned(t *testing.T) {
	runPartition(t, partitionFault{promotes: true, cut: (*testsupport.Cluster).Partition,
		at: 5 * time.Second, lasts: 10 * time.Second, run: 30 * time.Second})
}

// A master is cut off from the programs for 6 s while the cluster still
// reaches it: nothing is failed over, and the programs cannot reach the
// master of two of the sales. Those sales stop until the cut heals and
// sell again within a second of the heal; the others never stop more than
// a second; every buyer is answered (an order, or 503 to try again while
// the cut lasts), and nothing accepted is lost.
func TestChaosClusterMasterCutOffFromTheClients(t *testing.T) {
	runPartition(t, partitionFault{cut: (*testsupport.Cluster).CutClients,
		at: 3 * time.Second, lasts: 6 * time.Second, run: 15 * time.Second})
}

type partitionFault struct {
	promotes bool // the cluster fails the master over
	cut      func(c *testsupport.Cluster, tb testing.TB, master string) (heal func())
	// The cut comes at, lasts, and the sales run until run: every gap is
	// bounded from the cut to the run's end.
	at, lasts, run time.Duration
}

func runPartition(t *testing.T, f partitionFault) {
	cl := testsupport.MustPrivateCluster(t)
	st := stack{cl.Redis, testsupport.MustMySQL(t), testsupport.MustKafka(t)}
	s := newSaleOn(t, st, map[string]string{"SECKILL_REDIS_EPOCH_INTERVAL": "200ms", "SECKILL_SOLDOUT_TTL": "1ms"},
		map[string]string{"SECKILL_LOG_LEVEL": "debug"})

	owner := map[int64]string{}
	onMaster := map[string][]int64{}
	var vouchers []int64
	for len(vouchers) < partitionSales {
		v := s.voucher(t, partitionStock, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
		m := cl.MasterOf(t, salestate.KeysFor(s.redis.Prefix, v).Voucher)
		if len(onMaster[m]) == partitionSales/3 {
			continue // a voucher not needed: nobody buys it
		}
		owner[v] = m
		onMaster[m] = append(onMaster[m], v)
		vouchers = append(vouchers, v)
	}
	var victim string
	for m := range onMaster {
		victim = m
		break
	}
	t.Logf("sales by master: %v; %s cut off", onMaster, victim)
	partitionAt, partitionFor, partitionRun := f.at, f.lasts, f.run
	attempts := partitionSales * partitionRate * int(partitionRun/time.Second)
	tokens := s.sessions(t, 1, int64(attempts))

	replica := cl.ReplicaOf(t, victim)
	begin := time.Now()
	promoted := promotionOf(replica, begin)

	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2000, MaxConnsPerHost: 2000}}
	var mu sync.Mutex
	var answers []attempt
	var wg sync.WaitGroup
	next := 0
	tick := time.NewTicker(time.Second / partitionRate)
	var heal func()
	for range int(partitionRun / (time.Second / partitionRate)) {
		<-tick.C
		// The cut and the heal on the test's own goroutine, between ticks.
		switch since := time.Since(begin); {
		case heal == nil && since >= partitionAt:
			heal = f.cut(cl, t, victim)
		case heal != nil && since >= partitionAt+partitionFor:
			heal()
		}
		for _, v := range vouchers {
			tok := tokens[next]
			next++
			wg.Go(func() {
				a := attempt{voucher: v, token: tok, sent: time.Since(begin), final: true}
				req, _ := http.NewRequest("POST", s.api+"/voucher-order/seckill/"+strconv.FormatInt(v, 10), nil)
				req.Header.Set("authorization", tok)
				res, err := client.Do(req)
				a.at = time.Since(begin)
				if err != nil {
					a.err, a.msg = true, err.Error()
				} else {
					var r result
					_ = json.NewDecoder(res.Body).Decode(&r)
					res.Body.Close()
					a.status, a.msg = res.StatusCode, r.ErrorMsg
					a.orderID, _ = r.Data.(string)
				}
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
			})
		}
	}
	tick.Stop()
	wg.Wait()
	slices.SortFunc(answers, func(a, b attempt) int { return int(a.at - b.at) })
	orders, tally := ordersOf(answers)
	t.Logf("answers: %v", tally)

	// Until when the cut-off master's sales may stop: a second after the
	// promotion, or after the heal when nothing is failed over.
	var until time.Duration
	select {
	case at := <-promoted:
		t.Logf("Redis promoted %s %v after the cut", replica, (at - partitionAt).Round(time.Millisecond))
		if !f.promotes {
			t.Fatalf("the replica %s was promoted though the cluster still reached its master", replica)
		}
		until = at + partitionResume
	default:
		if f.promotes {
			t.Fatalf("the replica %s of the cut-off master was never promoted", replica)
		}
		until = partitionAt + partitionFor + partitionResume
	}
	var unanswered []string
	for _, a := range answers {
		if a.err || (a.status != 200 && a.status != 503) {
			unanswered = append(unanswered, fmt.Sprintf("%d %s", a.status, a.msg))
		}
	}
	if len(unanswered) > 0 {
		t.Errorf("%d buyers were answered neither an outcome nor 503, e.g. %q", len(unanswered), unanswered[:min(3, len(unanswered))])
	}
	bySale := map[int64][]time.Duration{}
	for _, o := range orders {
		bySale[o.voucher] = append(bySale[o.voucher], o.at)
	}
	for _, v := range vouchers {
		acc := bySale[v]
		slices.Sort(acc)
		// The longest pause that ends after the cut: to the run's end, 15 s
		// after the heal.
		gap, from := longestGapAfter(append([]time.Duration{0}, append(acc, partitionRun)...), partitionAt)
		t.Logf("voucher %d on %s (cut off: %v): %d orders, its longest pause %v from %v", v, owner[v], owner[v] == victim,
			len(acc), gap.Round(time.Millisecond), from.Round(time.Millisecond))
		switch {
		case owner[v] == victim:
			// Stopped at the cut at the latest; sells again within a second
			// of the promotion, or of the heal.
			if bound := until - partitionAt; gap > bound {
				t.Errorf("voucher %d of the cut-off master stopped for %v from %v; want at most until %v after the cut",
					v, gap.Round(time.Millisecond), from.Round(time.Millisecond), bound.Round(time.Millisecond))
			}
		case gap > partitionOtherGap:
			t.Errorf("voucher %d of a master that was not cut off stopped for %v from %v; want never over %v", v, gap.Round(time.Millisecond),
				from.Round(time.Millisecond), partitionOtherGap)
		}
	}
	if t.Failed() {
		causes := map[string]int{}
		for line := range strings.Lines(s.apiProc.Output()) {
			if _, cause, ok := strings.Cut(line, "msg=\"request refused\""); ok {
				if _, e, ok := strings.Cut(cause, " err="); ok {
					causes[strings.TrimSpace(e)]++
				}
			}
		}
		t.Logf("why the api refused requests: %v", causes)
		var writer []string
		for line := range strings.Lines(s.writer.Output()) {
			if strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") {
				writer = append(writer, strings.TrimSpace(line))
			}
		}
		t.Logf("the writer's warnings and errors:\n%s", strings.Join(writer[:min(len(writer), 40)], "\n"))
	}
	fates := settleSales(t, s, vouchers, partitionStock, orders)
	t.Logf("fates: %v", fmt.Sprint(fates))
}

// Each daemon is restarted while a master is cut off from the others, and
// again as it rejoins (started while that node says cluster_state:fail,
// which the test asserts, and healed while they start): each starts, becomes ready,
// and the sale then takes an order of a buyer on the failed-over master's
// slots, which reaches MySQL. The api runs in both session modes (the jwt
// mode reads its revocation feed once Redis answers, not at its start).
// A daemon that exits on a node's cluster_state:fail would leave accepted
// orders in Kafka, or the sale without an api.
func TestChaosDaemonsStartAroundAPartition(t *testing.T) {
	cl := testsupport.MustPrivateCluster(t)
	st := stack{cl.Redis, testsupport.MustMySQL(t), testsupport.MustKafka(t)}
	s := newSaleOn(t, st, map[string]string{"SECKILL_REDIS_EPOCH_INTERVAL": "200ms", "SECKILL_SALE_CHECK_INTERVAL": "1s"}, nil)
	invEnv := s.env()
	invEnv["SECKILL_ADMIN_ADDR"] = testsupport.FreeAddr(t)
	invEnv["SECKILL_LOG_LEVEL"] = "warn"
	invBin := testsupport.MustBuild(t, "../../cmd/cache-invalidator")
	apiEnv := maps.Clone(s.apiEnv)
	apiEnv["SECKILL_API_ADDR"] = strings.TrimPrefix(s.api, "http://")
	apiEnv["SECKILL_ADMIN_ADDR"] = strings.TrimPrefix(s.apiAdmin, "http://")
	jwtAPIEnv := maps.Clone(s.apiEnv)
	maps.Copy(jwtAPIEnv, jwtEnv(t))
	jwtAPIEnv["SECKILL_API_ADDR"], jwtAPIEnv["SECKILL_ADMIN_ADDR"] = testsupport.FreeAddr(t), testsupport.FreeAddr(t)
	jwtAPI := "http://" + jwtAPIEnv["SECKILL_API_ADDR"]
	type daemon struct {
		name, bin, ready string
		env              map[string]string
		proc             *testsupport.Process
	}
	daemons := []*daemon{
		{"api", s.apiBin, s.api + "/readyz", apiEnv, s.apiProc},
		{"api (jwt sessions)", s.apiBin, jwtAPI + "/readyz", jwtAPIEnv, nil},
		{"order-writer", s.writerBin, "http://" + s.writerEnv["SECKILL_ADMIN_ADDR"] + "/readyz", s.writerEnv, s.writer},
		{"cache-invalidator", invBin, "http://" + invEnv["SECKILL_ADMIN_ADDR"] + "/readyz", invEnv, nil},
	}
	for _, d := range daemons[1:] {
		if d.proc == nil {
			d.proc = testsupport.Start(t, d.bin, d.env)
			testsupport.Eventually(t, d.ready, 200, 30*time.Second)
		}
	}

	v := s.voucher(t, 100, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	victim := cl.MasterOf(t, salestate.KeysFor(s.redis.Prefix, v).Voucher)
	// restartAll stops every daemon, runs between, starts them all, runs
	// started, and waits until each is ready.
	restartAll := func(when string, between, started func()) {
		for _, d := range daemons {
			d.proc.Signal(t, syscall.SIGTERM)
			if code, err := d.proc.Wait(exitBound); err != nil || code != 0 {
				t.Fatalf("%s: %s stopped with %d, %v", when, d.name, code, err)
			}
		}
		between()
		for _, d := range daemons {
			d.proc = testsupport.Start(t, d.bin, d.env)
		}
		started()
		for _, d := range daemons {
			testsupport.Eventually(t, d.ready, 200, 30*time.Second)
			if d.proc.Exited() {
				t.Fatalf("%s: %s exited:\n%s", when, d.name, d.proc.Output())
			}
		}
		t.Logf("%s: every daemon restarted and ready", when)
	}

	heal := cl.Partition(t, victim)
	replica := cl.ReplicaOf(t, victim)
	testsupport.Wait(t, 30*time.Second, "the cut-off master's replica promoted", func() bool {
		n := redis.NewClient(&redis.Options{Addr: replica, MaxRetries: -1})
		defer n.Close()
		role, err := n.Do(context.Background(), "ROLE").Slice()
		return err == nil && role[0] == "master"
	})
	rejoining := redis.NewClient(&redis.Options{Addr: victim, MaxRetries: -1})
	defer rejoining.Close()
	// failing asserts that the cut-off master says its cluster fails: the
	// daemons are started while it does. After the heal it says ok again
	// within milliseconds (it rejoins as a replica, which waits for
	// nothing), so the second start comes before the heal, and the heal
	// while the daemons start.
	failing := func(when string) func() {
		return func() {
			info, err := rejoining.ClusterInfo(context.Background()).Result()
			state, _, _ := strings.Cut(info, "\n")
			if err != nil || strings.TrimSpace(state) != "cluster_state:fail" {
				t.Fatalf("%s: %s says %q, %v; want cluster_state:fail (the test is of a start while it fails)", when, victim, state, err)
			}
		}
	}
	nothing := func() {}
	restartAll("while "+victim+" is cut off", failing("before the start while cut off"), nothing)
	restartAll("as "+victim+" rejoins", failing("before the start as it rejoins"), heal)

	keys, err := jwtauth.ParseKeys([]byte(jwtAPIEnv["SECKILL_JWT_KEYS"]))
	if err != nil {
		t.Fatal(err)
	}
	jwtToken, err := jwtauth.NewTokens(keys, time.Minute).Issue(user.User{ID: 2, NickName: "e2e"}, "e2e-family", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	testsupport.Wait(t, 60*time.Second, "an order through the jwt api on the failed-over master's sale", func() bool {
		r := s.doAt(t, jwtAPI, "POST", "/voucher-order/seckill/"+strconv.FormatInt(v, 10), "Bearer "+jwtToken, nil, "")
		return r.Status == 200 && r.Success
	})

	// The test's own session write may reach the rejoined node: once it
	// serves again.
	testsupport.Wait(t, 30*time.Second, victim+" serving again", func() bool {
		info, err := rejoining.ClusterInfo(context.Background()).Result()
		return err == nil && strings.HasPrefix(info, "cluster_state:ok")
	})
	tok := s.sessions(t, 1, 1)[0]
	var r result
	testsupport.Wait(t, 60*time.Second, "an order on the failed-over master's sale", func() bool {
		r = s.do(t, "POST", "/voucher-order/seckill/"+strconv.FormatInt(v, 10), tok, nil, "")
		return r.Status == 200 && r.Success
	})
	orderID, _ := r.Data.(string)
	testsupport.Wait(t, 60*time.Second, "order "+orderID+" in MySQL", func() bool {
		var n int
		return s.mysql.DB.QueryRow("SELECT COUNT(*) FROM tb_voucher_order WHERE id = ?", orderID).Scan(&n) == nil && n == 1
	})
}

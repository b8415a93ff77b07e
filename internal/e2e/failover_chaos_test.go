//go:build chaos

package e2e

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/testsupport"
)

// A Redis failover that loses acknowledged writes, for real: a master and
// a replica, the replica's link cut mid-sale so that it falls behind, the
// master killed with SIGKILL, the replica promoted, and the programs'
// Redis address (a proxy, as a virtual IP or a cloud endpoint would be)
// moved to it. The api and the order-writer go on against the promoted
// replica, which has forgotten the last 400 orders: their units, their
// buyers and their reservations. The gate pauses the sale (its state was
// built under the old master's replication id), the writer reconciles it
// from MySQL, and the sale goes on.
func TestChaosRedisFailoverLosesWrites(t *testing.T) {
	ctx := context.Background()
	l := newLossyRedis(t)
	replica, front, rdb := l.replica, l.front, l.rdb
	st := l.stack(t)
	// Hardly a sold-out cache: the attempts after the failover ask the gate.
	s := newSaleOn(t, st, map[string]string{"SECKILL_REDIS_EPOCH_INTERVAL": "200ms", "SECKILL_SOLDOUT_TTL": "1ms"}, nil)

	const stock, users = 1000, 2000
	voucher := s.voucher(t, stock, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	tokens := s.sessions(t, 1, users)
	l.replicated(t)

	first, _, msgs := s.buy(t, voucher, tokens[:600])
	if len(first) != 600 {
		t.Fatalf("before the partition: %d accepted, %v", len(first), msgs)
	}
	l.replicated(t)
	l.link.Cut()
	second, reserved, msgs := s.buy(t, voucher, tokens[600:1000])
	if len(second) != 400 {
		t.Fatalf("with the replica cut off: %d accepted, %d reserved, %v; want 400 (the master sells on)", len(second), len(reserved), msgs)
	}

	l.failOver(t)
	lostStock, _ := replica.Client.HGet(ctx, salestate.KeysFor("", voucher).Voucher, "stock").Int()
	front.Switch(replica.Addr)
	t.Logf("the promoted replica holds stock %d of a sale the master had sold out", lostStock)
	if lostStock != 400 {
		t.Fatalf("the promoted replica holds stock %d; want 400: the test did not make it lose the last 400 orders", lostStock)
	}

	// The crowd goes on at once: the 1,000 who had not bought, and the
	// 400 the replica forgot trying again. Each retries a 503 as a client
	// told to try again in a moment does.
	crowd := append(append([]string{}, tokens[1000:]...), tokens[600:1000]...)
	third := buyRetrying(t, s, voucher, crowd, time.Minute)
	t.Logf("after the failover: %v; 503s answered and tried again: %v", third.tally, third.retried)

	// The reconcile makes Redis agree with MySQL, and nothing is pending.
	key := salestate.KeysFor("", voucher).Voucher
	pending := salestate.KeysFor("", voucher).Pending
	var orders, distinct, mysqlStock, failures int
	testsupport.Wait(t, time.Minute, "Redis's stock equals MySQL's, no reservation pending", func() bool {
		if err := s.mysql.DB.QueryRow(`SELECT COUNT(*), COUNT(DISTINCT user_id),
			(SELECT stock FROM tb_seckill_voucher WHERE voucher_id = ?),
			(SELECT COUNT(*) FROM tb_voucher_order_failure WHERE voucher_id = ?)
			FROM tb_voucher_order WHERE voucher_id = ?`, voucher, voucher, voucher).Scan(&orders, &distinct, &mysqlStock, &failures); err != nil {
			t.Fatal(err)
		}
		redisStock, err := rdb.HGet(ctx, key, "stock").Int()
		return err == nil && redisStock == mysqlStock && rdb.HLen(ctx, pending).Val() == 0
	})
	if orders > stock || orders+mysqlStock != stock {
		t.Fatalf("MySQL: %d orders and stock %d of %d units: oversold or a unit lost", orders, mysqlStock, stock)
	}
	if distinct != orders {
		t.Fatalf("MySQL: %d orders for %d users: someone has two", orders, distinct)
	}

	// Every order the api acknowledged is confirmed, or failed with a
	// reason its buyer can read.
	for _, id := range append(append(first, second...), reserved...) {
		var n int
		_ = s.mysql.DB.QueryRow("SELECT COUNT(*) FROM tb_voucher_order WHERE id = ?", id).Scan(&n)
		if n != 1 {
			t.Fatalf("order %s, accepted before the failover, is not in MySQL", id)
		}
	}
	fates := map[string]int{}
	for id, tok := range third.accepted {
		r := s.do(t, "GET", "/voucher-order/"+id, tok, nil, "")
		st, _ := r.Data.(map[string]any)
		status, _ := st["status"].(string)
		reason, _ := st["reason"].(string)
		switch {
		case r.Status == 200 && status == "confirmed":
		case r.Status == 200 && status == "failed" && reason != "":
		default:
			t.Fatalf("order %s, accepted after the failover: %d %v", id, r.Status, r.Data)
		}
		fates[strings.TrimSpace(status+" "+reason)]++
	}
	t.Logf("orders accepted after the failover, by what became of them: %v", fates)

	// Whichever check sees it first (the epoch watcher, or a batch whose
	// stock Redis holds above MySQL's) counts it; its reconcile leaves the
	// others nothing to find.
	metrics := testsupport.Eventually(t, "http://"+s.writerEnv["SECKILL_ADMIN_ADDR"]+"/metrics", 200, 10*time.Second)
	violations := 0.0
	for line := range strings.Lines(metrics) {
		if strings.HasPrefix(line, "seckill_invariant_violations_total") || strings.HasPrefix(line, "seckill_reconciles_total") {
			t.Log(strings.TrimSpace(line))
		}
		if strings.HasPrefix(line, "seckill_invariant_violations_total{") {
			n, _ := strconv.ParseFloat(strings.TrimSpace(line[strings.LastIndex(line, " "):]), 64)
			violations += n
		}
	}
	if violations == 0 {
		t.Fatal("the writer's metrics count no violated invariant after the failover")
	}
	redisStock, _ := rdb.HGet(ctx, key, "stock").Int()
	t.Logf("MySQL: %d orders, %d failures, stock %d; Redis stock %d", orders, failures, mysqlStock, redisStock)
}

// crowdResult is what buyRetrying saw.
type crowdResult struct {
	accepted map[string]string // order id -> its buyer's token
	tally    map[string]int    // final answers
	retried  map[string]int    // 503s tried again
}

// buyRetrying fires one order per token, all at once; a 503 is tried
// again after a moment, until within.
func buyRetrying(t *testing.T, s *sale, voucher int64, tokens []string, within time.Duration) crowdResult {
	res := crowdResult{accepted: map[string]string{}, tally: map[string]int{}, retried: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	deadline := time.Now().Add(within)
	for _, tok := range tokens {
		wg.Go(func() {
			for {
				r := s.do(t, "POST", "/voucher-order/seckill/"+strconv.FormatInt(voucher, 10), tok, nil, "")
				if r.Status == 503 && time.Now().Before(deadline) {
					mu.Lock()
					res.retried[r.ErrorMsg]++
					mu.Unlock()
					time.Sleep(200 * time.Millisecond) // the buyer's pace of retrying a 503, not a wait for an event
					continue
				}
				mu.Lock()
				defer mu.Unlock()
				if r.Status == 200 && r.Success {
					res.accepted[r.Data.(string)] = tok
					res.tally["accepted"]++
					return
				}
				res.tally[fmt.Sprintf("%d %s", r.Status, r.ErrorMsg)]++
				return
			}
		})
	}
	wg.Wait()
	return res
}

// lossyRedis is a Redis master with one replica behind a link the test can
// cut, so that the replica falls behind, and the programs' address of the
// master (a proxy, as a virtual IP or a cloud endpoint would be), which
// the test moves to the replica once it is promoted.
type lossyRedis struct {
	master, replica *testsupport.Redis
	masterProc      *exec.Cmd
	link, front     *testsupport.Proxy
	rdb             *redis.Client // through front
}

func newLossyRedis(t *testing.T) *lossyRedis {
	l := &lossyRedis{}
	l.master, l.masterProc = testsupport.MustPrivateRedis(t, "--appendonly", "yes")
	l.link = testsupport.MustProxy(t, l.master.Addr)
	host, port, _ := net.SplitHostPort(l.link.Addr)
	l.replica, _ = testsupport.MustPrivateRedis(t, "--replicaof", host, port)
	l.front = testsupport.MustProxy(t, l.master.Addr)
	l.rdb = redis.NewClient(&redis.Options{Addr: l.front.Addr, MaxRetries: 5})
	t.Cleanup(func() { l.rdb.Close() })
	return l
}

// stack is the test's servers with this Redis in front.
func (l *lossyRedis) stack(t *testing.T) stack {
	return stack{&testsupport.Redis{Client: l.rdb, Addr: l.front.Addr}, testsupport.MustMySQL(t), testsupport.MustKafka(t)}
}

// replicated waits for the replica to acknowledge every write so far.
func (l *lossyRedis) replicated(t *testing.T) {
	t.Helper()
	if n, err := l.master.Client.Do(context.Background(), "WAIT", 1, 10000).Int(); err != nil || n != 1 {
		t.Fatalf("the replica did not acknowledge the master's writes: %d, %v", n, err)
	}
}

// failOver kills the master with SIGKILL and promotes the replica; the
// programs' address still points at the dead master until front.Switch.
func (l *lossyRedis) failOver(t *testing.T) {
	t.Helper()
	if err := l.masterProc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := l.replica.Client.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
}

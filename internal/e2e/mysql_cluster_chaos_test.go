//go:build chaos

package e2e

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/mysqldb"
	"github.com/seckill/seckill/internal/orderdb"
	"github.com/seckill/seckill/internal/schema"
	"github.com/seckill/seckill/internal/testsupport"
)

// The MariaDB cluster's failure tests (stack.sh up --mysql-cluster: three
// Galera nodes behind HAProxy, which sends every connection to one of
// them). Each kills the node in use and ends with it rejoined.

// activeNode is the cluster node HAProxy sends connections to now (stack.sh
// names node n "node<n>").
func activeNode(t *testing.T, m *testsupport.MySQL) int {
	t.Helper()
	var name string
	if err := m.DB.QueryRow("SELECT @@wsrep_node_name").Scan(&name); err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimPrefix(name, "node"))
	if err != nil {
		t.Fatalf("node name %q: not one of stack.sh's", name)
	}
	return n
}

// rejoin starts the killed node again and waits until the cluster has
// its three nodes.
func rejoin(t *testing.T, m *testsupport.MySQL) {
	t.Helper()
	stackCtl(t, "start", "mysql-cluster")
	testsupport.Wait(t, 60*time.Second, "the MariaDB cluster back to 3 nodes", func() bool {
		var name, size string
		return m.DB.QueryRow("SHOW GLOBAL STATUS LIKE 'wsrep_cluster_size'").Scan(&name, &size) == nil && size == "3"
	})
}

// The node the order-writer writes to dies in the middle of a sale of
// 3,000 buyers on 2,000 units, at the worst moment: the writer's COMMIT of
// a batch reached the node and was certified by the cluster, and the node
// died before its answer reached the writer. The writer cannot tell a
// commit made from one lost; it tries the batch again, HAProxy sends it to
// the next Synced node, which has the commit, and the orders settle
// exactly once.
func TestChaosMySQLClusterWritersNodeKilled(t *testing.T) {
	m := testsupport.MustMySQLCluster(t)
	t.Cleanup(func() { rejoin(t, m) })
	tap := testsupport.MustQueryTap(t, m.Addr)
	s := newSaleOn(t, stack{testsupport.MustRedis(t), m, testsupport.MustKafka(t)},
		map[string]string{"SECKILL_MYSQL_DSN": m.DSNThrough(tap)}, nil)
	voucher := s.voucher(t, 2000, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	tokens := s.sessions(t, 1, 3000)
	node := activeNode(t, m)

	first, _, msgs := s.buy(t, voucher, tokens[:500])
	if len(first) != 500 {
		t.Fatalf("%d accepted of the first 500 buyers, other answers %v", len(first), msgs)
	}
	answered, killed := make(chan struct{}), make(chan struct{})
	var lostTxn []string
	tap.LoseNextCommitAnswer(func(txn []string) {
		lostTxn = txn
		close(answered)
		select {
		case <-killed:
		case <-time.After(time.Minute):
		}
	})
	var rest []string
	bought := make(chan struct{})
	go func() {
		defer close(bought)
		rest, _, msgs = s.buy(t, voucher, tokens[500:])
	}()
	select {
	case <-answered:
	case <-time.After(60 * time.Second):
		t.Fatal("no COMMIT answered within 60 s of the sale's second half")
	}
	stackCtl(t, "kill", "mysql-node", strconv.Itoa(node))
	close(killed)
	killedAt := time.Now()
	if !strings.Contains(strings.ToLower(strings.Join(lostTxn, "\n")), "insert into tb_voucher_order") {
		t.Fatalf("the transaction whose COMMIT's answer was lost inserted no orders: %.300q", lostTxn)
	}
	<-bought
	if len(rest) != 1500 || msgs["200 sold out"] != 1000 || len(msgs) != 1 {
		t.Fatalf("second half: %d accepted, other answers %v; want 1,500 and 1,000 × sold out", len(rest), msgs)
	}
	s.audit(t, voucher, append(first, rest...), 2000, 0)
	if out := s.writer.Output(); !strings.Contains(out, "handling a batch failed; retrying") {
		t.Fatalf("the writer never retried a batch after its COMMIT's answer was lost:\n%s", out)
	}
	testsupport.Wait(t, 15*time.Second, "the writer's seckill_mysql_cluster_size at 2", func() bool {
		_, metrics := testsupport.Get(context.Background(), "http://"+s.writerEnv["SECKILL_ADMIN_ADDR"]+"/metrics")
		return strings.Contains(metrics, "\nseckill_mysql_cluster_size 2\n")
	})
	t.Logf("node %d killed after a COMMIT's answer was lost; every order in MySQL %v later, now on node %d",
		node, time.Since(killedAt).Round(time.Millisecond), activeNode(t, m))
	rejoin(t, m)
}

// The node the cache-invalidator reads the binlog from dies right after a
// shop's row changed, while the invalidator is stopped: its saved
// position names a place in the dead node's binlog. Started again, it
// reaches another node through HAProxy and resumes there from its GTID
// set, deleting the changed shop's key and no other (a file and offset
// the new node never had would take the purged path and flush every
// cached shop).
func TestChaosMySQLClusterBinlogNodeKilled(t *testing.T) {
	m := testsupport.MustMySQLCluster(t)
	t.Cleanup(func() { rejoin(t, m) })
	st := stack{testsupport.MustRedis(t), m, testsupport.MustKafka(t)}
	ctx := context.Background()
	if err := schema.Seed(ctx, m.DB); err != nil {
		t.Fatal(err)
	}
	env, admin := st.invalidatorEnv(t)
	t.Cleanup(func() { os.Remove(env["SECKILL_BINLOG_POSITION_FILE"]) })
	bin := testsupport.MustBuild(t, "../../cmd/cache-invalidator")
	start := func() *testsupport.Process {
		p := testsupport.Start(t, bin, env)
		testsupport.Eventually(t, "http://"+admin+"/readyz", 200, 60*time.Second)
		return p
	}
	key := func(id int) string { return fmt.Sprintf("%scache:shop:{%d}", st.redis.Prefix, id) }
	change := func(id int) {
		st.redis.Client.Set(ctx, key(id), "stale", 0)
		if _, err := m.DB.Exec("UPDATE tb_shop SET sold = sold + 1 WHERE id = ?", id); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(id int) bool { return st.redis.Client.Exists(ctx, key(id)).Val() == 0 }

	p := start()
	testsupport.Wait(t, 20*time.Second, "the invalidator following", func() bool {
		change(1)
		return testsupport.Poll(200*time.Millisecond, func() bool { return gone(1) })
	})
	p.Signal(t, syscall.SIGTERM)
	if _, err := p.Wait(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	before := savedPosition(t, env["SECKILL_BINLOG_POSITION_FILE"])
	if before.GTID == "" {
		t.Fatalf("the invalidator saved %+v: no GTID set", before)
	}

	node := activeNode(t, m)
	st.redis.Client.Set(ctx, key(3), "fresh", 0)
	change(2)
	// What the resume relies on: the node that takes over has the same
	// GTIDs in its binlog as the one that dies.
	sameGTIDs(t, m, node)
	stackCtl(t, "kill", "mysql-node", strconv.Itoa(node))
	p = start()
	testsupport.Wait(t, 60*time.Second, "the change made before the node died invalidated", func() bool { return gone(2) })
	// A flush deletes the keys one by one: give it time to reach this one.
	if testsupport.Poll(time.Second, func() bool { return gone(3) }) {
		t.Fatal("an unchanged shop's key was deleted: the invalidator flushed instead of resuming from its GTID set")
	}
	if out := p.Output(); strings.Contains(out, "no longer on the server") {
		t.Fatalf("the invalidator took its GTID set for purged:\n%s", out)
	}
	// The position now moves on the new node's binlog, by GTID.
	change(4)
	testsupport.Wait(t, 20*time.Second, "a change on the new node invalidated", func() bool { return gone(4) })
	if now := activeNode(t, m); now == node {
		t.Fatalf("HAProxy still sends to node %d, which was killed", node)
	}
	t.Logf("resumed on node %d from %s (saved on node %d)", activeNode(t, m), before.GTID, node)
	rejoin(t, m)
}

// sameGTIDs waits until every node's binlog holds the active node's last
// GTIDs, and fails naming each node's when they do not.
func sameGTIDs(t *testing.T, m *testsupport.MySQL, active int) {
	t.Helper()
	pos := func() map[int]string {
		out := map[int]string{}
		for n := 1; n <= 3; n++ {
			var p string
			if err := nodeDB(t, m, n).QueryRow("SELECT @@gtid_binlog_pos").Scan(&p); err != nil {
				t.Fatal(err)
			}
			out[n] = p
		}
		return out
	}
	var last map[int]string
	if testsupport.Poll(10*time.Second, func() bool { last = pos(); return last[1] == last[2] && last[2] == last[3] }) {
		return
	}
	t.Fatalf("the nodes' binlogs hold different GTIDs (active node %d): %v; a follower resuming by GTID set on another node would be told its position is gone", active, last)
}

type position struct {
	Name string `json:"name"`
	GTID string `json:"gtid"`
}

func savedPosition(t *testing.T, path string) position {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p position
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("position file %s: %v", raw, err)
	}
	return p
}

// nodeDB is a pool straight to node n of the cluster (stack.sh: the
// HAProxy port + n), bypassing HAProxy.
func nodeDB(t *testing.T, m *testsupport.MySQL, n int) *sql.DB {
	t.Helper()
	host, port, err := net.SplitHostPort(m.Addr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	cfg, err := mysql.ParseDSN(m.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = net.JoinHostPort(host, strconv.Itoa(p+n))
	db, err := mysqldb.Open(cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Two nodes of three die under a sale: the survivor is a minority, not
// Primary, and refuses every statement; HAProxy has no node to send to.
// The hot path needs no MySQL and goes on; the order-writer holds its
// batch, commits no offset and says in its readiness that MySQL is down
// and why; a pool straight to the survivor is told it is outside a
// Primary component. The two come back, the cluster is Primary again,
// every order lands once, and the nodes keep one history: every node's
// binlog has the same GTIDs, all in the cluster's domain, and a binlog
// follower resumes on each from a position saved before the fault. Once
// with the node HAProxy writes to surviving, once with it among the dead.
// (Before stack.sh bootstrapped the survivor, the nodes that came back
// logged under GTID domain 0: node1=0-1-9,1-1-9 node2=1-1-18
// node3=0-1-9,1-1-9.)
func TestChaosMySQLClusterLosesQuorum(t *testing.T) {
	for _, c := range []struct {
		name            string
		writersSurvives bool
	}{{"the writes' node survives", true}, {"the writes' node dies", false}} {
		t.Run(c.name, func(t *testing.T) { losesQuorum(t, c.writersSurvives) })
	}
}

func losesQuorum(t *testing.T, writersSurvives bool) {
	m := testsupport.MustMySQLCluster(t)
	t.Cleanup(func() { rejoin(t, m) })
	s := newSaleOn(t, stack{testsupport.MustRedis(t), m, testsupport.MustKafka(t)}, map[string]string{"SECKILL_ORDER_STUCK_AFTER": "1s"}, nil)
	voucher := s.voucher(t, 300, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	tokens := s.sessions(t, 1, 300)
	first, _, _ := s.buy(t, voucher, tokens[:100])
	s.audit(t, voucher, first, 100, 200)
	committed := committedOffsets(t, s)
	var saved string
	if err := m.DB.QueryRow("SELECT @@gtid_binlog_pos").Scan(&saved); err != nil {
		t.Fatal(err)
	}

	writerAdmin := "http://" + s.writerEnv["SECKILL_ADMIN_ADDR"]
	clusterSize := func(want string) func() bool {
		return func() bool {
			_, metrics := testsupport.Get(context.Background(), writerAdmin+"/metrics")
			return strings.Contains(metrics, "\nseckill_mysql_cluster_size "+want+"\n")
		}
	}
	testsupport.Wait(t, 10*time.Second, "the writer's seckill_mysql_cluster_size at 3", clusterSize("3"))
	survivor := activeNode(t, m)
	if !writersSurvives {
		survivor = survivor%3 + 1
	}
	for n := 1; n <= 3; n++ {
		if n != survivor {
			stackCtl(t, "kill", "mysql-node", strconv.Itoa(n))
		}
	}
	direct := nodeDB(t, m, survivor)
	var checkErr error
	testsupport.Wait(t, 30*time.Second, "the survivor outside a Primary component", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		checkErr = mysqldb.Check(ctx, direct)
		return errors.Is(checkErr, mysqldb.ErrNodeNotReady) && strings.Contains(checkErr.Error(), "non-Primary")
	})
	t.Logf("the survivor, asked directly: %v", checkErr)

	second, _, msgs := s.buy(t, voucher, tokens[100:200])
	if len(second) != 100 {
		t.Fatalf("%d accepted while the cluster had no quorum, other answers %v; want 100: the hot path needs no MySQL", len(second), msgs)
	}
	var ready string
	testsupport.Wait(t, 30*time.Second, "the writer's readiness saying MySQL is down, and why", func() bool {
		code, body := testsupport.Get(context.Background(), writerAdmin+"/readyz")
		ready = body
		return code == 503 && strings.Contains(body, `"name":"mysql"`) && strings.Contains(body, "no healthy server")
	})
	t.Logf("the writer's readiness: %s", ready)
	testsupport.Wait(t, 10*time.Second, "the writer's seckill_mysql_cluster_size at 0", clusterSize("0"))
	testsupport.Wait(t, 30*time.Second, "the writer reports a batch it keeps failing on", func() bool {
		_, metrics := testsupport.Get(context.Background(), writerAdmin+"/metrics")
		return strings.Contains(metrics, `seckill_consumer_batches_stuck_total{consumer="orders"} `) &&
			!strings.Contains(metrics, `seckill_consumer_batches_stuck_total{consumer="orders"} 0`)
	})
	if now := committedOffsets(t, s); now != committed {
		t.Fatalf("offsets moved from %d to %d while the cluster had no quorum", committed, now)
	}

	rejoin(t, m)
	third, _, _ := s.buy(t, voucher, tokens[200:])
	s.audit(t, voucher, append(append(first, second...), third...), 300, 0)
	// The nodes that came back log the cluster's transactions under its
	// GTIDs, as the survivor does: the binlog follower can still resume
	// on any of them.
	sameGTIDs(t, m, activeNode(t, m))
	for n := 1; n <= 3; n++ {
		var pos string
		var domain int
		if err := nodeDB(t, m, n).QueryRow("SELECT @@gtid_binlog_pos, @@wsrep_gtid_domain_id").Scan(&pos, &domain); err != nil {
			t.Fatal(err)
		}
		for g := range strings.SplitSeq(pos, ",") {
			if !strings.HasPrefix(g, strconv.Itoa(domain)+"-") {
				t.Errorf("node %d logged %s outside the cluster's GTID domain %d (its binlog: %s)", n, g, domain, pos)
			}
		}
		resumesAt(t, m, n, saved)
	}
}

// resumesAt fails unless a binlog follower asking node n for the events
// after gtid (a position saved on another node) gets them, not the
// server's "no longer in the binlog" (1236), which makes the
// cache-invalidator flush every cached family.
func resumesAt(t *testing.T, m *testsupport.MySQL, n int, gtid string) {
	t.Helper()
	host, port, err := net.SplitHostPort(m.Addr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	set, err := gomysql.ParseMariadbGTIDSet(gtid)
	if err != nil {
		t.Fatal(err)
	}
	syncer := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{ServerID: uint32(4000 + n), Flavor: gomysql.MariaDBFlavor,
		Host: host, Port: uint16(p + n), User: m.User, Password: m.Password, Logger: slog.New(slog.DiscardHandler), MaxReconnectAttempts: 1})
	defer syncer.Close()
	streamer, err := syncer.StartSyncGTID(set)
	if err != nil {
		t.Fatalf("node %d: binlog from %s: %v", n, gtid, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The server answers a position it cannot serve with an error at
	// once, before or after the stream's opening events.
	for range 3 {
		if _, err := streamer.GetEvent(ctx); err != nil {
			t.Fatalf("node %d cannot resume from %s, saved before the quorum was lost: %v", n, gtid, err)
		}
	}
}

// On the MariaDB cluster, through its HAProxy: each program becomes ready;
// with a wrong password it stays up — the daemons unready, the api ready
// and degraded — and its admin readiness says access was denied, to which
// dependency, at which address. (With the
// failure tests: like them, it needs the stack's cluster.)
func TestChaosProgramsOnTheMySQLCluster(t *testing.T) {
	t.Parallel()
	s := stack{testsupport.MustRedis(t), testsupport.MustMySQLCluster(t), testsupport.MustKafka(t)}
	for _, p := range programs {
		bin := testsupport.MustBuild(t, p.dir)
		for _, wrong := range []bool{false, true} {
			name := p.dir[len("../../cmd/"):] + "/ready"
			if wrong {
				name = p.dir[len("../../cmd/"):] + "/wrong password"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				addr, admin := testsupport.FreeAddr(t), ""
				env := s.env()
				env[p.listenVar] = addr
				if admin = addr; p.listenVar != "SECKILL_ADMIN_ADDR" {
					admin = testsupport.FreeAddr(t)
					env["SECKILL_ADMIN_ADDR"] = admin
				}
				dep := "mysql"
				if p.broken == "binlog" {
					dep = "binlog"
				}
				if wrong {
					env["SECKILL_MYSQL_DSN"] = strings.Replace(env["SECKILL_MYSQL_DSN"], ":"+s.mysql.Password+"@", ":not-the-password@", 1)
					env["SECKILL_BINLOG_PASSWORD"] = "not-the-password"
				}
				proc := testsupport.Start(t, bin, env)
				if !wrong {
					testsupport.Eventually(t, "http://"+addr+"/readyz", 200, 30*time.Second)
					// The cache-invalidator reads the binlog, not the
					// tables: it keeps no pool to watch.
					if dep == "mysql" {
						metrics := testsupport.Eventually(t, "http://"+admin+"/metrics", 200, 5*time.Second)
						if !strings.Contains(metrics, "\nseckill_mysql_cluster_size 3\n") {
							t.Fatalf("metrics lack seckill_mysql_cluster_size 3:\n%s", grepLines(metrics, "seckill_mysql"))
						}
					}
					return
				}
				// The daemons cannot work without it: not ready. The api sells
				// without MySQL: ready, degraded. The admin listener says why.
				code, required := 503, "true"
				if p.listenVar != "SECKILL_ADMIN_ADDR" {
					code, required = 200, "false"
				}
				testsupport.Wait(t, 30*time.Second, "readiness saying access was denied", func() bool {
					got, b := testsupport.Get(context.Background(), "http://"+admin+"/readyz")
					return got == code && strings.Contains(b, `{"name":"`+dep+`","addr":"`+s.mysql.Addr+`","up":false,"required":`+required+`,"error":"`) &&
						strings.Contains(b, "Access denied")
				})
				if proc.Exited() {
					t.Fatalf("program exited with a wrong password:\n%s", proc.Output())
				}
			})
		}
	}
}

// grepLines is the lines of text that contain part.
func grepLines(text, part string) string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		if strings.Contains(line, part) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// Galera certifies a commit on every node and applies it on each in its
// own time. The reconcile's truth (SaleTruth), read on a node that has not
// applied the writer's last batch yet, would miss orders whose
// reservations are gone from Redis and put their units on sale again. A
// node's applying is held back here (desynced, FLUSH TABLES WITH READ
// LOCK): a plain read there misses the orders written through another
// node; the programs' pools read causally (wsrep_sync_wait), so the
// truth read there waits for them and counts every one.
func TestChaosMySQLClusterReadsAreCausal(t *testing.T) {
	m := testsupport.MustMySQLCluster(t)
	ctx := context.Background()
	const voucher, orders = 1, 5
	m.MustSeedVoucher(t, voucher, 100)
	writes := activeNode(t, m)
	lagging := writes%3 + 1
	sameGTIDs(t, m, writes)

	held, err := nodeDB(t, m, lagging).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	release := func() {
		_, _ = held.ExecContext(ctx, "UNLOCK TABLES")
		_, _ = held.ExecContext(ctx, "SET GLOBAL wsrep_desync = OFF")
	}
	t.Cleanup(release)
	for _, q := range []string{"SET GLOBAL wsrep_desync = ON", "FLUSH TABLES WITH READ LOCK"} {
		if _, err := held.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s on node %d: %v", q, lagging, err)
		}
	}
	for i := range orders {
		if _, err := m.DB.ExecContext(ctx, "INSERT INTO tb_voucher_order (id, user_id, voucher_id) VALUES (?, ?, ?)", 9000+i, 100+i, voucher); err != nil {
			t.Fatal(err)
		}
	}

	cfg, err := mysql.ParseDSN(m.DSN)
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(m.Addr)
	p, _ := strconv.Atoi(port)
	cfg.Addr = net.JoinHostPort(host, strconv.Itoa(p+lagging))
	plain, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	var seen int
	if err := plain.QueryRowContext(ctx, "SELECT COUNT(*) FROM tb_voucher_order WHERE voucher_id = ?", voucher).Scan(&seen); err != nil {
		t.Fatal(err)
	}
	if seen == orders {
		t.Fatalf("node %d applied the %d orders while held back: the test shows nothing", lagging, orders)
	}
	t.Logf("a plain read on node %d, held back: %d of %d orders", lagging, seen, orders)

	released := time.AfterFunc(time.Second, release)
	defer released.Stop()
	began := time.Now()
	truth, ok, err := (&orderdb.Orders{DB: nodeDB(t, m, lagging)}).SaleTruth(ctx, voucher, nil)
	if err != nil || !ok {
		t.Fatalf("the reconcile's truth on node %d: %v, found %v", lagging, err, ok)
	}
	t.Logf("the reconcile's truth on node %d: %d holders, read in %v (applying resumed after 1 s)", lagging, len(truth.Holders),
		time.Since(began).Round(time.Millisecond))
	if len(truth.Holders) != orders {
		t.Fatalf("the reconcile's truth on node %d, behind the cluster, has %d of the %d orders written through node %d: "+
			"a reconcile would sell the missing ones' units again", lagging, len(truth.Holders), orders, writes)
	}
}

// An operator sets the writes' node aside (read_only, or
// wsrep_reject_queries): it is still Synced in a Primary component, and
// HAProxy's check kept sending every connection to it, where each write
// failed. The check now refuses it: new connections go to a backup, and
// come back when the node takes writes again.
func TestChaosMySQLClusterSetAsideNodeLeavesRotation(t *testing.T) {
	m := testsupport.MustMySQLCluster(t)
	ctx := context.Background()
	writes := activeNode(t, m)
	node := nodeDB(t, m, writes)
	t.Cleanup(func() { _, _ = node.ExecContext(ctx, "SET GLOBAL read_only = OFF") })
	if _, err := node.ExecContext(ctx, "SET GLOBAL read_only = ON"); err != nil {
		t.Fatal(err)
	}
	fresh := func() int {
		// A connection of its own: HAProxy picks the node at connect.
		c, err := m.DB.Conn(ctx)
		if err != nil {
			return 0
		}
		defer c.Close()
		defer func() { _ = c.Raw(func(any) error { return driver.ErrBadConn }) }()
		var name string
		if err := c.QueryRowContext(ctx, "SELECT @@wsrep_node_name").Scan(&name); err != nil {
			return 0
		}
		n, _ := strconv.Atoi(strings.TrimPrefix(name, "node"))
		return n
	}
	testsupport.Wait(t, 15*time.Second, "HAProxy sending new connections away from the read-only node", func() bool {
		n := fresh()
		return n != 0 && n != writes
	})
	if _, err := m.DB.ExecContext(ctx, "INSERT INTO tb_voucher (shop_id, title, pay_value, actual_value, type) VALUES (1, 'set aside', 1, 2, 0)"); err != nil {
		t.Fatalf("a write with the writes' node read-only: %v", err)
	}
	if _, err := node.ExecContext(ctx, "SET GLOBAL read_only = OFF"); err != nil {
		t.Fatal(err)
	}
	testsupport.Wait(t, 15*time.Second, "node "+strconv.Itoa(writes)+" taking the connections back", func() bool { return fresh() == writes })
}

// The writes' node donates a whole snapshot to a node rebuilt from
// nothing. By mariabackup the donor keeps taking queries and writes
// (the method is non-blocking), so it stays in rotation: the sessions on
// it are not cut, and new connections still go to it, not to a backup
// whose every session would be cut again when the donor came back.
func TestChaosMySQLClusterDonorStaysInRotation(t *testing.T) {
	m := testsupport.MustMySQLCluster(t)
	ctx := context.Background()
	writes := activeNode(t, m)
	joiner := 3
	if writes == 3 {
		joiner = 2
	}
	node := nodeDB(t, m, writes)
	held, err := m.DB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	write := func(c *sql.Conn) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := c.ExecContext(ctx, "INSERT INTO tb_voucher (shop_id, title, pay_value, actual_value, type) VALUES (1, 'donor', 1, 2, 0)"); err != nil {
			return "", err
		}
		var name string
		err := c.QueryRowContext(ctx, "SELECT @@wsrep_node_name").Scan(&name)
		return name, err
	}
	want := "node" + strconv.Itoa(writes)
	if name, err := write(held); err != nil || name != want {
		t.Fatalf("before the snapshot: a write on %q (%v), want %s", name, err, want)
	}

	// A failure mid-snapshot still waits for the rebuild: the next test
	// must not start on a node that is joining.
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Minute)
	rebuilt := make(chan error, 1)
	done := false
	t.Cleanup(func() {
		if !done {
			<-rebuilt
		}
		rcancel()
	})
	go func() {
		out, err := exec.CommandContext(rctx, os.Getenv("SECKILL_TEST_STACK"), "rebuild", "mysql-node", strconv.Itoa(joiner), strconv.Itoa(writes)).CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, out)
		}
		rebuilt <- err
	}()
	var firstDonor, lastDonor time.Time
	writesWhileDonor := 0
	for !done {
		select {
		case err := <-rebuilt:
			if err != nil {
				t.Fatalf("stack.sh rebuild mysql-node %d %d: %v", joiner, writes, err)
			}
			done = true
		case <-time.After(250 * time.Millisecond):
		}
		var k, state string
		if err := node.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'wsrep_local_state_comment'").Scan(&k, &state); err != nil {
			t.Fatalf("node %d's state: %v", writes, err)
		}
		donor := strings.HasPrefix(state, "Donor")
		if donor {
			if firstDonor.IsZero() {
				firstDonor = time.Now()
			}
			lastDonor = time.Now()
		}
		if name, err := write(held); err != nil || name != want {
			t.Fatalf("a session on node %d during its snapshot (state %s): a write on %q: %v", writes, state, name, err)
		}
		fresh, err := m.DB.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		name, err := write(fresh)
		_ = fresh.Raw(func(any) error { return driver.ErrBadConn })
		fresh.Close()
		if err != nil || name != want {
			t.Fatalf("a new connection during node %d's snapshot (state %s) went to %q: %v", writes, state, name, err)
		}
		if donor {
			writesWhileDonor++
			// The programs' readiness holds the same rule as the balancer.
			if err := mysqldb.Check(ctx, node); err != nil {
				t.Fatalf("readiness of node %d while it donates: %v", writes, err)
			}
		}
	}
	donated := lastDonor.Sub(firstDonor)
	t.Logf("node %d seen donating for %v; every write went to it, %d of them while it donated", writes, donated.Round(time.Millisecond), writesWhileDonor)
	// The balancer marks a node down after two failed checks 2 s apart:
	// a shorter donation could not have been seen by it.
	if donated < 5*time.Second {
		t.Fatalf("node %d donated for %v: too short to test the balancer's check (2 s apart, 2 failures)", writes, donated)
	}
}

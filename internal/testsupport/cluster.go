package testsupport

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"

	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/redisconn"
)

// Cluster is a Redis Cluster of the test's own: three masters, each with
// a replica, which a test may kill, stop, fail over or cut off from the
// others (Partition). Each node has a loopback address of its own, from
// which its own connections leave too.
type Cluster struct {
	*Redis
	Nodes map[string]*exec.Cmd // by address
}

// MustPrivateCluster starts six cluster-enabled redis-servers with the
// node settings the stack's cluster has (deploy/local/redis-cluster-node.conf:
// AOF on, a node timeout of 2 s), makes them a cluster of
// three masters with a replica each, and waits until every node says
// cluster_state:ok and every replica is linked. They are killed when the
// test ends.
func MustPrivateCluster(tb testing.TB) *Cluster {
	tb.Helper()
	c := &Cluster{Nodes: map[string]*exec.Cmd{}}
	var addrs []string
	for range 6 {
		port := freeClusterPort(tb)
		node, cmd := mustRedisAt(tb, loopbackHost(), port, clusterNodeArgs(tb)...)
		c.Nodes[node.Addr] = cmd
		addrs = append(addrs, node.Addr)
	}
	create := exec.Command("redis-cli", append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "1", "--cluster-yes")...)
	if out, err := create.CombinedOutput(); err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	Wait(tb, 30*time.Second, "the private cluster is ok, every replica linked", func() bool {
		replicas := 0
		for _, a := range addrs {
			n := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
			info, err1 := n.ClusterInfo(context.Background()).Result()
			repl, err2 := n.Info(context.Background(), "replication").Result()
			n.Close()
			if err1 != nil || err2 != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
			if strings.Contains(repl, "role:slave") {
				if !strings.Contains(repl, "master_link_status:up") {
					return false
				}
				replicas++
			}
		}
		return replicas == 3
	})
	c.Redis = mustRedis(tb, redisconn.Config{Cluster: addrs})
	return c
}

// MasterOf is the address of the master that owns key's slot now.
func (c *Cluster) MasterOf(tb testing.TB, key string) string {
	tb.Helper()
	m, err := c.Client.(*redis.ClusterClient).MasterForKey(context.Background(), key)
	if err != nil {
		tb.Fatal(err)
	}
	return m.Options().Addr
}

// ReplicaOf is the address of the replica of master, as master reports it.
func (c *Cluster) ReplicaOf(tb testing.TB, master string) string {
	tb.Helper()
	n := redis.NewClient(&redis.Options{Addr: master})
	defer n.Close()
	info := n.Info(context.Background(), "replication").Val()
	for line := range strings.Lines(info) {
		// slave0:ip=127.0.0.1,port=21234,state=online,offset=...,lag=0
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "slave0:"); ok {
			var ip, port string
			for f := range strings.SplitSeq(rest, ",") {
				k, v, _ := strings.Cut(f, "=")
				switch k {
				case "ip":
					ip = v
				case "port":
					port = v
				}
			}
			return net.JoinHostPort(ip, port)
		}
	}
	tb.Fatalf("master %s reports no replica:\n%s", master, info)
	return ""
}

// freeClusterPort is a port free for a node and for its cluster bus (the
// port + 10000), both below the ephemeral range, handed out once per test
// process as FreeAddr's are.
func freeClusterPort(tb testing.TB) string {
	tb.Helper()
	for range 100 {
		p := 20000 + rand.IntN(2700)
		if free(p) && free(p+10000) && handOut(p, p+10000) {
			return strconv.Itoa(p)
		}
	}
	tb.Fatal("no free port pair for a cluster node")
	return ""
}

// Describe is one line per node: its address, role and slots, for a log.
func (c *Cluster) Describe(tb testing.TB) string {
	tb.Helper()
	var b strings.Builder
	for addr := range c.Nodes {
		n := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond})
		role, err := n.Do(context.Background(), "ROLE").Slice()
		n.Close()
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", addr, err)
			continue
		}
		fmt.Fprintf(&b, "%s: %v\n", addr, role[0])
	}
	return b.String()
}

// loopbackHost is a loopback address drawn at random (127.1.0.0/16 and
// up), so that the nodes of a cluster, and of clusters of other test
// processes, are told apart by address.
func loopbackHost() string {
	return fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(254), rand.IntN(256), 1+rand.IntN(254))
}

// Partition cuts master off from the other nodes of the cluster, its
// replica among them, in both directions (iptables drops their packets, as
// a network partition would), while clients on 127.0.0.1 still reach it.
// heal ends the partition; it runs at the test's end too.
func (c *Cluster) Partition(tb testing.TB, master string) (heal func()) {
	tb.Helper()
	mHost, mPort, err := net.SplitHostPort(master)
	if err != nil {
		tb.Fatal(err)
	}
	mBus := busPort(tb, mPort)
	var rules [][]string
	for addr := range c.Nodes {
		if addr == master {
			continue
		}
		host, port, _ := net.SplitHostPort(addr)
		// Its links to them, and theirs to it: bus and replication.
		rules = append(rules,
			[]string{"-s", mHost, "-d", host, "-p", "tcp", "--dport", busPort(tb, port)},
			[]string{"-s", host, "-d", mHost, "-p", "tcp", "--dport", mBus},
			[]string{"-s", host, "-d", mHost, "-p", "tcp", "--dport", mPort},
			[]string{"-s", mHost, "-d", host, "-p", "tcp", "--sport", mPort},
			[]string{"-s", mHost, "-d", host, "-p", "tcp", "--sport", mBus},
			[]string{"-s", host, "-d", mHost, "-p", "tcp", "--sport", busPort(tb, port)})
	}
	return drop(tb, "partition "+master, rules)
}

// CutClients cuts master off from the clients on 127.0.0.1 (the
// programs and the test's own), in both directions, until heal is called
// or the test ends; the cluster's nodes, each on an address of its own,
// still reach it, so the cluster fails nothing over.
func (c *Cluster) CutClients(tb testing.TB, master string) (heal func()) {
	tb.Helper()
	return CutOff(tb, master)
}

// CutOff drops every packet from 127.0.0.1 to addr's port and back (a
// server whose clients, and peers that use the same port, cannot reach it)
// until heal is called or the test ends. Its other ports still answer.
func CutOff(tb testing.TB, addr string) (heal func()) {
	tb.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		tb.Fatal(err)
	}
	return drop(tb, "cut off "+addr, [][]string{
		{"-s", "127.0.0.1", "-d", host, "-p", "tcp", "--dport", port},
		{"-s", host, "-d", "127.0.0.1", "-p", "tcp", "--sport", port},
	})
}

// drop drops the loopback packets that match rules (iptables, as root)
// until heal is called or the test ends.
func drop(tb testing.TB, what string, rules [][]string) (heal func()) {
	tb.Helper()
	iptables := func(op string, rule []string) error {
		out, err := exec.Command("iptables", append([]string{op, "INPUT", "-i", "lo"}, append(rule, "-j", "DROP")...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("iptables %s %v: %v: %s", op, rule, err, out)
		}
		return nil
	}
	var added [][]string
	var once sync.Once
	heal = func() {
		once.Do(func() {
			for _, r := range added {
				if err := iptables("-D", r); err != nil {
					tb.Errorf("heal (%s): %v", what, err)
				}
			}
		})
	}
	tb.Cleanup(heal)
	for _, r := range rules {
		if err := iptables("-I", r); err != nil {
			tb.Fatalf("%s: %v", what, err)
		}
		added = append(added, r)
	}
	return heal
}

// busPort is the cluster bus port of a node on port: port + 10000.
func busPort(tb testing.TB, port string) string {
	p, err := strconv.Atoi(port)
	if err != nil {
		tb.Fatal(err)
	}
	return strconv.Itoa(p + 10000)
}

// clusterNodeArgs are deploy/local/redis-cluster-node.conf's settings as
// redis-server's command-line arguments.
func clusterNodeArgs(tb testing.TB) []string {
	tb.Helper()
	// From the test's package directory up to the module's root.
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("the cluster nodes' settings: no go.mod above the test's directory")
		}
		dir = parent
	}
	path := filepath.Join(dir, "deploy", "local", "redis-cluster-node.conf")
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("the cluster nodes' settings: %v", err)
	}
	var args []string
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, _ := strings.Cut(line, " ")
		args = append(args, "--"+key, strings.TrimSpace(value))
	}
	if len(args) == 0 {
		tb.Fatalf("%s: no settings", path)
	}
	return args
}

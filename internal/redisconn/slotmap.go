package redisconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"
)

// slotMap loads a cluster client's slot map from every node at once and
// keeps, for each slot, the claim with the highest config epoch: the rule
// Redis Cluster itself resolves conflicting claims by.
//
// go-redis's own reload asks one node at a time, in random order, and
// takes the first answer: a frozen master asked first held the reload for
// its read timeout and its retries (seconds after the promotion, measured
// in TestAFrozenMastersSlotsAnswerSoonAfterItsPromotion), and a master cut
// off from the others, asked first, still names itself. Asked together,
// a node that does not answer costs the reload answerGrace, and a stale
// view loses to the promoted replica's.
type slotMap struct {
	seeds    []string
	password string
	loads    singleflight.Group

	mu sync.Mutex
	// nodes are the cluster client's own node clients by address, newest
	// last (see adopt): a query borrows their connections, and go-redis
	// closes them with the client.
	nodes map[string][]*redis.Client
	// asking holds the addresses whose last query is still unanswered: a
	// frozen node is not asked again until it answers or times out.
	asking map[string]bool
	// known is every address of the last map: the seeds only until one
	// was made, or when none of its nodes answers (a seed that died would
	// otherwise be dialled at every reload, for ever).
	known []string
	// loopback restores the host go-redis strips from a loopback address
	// it did not learn from a node (":7000" → "127.0.0.1:7000"): without
	// an origin it rewrites a loopback node address to the origin's empty
	// host (osscluster.go, replaceLoopbackHost).
	loopback map[string]string
}

const (
	// slotsWait bounds a reload: a node that has not answered by then is
	// left out of it.
	slotsWait = 300 * time.Millisecond
	// answerGrace is how long a reload waits for the rest once half the
	// nodes asked have answered: a live node answers in a millisecond.
	answerGrace = 20 * time.Millisecond
)

func newSlotMap(seeds []string, password string) *slotMap {
	return &slotMap{seeds: seeds, password: password, nodes: map[string][]*redis.Client{}, asking: map[string]bool{},
		known: seeds, loopback: map[string]string{}}
}

// newClient makes the cluster's node clients (ClusterOptions.NewClient),
// with the loopback host go-redis stripped put back.
func (m *slotMap) newClient(opt *redis.Options) *redis.Client {
	m.mu.Lock()
	if full, ok := m.loopback[opt.Addr]; ok {
		opt.Addr = full
	}
	m.mu.Unlock()
	return redis.NewClient(opt)
}

// adopt keeps a node client of the cluster's for the queries
// (ClusterClient.OnNewNode): called once go-redis has set the client up,
// not from newClient, where go-redis has yet to finish it. A MOVED reply
// names a node by its full address while the map's clients are keyed by
// go-redis's ":port": the redirected call gets a client of its own, with
// its pool, until go-redis collects it with the next map. So an address
// keeps every client it was given, and a query takes the newest one still
// open (clusterNodes): a client collected, the map's or a redirect's, is
// dropped when found closed, and the others stand in.
func (m *slotMap) adopt(c *redis.Client) {
	m.mu.Lock()
	defer m.mu.Unlock()
	clients := append(m.nodes[c.Options().Addr], c)
	m.nodes[c.Options().Addr] = clients[max(0, len(clients)-keptClients):]
}

// keptClients bounds the clients an address keeps: one from the map and
// one from a redirect are the usual pair; an address that comes and goes
// over many failovers must not keep every client it ever had.
const keptClients = 4

type nodesAnswer struct {
	addr  string
	nodes string
	err   error
}

// load is the cluster client's ClusterSlots. go-redis calls it at once
// from its lazy reload and from every ForEachMaster (readiness, the
// replication ids, the memory gauge): concurrent calls share one load,
// or the second would find every node being asked and make its map of
// the few left over.
func (m *slotMap) load(ctx context.Context) ([]redis.ClusterSlot, error) {
	slots, err, _ := m.loads.Do("", func() (any, error) { return m.loadOnce(context.WithoutCancel(ctx)) })
	if err != nil {
		return nil, err
	}
	return slots.([]redis.ClusterSlot), nil
}

func (m *slotMap) loadOnce(ctx context.Context) ([]redis.ClusterSlot, error) {
	ctx, cancel := context.WithTimeout(ctx, slotsWait)
	defer cancel()
	m.mu.Lock()
	var ask []string
	for _, addr := range m.known {
		if !m.asking[addr] {
			m.asking[addr] = true
			ask = append(ask, addr)
		}
	}
	m.mu.Unlock()
	if len(ask) == 0 {
		return nil, errors.New("redis cluster slot map: every node's last CLUSTER NODES is unanswered")
	}
	answers := make(chan nodesAnswer, len(ask))
	for _, addr := range ask {
		go func() {
			nodes, err := m.clusterNodes(ctx, addr)
			m.mu.Lock()
			delete(m.asking, addr)
			m.mu.Unlock()
			answers <- nodesAnswer{addr, nodes, err}
		}()
	}
	var views []nodesAnswer
	var errs []error
	var grace <-chan time.Time
collect:
	for range ask {
		select {
		case a := <-answers:
			if a.err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", a.addr, a.err))
				continue
			}
			views = append(views, a)
			if grace == nil && 2*len(views) >= len(ask) {
				grace = time.After(answerGrace)
			}
		case <-grace:
			break collect
		case <-ctx.Done():
			break collect
		}
	}
	if len(views) == 0 {
		m.mu.Lock()
		for _, seed := range m.seeds {
			if !slices.Contains(m.known, seed) {
				m.known = append(m.known, seed)
			}
		}
		m.mu.Unlock()
		return nil, fmt.Errorf("redis cluster slot map: no node answered CLUSTER NODES: %w", errors.Join(errs...))
	}
	slots, err := mergeViews(views)
	if err != nil {
		return nil, err
	}
	m.remember(slots)
	return slots, nil
}

// clusterNodes asks addr for CLUSTER NODES through the cluster's own
// client of addr, or a client of the moment for an address the cluster
// has none of (a seed, at the first load).
func (m *slotMap) clusterNodes(ctx context.Context, addr string) (string, error) {
	for {
		m.mu.Lock()
		clients := m.nodes[addr]
		var c *redis.Client
		if len(clients) > 0 {
			c = clients[len(clients)-1]
		}
		m.mu.Unlock()
		if c == nil {
			break
		}
		nodes, err := c.ClusterNodes(ctx).Result()
		if !errors.Is(err, redis.ErrClosed) {
			return nodes, err
		}
		m.mu.Lock()
		m.nodes[addr] = slices.DeleteFunc(m.nodes[addr], func(x *redis.Client) bool { return x == c })
		if len(m.nodes[addr]) == 0 {
			delete(m.nodes, addr)
		}
		m.mu.Unlock()
	}
	c := redis.NewClient(&redis.Options{Addr: addr, Password: m.password, DialTimeout: slotsWait, ReadTimeout: slotsWait,
		WriteTimeout: slotsWait, MaxRetries: -1, DialerRetries: 1, PoolSize: 1})
	defer c.Close()
	return c.ClusterNodes(ctx).Result()
}

// remember keeps the map's addresses to ask next time, and the loopback
// hosts go-redis strips from them.
func (m *slotMap) remember(slots []redis.ClusterSlot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var known []string
	for _, s := range slots {
		for _, n := range s.Nodes {
			if !slices.Contains(known, n.Addr) {
				known = append(known, n.Addr)
			}
			if host, port, err := net.SplitHostPort(n.Addr); err == nil {
				if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
					m.loopback[net.JoinHostPort("", port)] = n.Addr
				}
			}
		}
	}
	m.known = known
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, master string
	flags            []string
	epoch            int64
	slots            [][2]int
}

func (n clusterNode) is(flag string) bool { return slices.Contains(n.flags, flag) }

// parseClusterNodes reads CLUSTER NODES' text as asked of addr (a node
// that does not know its own address yet shows it without a host).
func parseClusterNodes(addr, text string) ([]clusterNode, error) {
	var nodes []clusterNode
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES of %s: short line %q", addr, strings.TrimSpace(line))
		}
		epoch, err := strconv.ParseInt(f[6], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("CLUSTER NODES of %s: config epoch %q: %w", addr, f[6], err)
		}
		n := clusterNode{id: f[0], addr: f[1], flags: strings.Split(f[2], ","), master: f[3], epoch: epoch}
		if i := strings.IndexAny(n.addr, "@,"); i >= 0 {
			n.addr = n.addr[:i]
		}
		if strings.HasPrefix(n.addr, ":") && n.is("myself") {
			host, _, _ := net.SplitHostPort(addr)
			n.addr = host + n.addr
		}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") {
				continue // a slot migrating or importing: its owner is the range's
			}
			lo, hi, isRange := strings.Cut(s, "-")
			if !isRange {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil || a < 0 || b >= Slots || a > b {
				return nil, fmt.Errorf("CLUSTER NODES of %s: slot range %q", addr, s)
			}
			n.slots = append(n.slots, [2]int{a, b})
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// mergeViews gives each slot to the master whose claim on it has the
// highest config epoch in any view, with the replicas any view lists for
// that master, as go-redis's ClusterSlots wants them.
func mergeViews(views []nodesAnswer) ([]redis.ClusterSlot, error) {
	type claim struct {
		epoch  int64
		master clusterNode
	}
	var owner [Slots]*claim
	replicas := map[string][]redis.ClusterNode{}
	for _, v := range views {
		nodes, err := parseClusterNodes(v.addr, v.nodes)
		if err != nil {
			return nil, err
		}
		for _, n := range nodes {
			switch {
			case n.is("noaddr") || strings.HasPrefix(n.addr, ":"):
			case n.is("slave") && !n.is("fail"):
				if !slices.ContainsFunc(replicas[n.master], func(r redis.ClusterNode) bool { return r.ID == n.id }) {
					replicas[n.master] = append(replicas[n.master], redis.ClusterNode{ID: n.id, Addr: n.addr})
				}
			case n.is("master"):
				c := &claim{n.epoch, n}
				for _, r := range n.slots {
					for s := r[0]; s <= r[1]; s++ {
						if owner[s] == nil || c.epoch > owner[s].epoch {
							owner[s] = c
						}
					}
				}
			}
		}
	}
	var slots []redis.ClusterSlot
	for s := 0; s < Slots; {
		c := owner[s]
		e := s
		for e+1 < Slots && owner[e+1] == c {
			e++
		}
		if c != nil {
			members := append([]redis.ClusterNode{{ID: c.master.id, Addr: c.master.addr}}, replicas[c.master.id]...)
			slots = append(slots, redis.ClusterSlot{Start: s, End: e, Nodes: members})
		}
		s = e + 1
	}
	if len(slots) == 0 {
		return nil, errors.New("redis cluster slot map: no node names a master with slots")
	}
	return slots, nil
}

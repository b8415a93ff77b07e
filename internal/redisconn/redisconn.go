// Package redisconn opens the programs' Redis — one node or a Redis
// Cluster — as one redis.UniversalClient, and holds the few operations
// whose meaning depends on the topology: visiting every master (key scans,
// replication ids). Everything else is topology-blind: every script and
// multi-key command keeps its keys under one hash tag, so it runs the same
// on one node and on the master that owns the tag's slot.
package redisconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"github.com/sigurn/crc16"

	"github.com/seckill/seckill/internal/telemetry"
)

// Config names one topology: a node's address, or a cluster's seeds.
type Config struct {
	Addr     string   // one node (SECKILL_REDIS_ADDR)
	Cluster  []string // a cluster's seed addresses (SECKILL_REDIS_CLUSTER)
	Password string
	DB       int // one node only: a cluster has database 0 alone
}

// Every call is bounded; go-redis redials by itself after a node restarts.
const (
	// dialTimeout 500 ms: a node that takes longer to accept a connection
	// is in trouble (a frozen master's backlog fills, and its dials wait),
	// and every try of a command against it would wait this long.
	dialTimeout = 500 * time.Millisecond
	ioTimeout   = time.Second
	poolTimeout = 2 * time.Second
	maxRetries  = 2
	// dialRetries 1: a refused dial fails the command at once. go-redis's
	// default, 5 dials 100 ms apart, holds every command for a dead
	// cluster master half a second per try before MaxRetries starts over;
	// the retry that matters is the command's, after the slot map moved.
	dialRetries = 1
	// stateReload bounds how stale the cluster client's slot map gets: the
	// client reloads it (one CLUSTER SLOTS) when a command finds it older
	// than this. go-redis's default is 60 s (redis/go-redis#3979): a
	// failover Redis finishes in about 3 s would leave the promoted
	// replica's slots unserved for up to a minute, the client dialling the
	// dead master. A MOVED reply reloads at once; a dead or frozen master
	// answers nothing, so this interval is what follows a failover: half a
	// second after the promotion, at most a second with the reload.
	stateReload = 500 * time.Millisecond
	// checkTimeout bounds the start-up checks of a cluster's seeds.
	checkTimeout = 3 * time.Second
)

// Validate tells a configuration that names no topology, or both.
func (c Config) Validate() error {
	switch {
	case c.Addr != "" && len(c.Cluster) > 0:
		return errors.New("SECKILL_REDIS_ADDR and SECKILL_REDIS_CLUSTER are both set: name one topology (a node's address, or a cluster's seeds)")
	case c.Addr == "" && len(c.Cluster) == 0:
		return errors.New("no Redis: set SECKILL_REDIS_ADDR (one node) or SECKILL_REDIS_CLUSTER (a cluster's seeds)")
	case len(c.Cluster) > 0 && c.DB != 0:
		return errors.New("SECKILL_REDIS_DB is not 0: a Redis Cluster has database 0 only")
	}
	return nil
}

// New is the client of c's topology, not yet checked (see Open).
//
// While tracing is on (telemetry.Enabled) its commands are spans (trace):
// from its creation, since on a cluster redisotel hooks only the node
// clients made after it.
func New(c Config) (redis.UniversalClient, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var rdb redis.UniversalClient
	if len(c.Cluster) > 0 {
		slots := newSlotMap(c.Cluster, c.Password)
		rdb = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: c.Cluster, Password: c.Password,
			DialTimeout: dialTimeout, ReadTimeout: ioTimeout, WriteTimeout: ioTimeout, PoolTimeout: poolTimeout,
			MaxRetries: maxRetries, DialerRetries: dialRetries, ClusterStateReloadInterval: stateReload,
			ClusterSlots: slots.load, NewClient: slots.newClient,
		})
		rdb.(*redis.ClusterClient).OnNewNode(slots.adopt)
	} else {
		rdb = redis.NewClient(&redis.Options{
			Addr: c.Addr, Password: c.Password, DB: c.DB,
			DialTimeout: dialTimeout, ReadTimeout: ioTimeout, WriteTimeout: ioTimeout, PoolTimeout: poolTimeout,
			MaxRetries: maxRetries, DialerRetries: dialRetries,
		})
	}
	if telemetry.Enabled() {
		if err := trace(rdb); err != nil {
			_ = rdb.Close()
			return nil, err
		}
	}
	return rdb, nil
}

// Open is New, checked. A cluster is refused at start only for what
// waiting cannot mend: a seed that is no cluster node (the configuration
// names the wrong topology), a seed that refuses the password, or seeds
// that all answer with no slot assigned (no cluster was ever created on
// them). Anything passing —
// seeds that do not answer, a node that says cluster_state:fail while it
// rejoins after a partition, a cluster failing over — is returned in
// warnings: the program starts, its readiness check (Serving) says when
// the cluster serves, and its clients retry meanwhile. A daemon that exits
// on one node's passing state leaves accepted orders waiting for a person
// to start it again. One node is not checked: the program starts and waits
// for it, as its readiness check tells.
func Open(ctx context.Context, c Config) (rdb redis.UniversalClient, warnings []string, err error) {
	rdb, err = New(c)
	if err != nil {
		return nil, nil, err
	}
	if len(c.Cluster) == 0 {
		return rdb, nil, nil
	}
	if warnings, err = checkSeeds(ctx, c); err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	return rdb, warnings, nil
}

func checkSeeds(ctx context.Context, c Config) (warnings []string, err error) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	answered, ok, empty := 0, 0, 0
	for _, addr := range c.Cluster {
		node := redis.NewClient(&redis.Options{Addr: addr, Password: c.Password, DialTimeout: time.Second,
			ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: -1})
		info, err := node.ClusterInfo(ctx).Result()
		_ = node.Close()
		switch {
		case err != nil && strings.Contains(err.Error(), "cluster support disabled"):
			return nil, fmt.Errorf("SECKILL_REDIS_CLUSTER: %s is not a cluster node (cluster-enabled no): set SECKILL_REDIS_ADDR for one node", addr)
		case err != nil && (strings.Contains(err.Error(), "WRONGPASS") || strings.Contains(err.Error(), "NOAUTH") || strings.Contains(err.Error(), "AUTH")):
			// The password is wrong, or one is missing: no wait mends it.
			return nil, fmt.Errorf("SECKILL_REDIS_CLUSTER: seed %s refuses the password (SECKILL_REDIS_PASSWORD): %w", addr, err)
		case err != nil:
			warnings = append(warnings, fmt.Sprintf("SECKILL_REDIS_CLUSTER: seed %s does not answer: %v", addr, err))
			continue
		}
		answered++
		switch {
		case InfoField(info, "cluster_state") == "ok":
			ok++
		case InfoField(info, "cluster_slots_assigned") == "0":
			empty++
			warnings = append(warnings, fmt.Sprintf("SECKILL_REDIS_CLUSTER: seed %s has no slot assigned", addr))
		default:
			warnings = append(warnings, fmt.Sprintf("SECKILL_REDIS_CLUSTER: seed %s says cluster_state:%s (slots assigned %s, ok %s, failing %s)",
				addr, InfoField(info, "cluster_state"), InfoField(info, "cluster_slots_assigned"), InfoField(info, "cluster_slots_ok"), InfoField(info, "cluster_slots_fail")))
		}
	}
	switch {
	case answered > 0 && empty == answered:
		return nil, fmt.Errorf("SECKILL_REDIS_CLUSTER: no seed has a slot assigned (%s): create the cluster (redis-cli --cluster create) or name its nodes", strings.Join(c.Cluster, ", "))
	case ok == 0:
		warnings = append(warnings, "SECKILL_REDIS_CLUSTER: no seed says the cluster serves yet: starting, not ready until it does")
	}
	return warnings, nil
}

// Serving reports whether rdb's Redis serves: the node answers; on a
// cluster, a majority of the masters in the client's slot map say
// cluster_state:ok. One node's view is not the cluster's: a master that
// rejoins after a partition says fail for a moment while the others serve,
// and a master failing over answers nothing while the others serve.
func Serving(ctx context.Context, rdb redis.UniversalClient) error {
	c, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return rdb.Ping(ctx).Err()
	}
	var mu sync.Mutex
	var masters, serving int
	var said []string
	// ForEachMaster stops at the first error: each master's answer is
	// counted, not returned.
	_ = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		info, err := m.ClusterInfo(ctx).Result()
		mu.Lock()
		defer mu.Unlock()
		masters++
		switch {
		case err != nil:
			said = append(said, m.Options().Addr+": "+err.Error())
		case InfoField(info, "cluster_state") == "ok":
			serving++
		default:
			said = append(said, m.Options().Addr+": cluster_state:"+InfoField(info, "cluster_state"))
		}
		return nil
	})
	if masters == 0 || 2*serving <= masters {
		return fmt.Errorf("the cluster is not serving: %d of %d masters say cluster_state:ok (%s)", serving, masters, strings.Join(said, "; "))
	}
	return nil
}

// CheckNode refuses, at start, a node address that is a cluster node: one
// node's client cannot follow the cluster's MOVED replies. A node that
// does not answer is not refused here (see Open).
func CheckNode(ctx context.Context, rdb redis.UniversalClient) error {
	node, ok := rdb.(*redis.Client)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	info, err := node.Info(ctx, "cluster").Result()
	if err != nil {
		return nil
	}
	if InfoField(info, "cluster_enabled") == "1" {
		return fmt.Errorf("SECKILL_REDIS_ADDR: %s is a Redis Cluster node: set SECKILL_REDIS_CLUSTER to the cluster's seeds instead", node.Options().Addr)
	}
	return nil
}

// Slots is Redis Cluster's slot count.
const Slots = 16384

var crcTable = crc16.MakeTable(crc16.CRC16_XMODEM)

// Unreachable is a command that failed for want of a Redis to take it — no
// connection, a timeout, a master failing over (CLUSTERDOWN, TRYAGAIN,
// MASTERDOWN), a node loading its data or demoted under the client
// (LOADING, READONLY) — not because of what it asked: it can work a
// moment later, once the cluster has a master for the key again.
func Unreachable(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrMoved) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		redis.IsClusterDownError(err) || redis.IsTryAgainError(err) || redis.IsMasterDownError(err) ||
		redis.IsLoadingError(err) || redis.IsReadOnlyError(err)
}

// OutOfMemory is a write Redis refused at its memory limit (OOM): with
// nothing left its policy may evict, it takes no write until memory is
// freed; nothing of the refused command or script was written.
func OutOfMemory(err error) bool { return redis.HasErrorPrefix(err, "OOM") }

// TxError is the error of a MULTI/EXEC: when EXEC answered EXECABORT,
// the error Redis gave a queued command (OOM at its memory limit), which
// says why; any other error as it is.
func TxError(err error, cmds []redis.Cmder) error {
	if !redis.HasErrorPrefix(err, "EXECABORT") {
		return err
	}
	for _, c := range cmds {
		if cerr := c.Err(); cerr != nil && !redis.HasErrorPrefix(cerr, "EXECABORT") {
			return cerr
		}
	}
	return err
}

// KeySlot is the cluster slot of a hash tag's content, as Redis computes
// it (CRC16/XMODEM mod 16384).
func KeySlot(tag string) int {
	return int(crc16.Checksum([]byte(tag), crcTable)) % Slots
}

// TagIn is the first of prefix.0, prefix.1, … whose slot is in the i-th of
// n equal slot ranges: redis-cli --cluster create deals slots to its
// masters in equal contiguous ranges, so the tags of i = 0..n-1 land on n
// different masters of a cluster of n. A resharding moves slots, not
// tags: they may then share a master, which costs their spread only.
func TagIn(prefix string, i, n int) string {
	lo, hi := i*Slots/n, (i+1)*Slots/n
	for salt := 0; ; salt++ {
		tag := prefix + "." + strconv.Itoa(salt)
		if s := KeySlot(tag); s >= lo && s < hi {
			return tag
		}
	}
}

// InfoField is the value of name in an INFO-style "name:value" text, ""
// when it has none.
func InfoField(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// ErrMoved is a call abandoned because its slot's master changed while
// it waited: a frozen master's replica was promoted, and the call still
// sits in the frozen master's pipeline. Its outcome is unknown (the frozen
// master may run it when it wakes, before it learns it was demoted, and
// then lose it to its replica's history); a call sent now reaches the new
// master.
var ErrMoved = errors.New("redis: the key's slot moved to another master while the call waited for a reply")

// stallCheck is how often a call waiting on an autopipeliner looks whether
// its slot's master changed: the promotion is followed this much later at
// most, after the client has learnt it (stateReload). Only a call waiting
// for stalledAfter is abandoned: while a failover is under way the
// client's slot map may briefly lack the failed master's slots, and
// go-redis then names a random node as their master (slotMasterNode),
// which abandoned calls that healthy masters were about to answer
// (TestAMasterKilledFailsNoCallOnTheOthers); a master answers in
// milliseconds.
const (
	stallCheck   = 100 * time.Millisecond
	stalledAfter = 300 * time.Millisecond
)

// abandoned tells a wait's end (the caller's context, ErrMoved), after
// which the command is still in flight and must not be read, from its
// reply.
func abandoned(ctx context.Context, err error) bool {
	return err != nil && (errors.Is(err, ErrMoved) || err == ctx.Err())
}

// Pipeliner is the client's asynchronous autopipeliner: concurrent calls
// share one write and one read. On a cluster it is go-redis's full-duplex
// one, which keeps a pipeline of its own to each master and sends each
// command down the pipeline of the master that owns its slot when it is
// sent (following MOVED and ASK through the cluster client). A master
// frozen past the node timeout so holds only the calls for its own slots:
// the half-duplex cluster autopipeliner, which sent each batch to every
// master it touched and answered it when all had, held every call of the
// api, the sales of the healthy masters included, until the failover
// ended (5.2 s measured, TestChaosClusterMasterFrozen).
//
// go-redis waits for an autopipelined reply whatever the call's context
// says, and the frozen master's pipeline retries its connection until it
// wakes: its calls waited out the whole freeze, the promotion seconds
// before notwithstanding (TestAFrozenMastersSlotsAnswerSoonAfterItsPromotion).
// Every wait here therefore ends with the reply, the caller's context, or
// the client learning that the slot has another master (ErrMoved).
type Pipeliner struct {
	ap      *redis.AutoPipeliner
	cluster *redis.ClusterClient // nil on one node: its slots never move
	scripts redis.Scripter       // SCRIPT EXISTS and LOAD: not sent through ap
}

// AutoPipeliner is the autopipeliner of rdb (closed with it).
func AutoPipeliner(rdb redis.UniversalClient) (*Pipeliner, error) {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		opts := redis.DefaultAutoPipelineOptions()
		opts.FullDuplex = true
		ap, err := c.AsyncAutoPipelineWithOptions(opts)
		if err != nil {
			return nil, err
		}
		return &Pipeliner{ap: ap, cluster: c, scripts: c}, nil
	case *redis.Client:
		ap, err := c.AsyncAutoPipeline()
		if err != nil {
			return nil, err
		}
		return &Pipeliner{ap: ap, scripts: c}, nil
	default:
		return nil, fmt.Errorf("redisconn: %T is neither a node's nor a cluster's client", rdb)
	}
}

// Do sends cmds, every one on key's slot, and waits for their replies: the
// first error among them, or why the wait ended first (the context's
// error, ErrMoved), and then the commands must not be read.
func (p *Pipeliner) Do(ctx context.Context, key string, cmds ...redis.Cmder) error {
	// Before the send: the master the client routes it to (by address: a
	// node dropped from the map and met again is a new client).
	var sentTo string
	if p.cluster != nil {
		if m, err := p.cluster.MasterForKey(ctx, key); err == nil {
			sentTo = m.Options().Addr
		}
	}
	futures := make([]redis.AutoFuture, len(cmds))
	for i, cmd := range cmds {
		futures[i] = p.ap.Submit(ctx, cmd)
	}
	var first error
	for _, f := range futures {
		err := p.await(ctx, f, key, sentTo)
		if abandoned(ctx, err) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}

func (p *Pipeliner) await(ctx context.Context, f redis.AutoFuture, key, sentTo string) error {
	if p.cluster == nil {
		return f.WaitContext(ctx)
	}
	sent := time.Now()
	for {
		wait, cancel := context.WithTimeout(ctx, stallCheck)
		err := f.WaitContext(wait)
		ended := err != nil && err == wait.Err()
		cancel()
		if !ended {
			return err // the reply
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Since(sent) < stalledAfter {
			continue
		}
		now, err := p.cluster.MasterForKey(ctx, key)
		switch {
		case err != nil:
		case sentTo == "":
			// The slot map had no master for the key at the send.
			sentTo = now.Options().Addr
		case now.Options().Addr != sentTo:
			return fmt.Errorf("%w (%s, then %s)", ErrMoved, sentTo, now.Options().Addr)
		}
	}
}

// Eval, EvalSha and their read-only forms make the pipeliner a
// redis.Scripter: redis.Script.Run sends through it, each reply already
// waited for (or the wait's end, on a command of its own).
func (p *Pipeliner) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return p.script(ctx, "eval", script, keys, args)
}

func (p *Pipeliner) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return p.script(ctx, "evalsha", sha1, keys, args)
}

func (p *Pipeliner) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return p.script(ctx, "eval_ro", script, keys, args)
}

func (p *Pipeliner) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return p.script(ctx, "evalsha_ro", sha1, keys, args)
}

func (p *Pipeliner) ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd {
	return p.scripts.ScriptExists(ctx, hashes...)
}

func (p *Pipeliner) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	return p.scripts.ScriptLoad(ctx, script)
}

func (p *Pipeliner) script(ctx context.Context, name, script string, keys []string, args []any) *redis.Cmd {
	cmdArgs := make([]any, 0, 3+len(keys)+len(args))
	cmdArgs = append(cmdArgs, name, script, len(keys))
	for _, k := range keys {
		cmdArgs = append(cmdArgs, k)
	}
	cmdArgs = append(cmdArgs, args...)
	cmd := redis.NewCmd(ctx, cmdArgs...)
	key := ""
	if len(keys) > 0 {
		key = keys[0]
	}
	if err := p.Do(ctx, key, cmd); abandoned(ctx, err) {
		// The abandoned command is still in flight: reading it would race
		// its batch.
		ended := redis.NewCmd(ctx, cmdArgs...)
		ended.SetErr(err)
		return ended
	}
	return cmd
}

// MasterFor is the address of the master that holds key: the node
// itself, or the cluster master that owns key's slot now.
func MasterFor(ctx context.Context, rdb redis.UniversalClient, key string) (string, error) {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		m, err := c.MasterForKey(ctx, key)
		if err != nil {
			return "", fmt.Errorf("master of %s: %w", key, err)
		}
		return m.Options().Addr, nil
	case *redis.Client:
		return c.Options().Addr, nil
	default:
		return "", fmt.Errorf("redisconn: %T is neither a node's nor a cluster's client", rdb)
	}
}

// EachMaster runs fn on every master: the node itself, or each master of
// the cluster (concurrently). Scans and replication ids are per master.
func EachMaster(ctx context.Context, rdb redis.UniversalClient, fn func(ctx context.Context, master *redis.Client) error) error {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	case *redis.Client:
		return fn(ctx, c)
	default:
		return fmt.Errorf("redisconn: %T is neither a node's nor a cluster's client", rdb)
	}
}

// Scan calls fn with every key that matches pattern, on every master.
func Scan(ctx context.Context, rdb redis.UniversalClient, pattern string, fn func(ctx context.Context, key string) error) error {
	return EachMaster(ctx, rdb, func(ctx context.Context, master *redis.Client) error {
		iter := master.Scan(ctx, 0, pattern, 500).Iterator()
		for iter.Next(ctx) {
			if err := fn(ctx, iter.Val()); err != nil {
				return err
			}
		}
		return iter.Err()
	})
}

// ReplicationID is the master_replid of node. Redis draws a new one
// whenever its data may have moved under it: a restart, a replica
// promoted by a failover.
func ReplicationID(ctx context.Context, node *redis.Client) (string, error) {
	info, err := node.Info(ctx, "replication").Result()
	if err != nil {
		return "", fmt.Errorf("redis replication id of %s: %w", node.Options().Addr, err)
	}
	if id := InfoField(info, "master_replid"); id != "" {
		return id, nil
	}
	return "", fmt.Errorf("redis replication id of %s: INFO replication has no master_replid", node.Options().Addr)
}

// ReplicationIDs are the master_replid of every master that answers
// before ctx ends, by address. The masters are read at once and a slow
// one is not waited for past ctx: go-redis's ForEachMaster waits for all,
// and a frozen master's INFO holds for the client's timeouts and retries
// (about 3 s), so the promoted replica's new id, the one that matters,
// was read only once the frozen master's read gave up. A master that did
// not answer is in the error.
func ReplicationIDs(ctx context.Context, rdb redis.UniversalClient) (map[string]string, error) {
	var (
		mu      sync.Mutex
		ids     = map[string]string{}
		errs    []error
		pending sync.WaitGroup
		over    bool // past ctx: the stragglers' answers are not taken
	)
	err := EachMaster(ctx, rdb, func(ctx context.Context, master *redis.Client) error {
		pending.Go(func() {
			id, err := ReplicationID(ctx, master)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case over:
			case err != nil:
				errs = append(errs, err)
			default:
				ids[master.Options().Addr] = id
			}
		})
		return nil
	})
	answered := make(chan struct{})
	go func() {
		pending.Wait()
		close(answered)
	}()
	select {
	case <-answered:
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	over = true
	select {
	case <-answered:
	default:
		errs = append(errs, fmt.Errorf("redis replication ids: a master did not answer: %w", ctx.Err()))
	}
	return ids, errors.Join(append(errs, err)...)
}

// trace makes each command of rdb a span of the traced operation that
// sends it (redisotel; on a cluster, on every node the client meets). The
// spans carry no command text: login codes and session tokens are among
// the arguments. A new connection's handshake is no span: its CLIENT
// SETINFO, which servers before 7.2 refuse and go-redis ignores, would
// mark the request's trace failed. Nor is a pipeline: redisotel names a
// pipeline's span from its commands before it asks whether anyone traces
// it, and on an auto-pipeliner's batch each command's error is read
// through runtime.Stack (go-redis's goroutine id check): profiled at 1 %
// sampling, that was most of the api's tracing cost, for batches that
// belong to no request.
func trace(rdb redis.UniversalClient) error {
	err := redisotel.InstrumentTracing(rdb, redisotel.WithTracerProvider(telemetry.ChildrenOnly()),
		redisotel.WithDBStatement(false), redisotel.WithCallerEnabled(false), redisotel.WithCommandFilter(handshake),
		redisotel.WithCommandsFilter(func([]redis.Cmder) bool { return true }))
	if err != nil {
		return fmt.Errorf("redis tracing: %w", err)
	}
	return nil
}

// handshake reports whether cmd is one a connection sends when it opens.
func handshake(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello", "client", "auth", "select":
		return true
	}
	return false
}

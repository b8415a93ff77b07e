package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// Durability follows, from the cluster's metadata, which partitions of a
// topic can take a write that every in-sync replica acknowledges with at
// least min.insync.replicas of them in sync: the writes an accepted order
// needs. The API asks it before the gate takes a unit, so that with two of
// three brokers down a buyer is told to come back (nothing taken) instead
// of being given an order that Kafka refuses and the relay must carry.
//
// The metadata lags a crash: a dead broker stays leader and in sync until
// the controller fences it (broker.session.timeout.ms), and for good when
// the controllers' quorum died with it. So every broker the metadata names
// as a leader or in-sync replica is asked for its API versions, and counts
// only if it answers. A publish that fails anyway (in flight when a broker
// died) makes its partition suspect: refused until the metadata shows that
// partition changed (a new leader, another ISR), or for SuspectFor at most.
type Durability struct {
	client   *kafka.Client
	dialer   *kafka.Dialer
	brokers  []string
	topic    string
	interval time.Duration
	logger   *slog.Logger

	// SuspectFor bounds how long a failed publish refuses its partition
	// when the metadata does not move.
	SuspectFor time.Duration
	// Now is the clock SuspectFor runs on; nil: time.Now.
	Now func() time.Time

	// Only Refresh's goroutine: min.insync.replicas as last read, when,
	// and a connection to each broker kept between refreshes (a dial per
	// broker per refresh cost every broker a connection set up and torn
	// down twice a second, per api).
	lastMinISR int
	minISRAt   time.Time
	connMu     sync.Mutex
	conns      map[string]*kafka.Conn

	mu         sync.RWMutex
	partitions []partitionState // by partition id; nil until the first answer
	suspect    map[int]suspicion
	lastErr    error
}

type partitionState struct {
	leader   int
	isr      []int
	writable bool
}

type suspicion struct {
	until time.Time
	seen  partitionState // when it failed
}

// probeTimeout bounds one connection to a broker: a frozen one (SIGSTOP,
// a full disk's stall) accepts TCP and answers nothing.
const probeTimeout = 500 * time.Millisecond

// NewDurability watches topic on brokers every interval.
func NewDurability(brokers []string, topic string, interval time.Duration, logger *slog.Logger) *Durability {
	return &Durability{
		client: &kafka.Client{Addr: kafka.TCP(brokers...)}, dialer: &kafka.Dialer{Timeout: probeTimeout},
		brokers: brokers, topic: topic, interval: interval, logger: logger,
		SuspectFor: 3 * time.Second, suspect: map[int]suspicion{}, conns: map[string]*kafka.Conn{},
	}
}

// Run refreshes the view every interval until ctx ends.
func (d *Durability) Run(ctx context.Context) error {
	t := time.NewTicker(d.interval)
	defer t.Stop()
	defer d.closeConns()
	for {
		d.Refresh(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Refresh reads the topic's metadata and min.insync.replicas once. A
// cluster that does not answer makes every partition unwritable: an order
// could not be made durable either.
func (d *Durability) Refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(d.interval, time.Second))
	defer cancel()
	parts, err := d.read(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	before := d.unwritable()
	if err != nil {
		if d.lastErr == nil {
			d.logger.Warn("kafka durability unknown: refusing orders until the cluster answers", "topic", d.topic, "err", err)
		}
		d.lastErr, d.partitions = err, nil
		return
	}
	d.lastErr, d.partitions = nil, parts
	for p, s := range d.suspect {
		if p >= len(parts) || d.now().After(s.until) || !slices.Equal(parts[p].isr, s.seen.isr) || parts[p].leader != s.seen.leader {
			delete(d.suspect, p)
		}
	}
	if after := d.unwritable(); !slices.Equal(before, after) {
		d.logger.Warn("kafka partitions that cannot take a durable write changed", "topic", d.topic, "unwritable", after)
	}
}

func (d *Durability) read(ctx context.Context) ([]partitionState, error) {
	minISR, err := d.minInSync(ctx)
	if err != nil {
		return nil, err
	}
	// On a connection of its own: kafka.Client answers metadata from a
	// cache refreshed every few seconds.
	parts, err := d.readPartitions(ctx)
	if err != nil {
		return nil, err
	}
	alive := d.answering(ctx, parts)
	out := make([]partitionState, len(parts))
	for _, p := range parts {
		if p.ID < 0 || p.ID >= len(out) {
			return nil, fmt.Errorf("metadata of %s: partition %d of %d", d.topic, p.ID, len(out))
		}
		s := partitionState{leader: -1}
		if p.Leader.Host != "" {
			s.leader = p.Leader.ID
		}
		inSync := 0
		for _, b := range p.Isr {
			s.isr = append(s.isr, b.ID)
			if alive[b.ID] {
				inSync++
			}
		}
		slices.Sort(s.isr)
		// Kafka caps min.insync.replicas at the replication factor
		// (Partition.effectiveMinIsr): a topic of one replica and a
		// minimum of two still takes writes. An in-sync replica counts
		// only if it answers now: while the controller has not fenced a
		// dead broker yet, or cannot (two of three combined nodes down
		// lose the quorum, and the metadata stays as it was), the ISR
		// still names it.
		s.writable = s.leader >= 0 && alive[s.leader] && inSync >= min(minISR, len(p.Replicas))
		out[p.ID] = s
	}
	return out, nil
}

// minInSyncEvery is how often min.insync.replicas is read again: an
// operator's change of it is rare, and until it is read the probe judges
// by the old value (a publish the brokers refuse then suspends its
// partition, and its order goes to the relay, as any failed publish's).
const minInSyncEvery = 10 * time.Second

// minInSync is the topic's min.insync.replicas. kafka.Client may send the
// request to a broker that died and is not fenced yet: the last value
// read stands in until the cluster answers again.
func (d *Durability) minInSync(ctx context.Context) (int, error) {
	if d.lastMinISR > 0 && d.now().Sub(d.minISRAt) < minInSyncEvery {
		return d.lastMinISR, nil
	}
	cfg, err := d.client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: d.topic, ConfigNames: []string{"min.insync.replicas"},
	}}})
	if err == nil && len(cfg.Resources) == 1 && cfg.Resources[0].Error != nil {
		err = cfg.Resources[0].Error
	}
	if err != nil {
		if d.lastMinISR > 0 {
			return d.lastMinISR, nil
		}
		return 0, fmt.Errorf("describe %s: %w", d.topic, err)
	}
	minISR := 1
	for _, r := range cfg.Resources {
		for _, e := range r.ConfigEntries {
			if n, err := strconv.Atoi(e.ConfigValue); err == nil && e.ConfigName == "min.insync.replicas" {
				minISR = n
			}
		}
	}
	d.lastMinISR, d.minISRAt = minISR, d.now()
	return minISR, nil
}

// readPartitions reads the topic's partitions from the first seed that
// answers.
func (d *Durability) readPartitions(ctx context.Context) ([]kafka.Partition, error) {
	var errs []error
	for _, addr := range d.brokers {
		var parts []kafka.Partition
		err := d.ask(ctx, addr, func(conn *kafka.Conn) (err error) {
			parts, err = conn.ReadPartitions(d.topic)
			return err
		})
		if err == nil {
			return parts, nil
		}
		errs = append(errs, fmt.Errorf("metadata of %s from %s: %w", d.topic, addr, err))
	}
	return nil, fmt.Errorf("no broker of %v answers: %w", d.brokers, errors.Join(errs...))
}

// ask runs call on the connection kept to addr, with ctx's deadline. A
// call that fails closes it; if it was kept from an earlier refresh (the
// broker may have restarted since), call runs once more on a new one.
func (d *Durability) ask(ctx context.Context, addr string, call func(*kafka.Conn) error) error {
	d.connMu.Lock()
	conn := d.conns[addr]
	d.connMu.Unlock()
	kept := conn != nil
	for {
		if conn == nil {
			var err error
			if conn, err = d.dialer.DialContext(ctx, "tcp", addr); err != nil {
				return err
			}
			d.connMu.Lock()
			d.conns[addr] = conn
			d.connMu.Unlock()
		}
		if dl, ok := ctx.Deadline(); ok {
			_ = conn.SetDeadline(dl)
		}
		err := call(conn)
		if err == nil {
			return nil
		}
		_ = conn.Close()
		d.connMu.Lock()
		if d.conns[addr] == conn {
			delete(d.conns, addr)
		}
		d.connMu.Unlock()
		if !kept || ctx.Err() != nil {
			return err
		}
		kept, conn = false, nil
	}
}

func (d *Durability) closeConns() {
	d.connMu.Lock()
	defer d.connMu.Unlock()
	for addr, conn := range d.conns {
		_ = conn.Close()
		delete(d.conns, addr)
	}
}

// answering asks every broker that leads or follows a partition for its
// API versions, at once: the ids of those that answer.
func (d *Durability) answering(ctx context.Context, parts []kafka.Partition) map[int]bool {
	addrs := map[int]string{}
	for _, p := range parts {
		for _, b := range append([]kafka.Broker{p.Leader}, p.Isr...) {
			if b.Host != "" {
				addrs[b.ID] = net.JoinHostPort(b.Host, strconv.Itoa(b.Port))
			}
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	alive := map[int]bool{}
	for id, addr := range addrs {
		wg.Go(func() {
			err := d.ask(ctx, addr, func(conn *kafka.Conn) error {
				_, err := conn.ApiVersions()
				return err
			})
			if err != nil {
				return
			}
			mu.Lock()
			alive[id] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	return alive
}

// Known answers nil once the cluster has answered the last refresh: the
// readiness check of an API, which refuses every order before that.
func (d *Durability) Known(context.Context) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	switch {
	case d.lastErr != nil:
		return d.lastErr
	case d.partitions == nil:
		return fmt.Errorf("the partitions of %s not read yet", d.topic)
	}
	return nil
}

// unwritable lists the partitions that take no durable write now; d.mu held.
func (d *Durability) unwritable() []int {
	var out []int
	for p, s := range d.partitions {
		if _, suspect := d.suspect[p]; !s.writable || suspect {
			out = append(out, p)
		}
	}
	return out
}

// partition is where the Hash balancer puts key among n partitions: the
// order publisher's writer uses it (NewWriter).
func partition(key []byte, n int) int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i
	}
	return (&kafka.Hash{}).Balance(kafka.Message{Key: key}, ids...)
}

// Accepting says whether an event keyed key can be made durable now.
func (d *Durability) Accepting(key []byte) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if len(d.partitions) == 0 {
		return false
	}
	p := partition(key, len(d.partitions))
	_, suspect := d.suspect[p]
	return d.partitions[p].writable && !suspect
}

func (d *Durability) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// Failed records that a publish keyed key failed: its partition is
// refused until the metadata moves, or SuspectFor passes.
func (d *Durability) Failed(key []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.partitions) == 0 {
		return
	}
	p := partition(key, len(d.partitions))
	if _, already := d.suspect[p]; !already {
		d.suspect[p] = suspicion{until: d.now().Add(d.SuspectFor), seen: d.partitions[p]}
	}
}

package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
)

// Producer writes messages to a topic with acks=all: each partition has
// one produce request in flight, and its requests are at least Linger
// apart; the messages that arrive in between go together in the next. A
// message after a quiet spell is sent at once, where kafka.Writer holds
// every batch open for its BatchTimeout; under a crowd the requests are
// Linger apart, as few as the Writer's, since each costs the brokers CPU
// whatever it carries.
//
// Messages go to partitions by kafka.Hash, as a kafka.Writer with that
// balancer sends them. Order within a partition is kept among the messages
// of one WriteMessages call and between calls that do not overlap.
type Producer struct {
	topic       string
	client      *kafka.Client
	transport   *kafka.Transport
	compression kafka.Compression
	balancer    kafka.Hash
	// Linger is the least time between two produce requests on a
	// partition: under a crowd, fewer and fuller requests cost the brokers
	// (and the api) less CPU per message; a call that comes after a quiet
	// Linger is sent at once.
	Linger time.Duration
	// MaxQueuedBytes bounds what waits for a partition's next request:
	// past it a write is refused at once (ErrProducerFull), not held while
	// the partition is stuck.
	MaxQueuedBytes int
	attempts       int
	backoff        time.Duration
	timeout        time.Duration

	requests, messages atomic.Int64
	count              atomic.Pointer[partitionCount]

	mu         sync.Mutex
	partitions map[int]*partitionQueue
	closed     bool
	sending    sync.WaitGroup
	// abandoned is closed when Shutdown gives up on the queued calls: the
	// senders stop waiting out their linger.
	abandoned chan struct{}
}

// maxBatchBytes bounds a produce request's messages: under the brokers'
// default message.max.bytes (1 MiB) with room for the framing.
const maxBatchBytes = 512 << 10

// DefaultMaxQueuedBytes is a partition's queue bound: at the api's
// hundreds of bytes an event, minutes of a hot sale's orders.
const DefaultMaxQueuedBytes = 32 << 20

// NewProducer is a Producer of topic on brokers. Its transport reads the
// topic's metadata every second, as NewWriter's does (a dead leader is
// noticed within a second).
func NewProducer(brokers []string, topic string, compression kafka.Compression) *Producer {
	transport := &kafka.Transport{
		Dial:        (&net.Dialer{Timeout: time.Second}).DialContext,
		MetadataTTL: time.Second, MetadataTopics: []string{topic},
	}
	return &Producer{
		topic:       topic,
		client:      &kafka.Client{Addr: kafka.TCP(brokers...), Transport: transport, Timeout: 5 * time.Second},
		transport:   transport,
		compression: compression,
		attempts:    10,
		backoff:     100 * time.Millisecond,
		timeout:     5 * time.Second,
		partitions:  map[int]*partitionQueue{},
		abandoned:   make(chan struct{}),

		MaxQueuedBytes: DefaultMaxQueuedBytes,
	}
}

// Topic is the topic the producer writes to.
func (p *Producer) Topic() string { return p.topic }

// ProducerStats are a producer's produce requests and the messages they
// carried, acknowledged or not (a request tried again counts again), and
// the bytes waiting for a request now, over every partition.
type ProducerStats struct{ Requests, Messages, QueuedBytes int64 }

// Stats are the producer's counts so far.
func (p *Producer) Stats() ProducerStats {
	p.mu.Lock()
	queued := 0
	for _, q := range p.partitions {
		queued += q.bytes
	}
	p.mu.Unlock()
	return ProducerStats{Requests: p.requests.Load(), Messages: p.messages.Load(), QueuedBytes: int64(queued)}
}

// ErrProducerClosed is what a write after Close gets, and a write still
// queued when Shutdown's deadline passes.
var ErrProducerClosed = errors.New("kafka producer closed")

// ErrProducerFull is what a write gets when its partition's queue holds
// MaxQueuedBytes already: Kafka is not taking what it is sent.
var ErrProducerFull = errors.New("kafka producer: the partition's queue is full")

// WriteMessages sends msgs and returns when every in-sync replica has them,
// or with the first error of their produce requests, or when ctx ends (the
// messages may then still be written).
func (p *Producer) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	n, err := p.partitionCount(ctx)
	if err != nil {
		return err
	}
	byPartition := make(map[int][]kafka.Message, 1)
	for _, m := range msgs {
		part := p.balancer.Balance(m, n.ids...)
		byPartition[part] = append(byPartition[part], m)
	}
	calls := make([]*produceCall, 0, len(byPartition))
	parts := make([]int, 0, len(byPartition))
	for part, ms := range byPartition {
		c := &produceCall{ctx: ctx, msgs: ms, done: make(chan error, 1)}
		c.bytes = callBytes(c)
		calls, parts = append(calls, c), append(parts, part)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrProducerClosed
	}
	for i, c := range calls {
		// An empty queue takes any one call: a bound under a call's size
		// must not refuse it forever.
		if q := p.partitions[parts[i]]; q != nil && q.bytes > 0 && q.bytes+c.bytes > p.MaxQueuedBytes {
			waiting := q.bytes
			p.mu.Unlock()
			return fmt.Errorf("%w (%s/%d: %d bytes waiting)", ErrProducerFull, p.topic, parts[i], waiting)
		}
	}
	for i, c := range calls {
		p.enqueue(parts[i], c)
	}
	p.mu.Unlock()
	for _, c := range calls {
		select {
		case err := <-c.done:
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// partitionCount is the topic's partition count, read from the
// transport's metadata cache at most once a second (a read per call cost
// the api a filtered copy of the metadata per order). An answer Kafka
// calls temporary (a topic created a moment ago that the broker asked
// does not know yet, a leader being elected) is asked again for up to two
// seconds: the cache is refreshed every second.
func (p *Producer) partitionCount(ctx context.Context) (*partitionCount, error) {
	if c := p.count.Load(); c != nil && time.Since(c.at) < time.Second {
		return c, nil
	}
	until := time.Now().Add(2 * time.Second)
	for {
		n, err := p.readPartitionCount(ctx)
		if err == nil {
			c := &partitionCount{ids: make([]int, n), at: time.Now()}
			for i := range c.ids {
				c.ids[i] = i
			}
			p.count.Store(c)
			return c, nil
		}
		if !retriable(err) || time.Now().After(until) {
			return nil, err
		}
		select {
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// partitionCount is the topic's partitions, as the balancer takes them,
// and when they were read.
type partitionCount struct {
	ids []int
	at  time.Time
}

func (p *Producer) readPartitionCount(ctx context.Context) (int, error) {
	md, err := p.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{p.topic}})
	if err != nil {
		return 0, fmt.Errorf("metadata of %s: %w", p.topic, err)
	}
	for _, t := range md.Topics {
		if t.Name != p.topic {
			continue
		}
		if t.Error != nil {
			return 0, fmt.Errorf("metadata of %s: %w", p.topic, t.Error)
		}
		if len(t.Partitions) == 0 {
			return 0, fmt.Errorf("metadata of %s: no partitions", p.topic)
		}
		return len(t.Partitions), nil
	}
	return 0, fmt.Errorf("metadata of %s: %w", p.topic, kafka.UnknownTopicOrPartition)
}

// produceCall is one caller's messages for one partition.
type produceCall struct {
	ctx   context.Context // the caller's: a call whose caller has gone is not sent
	msgs  []kafka.Message
	bytes int // callBytes, counted once
	done  chan error
}

// partitionQueue is a partition's waiting calls and whether a sender is
// at work on it; p.mu guards both.
type partitionQueue struct {
	waiting []*produceCall
	bytes   int // the waiting calls' callBytes
	sending bool
	sent    time.Time // when its last request was sent
}

// enqueue adds c to partition's queue and starts its sender if none is at
// work. p.mu is held.
func (p *Producer) enqueue(partition int, c *produceCall) {
	q := p.partitions[partition]
	if q == nil {
		q = &partitionQueue{}
		p.partitions[partition] = q
	}
	q.waiting = append(q.waiting, c)
	q.bytes += c.bytes
	if q.sending {
		return
	}
	q.sending = true
	p.sending.Add(1)
	go p.send(partition, q)
}

// send writes partition's waiting calls, as many as fit a request at a
// time, until none is left.
func (p *Producer) send(partition int, q *partitionQueue) {
	defer p.sending.Done()
	for {
		// Requests on a partition are Linger apart at least: a call after
		// a quiet Linger is sent at once; under a crowd the calls of the
		// interval go together.
		p.mu.Lock()
		if len(q.waiting) == 0 {
			q.sending = false
			p.mu.Unlock()
			return
		}
		wait := p.Linger - time.Since(q.sent)
		p.mu.Unlock()
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-p.abandoned:
				t.Stop()
			}
		}
		p.mu.Lock()
		batch, size := 0, 0
		for _, c := range q.waiting {
			if batch > 0 && size+c.bytes > maxBatchBytes {
				break
			}
			batch, size = batch+1, size+c.bytes
		}
		q.bytes -= size
		calls := make([]*produceCall, 0, batch)
		for _, c := range q.waiting[:batch] {
			if err := c.ctx.Err(); err != nil {
				c.done <- err
				continue
			}
			calls = append(calls, c)
		}
		clear(q.waiting[:batch])
		q.waiting = q.waiting[batch:]
		if len(calls) == 0 {
			p.mu.Unlock()
			continue
		}
		q.sent = time.Now()
		p.mu.Unlock()
		p.finish(calls, p.produce(partition, calls))
	}
}

// finish answers the calls not answered yet (produce answers the ones
// whose callers left between attempts).
func (p *Producer) finish(calls []*produceCall, err error) {
	for _, c := range calls {
		select {
		case c.done <- err:
		default:
		}
	}
}

func callBytes(c *produceCall) int {
	n := 0
	for _, m := range c.msgs {
		n += len(m.Key) + len(m.Value) + 64
	}
	return n
}

// produce writes calls' messages in one request, tried again while Kafka
// calls the failure temporary (a leader moved, a broker not there yet)
// and a caller still waits: up to 10 attempts, 100 ms apart doubling to
// 1 s, since the transport learns a new leader only at its next metadata
// refresh (every second). A try after a timeout may write the messages
// twice; the order-writer settles an order once.
func (p *Producer) produce(partition int, calls []*produceCall) error {
	var err error
	for attempt := range p.attempts {
		if attempt > 0 {
			time.Sleep(min(p.backoff<<(attempt-1), time.Second))
			if calls = p.waiting(calls, err); len(calls) == 0 {
				return nil
			}
		}
		if err = p.produceOnce(partition, calls); err == nil || !retriable(err) {
			break
		}
	}
	if err != nil {
		n := 0
		for _, c := range calls {
			n += len(c.msgs)
		}
		return fmt.Errorf("produce %d messages to %s/%d: %w", n, p.topic, partition, err)
	}
	return nil
}

// waiting is calls less those whose callers have gone, which are answered
// with err, the last attempt's failure.
func (p *Producer) waiting(calls []*produceCall, err error) []*produceCall {
	kept := make([]*produceCall, 0, len(calls))
	for _, c := range calls {
		if c.ctx.Err() != nil {
			c.done <- fmt.Errorf("produce to %s: %w", p.topic, err)
			continue
		}
		kept = append(kept, c)
	}
	return kept
}

// produceOnce is one produce request; its records are made anew, since a
// record's readers are used up by the request before.
func (p *Producer) produceOnce(partition int, calls []*produceCall) error {
	n := 0
	for _, c := range calls {
		n += len(c.msgs)
	}
	records := make([]kafka.Record, 0, n)
	for _, c := range calls {
		for _, m := range c.msgs {
			r := kafka.Record{Time: m.Time, Headers: m.Headers}
			if m.Key != nil {
				r.Key = kafka.NewBytes(m.Key)
			}
			if m.Value != nil {
				r.Value = kafka.NewBytes(m.Value)
			}
			records = append(records, r)
		}
	}
	p.requests.Add(1)
	p.messages.Add(int64(n))
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	res, err := p.client.Produce(ctx, &kafka.ProduceRequest{
		Topic: p.topic, Partition: partition, RequiredAcks: kafka.RequireAll,
		Compression: p.compression, Records: kafka.NewRecordReader(records...),
	})
	if err != nil {
		return err
	}
	if res.Error != nil {
		return res.Error
	}
	for _, e := range res.RecordErrors {
		return e
	}
	return nil
}

// retriable is kafka.Writer's rule: a Kafka error that says it is
// temporary, or a connection that broke.
func retriable(err error) bool {
	var t interface{ Temporary() bool }
	if errors.As(err, &t) && t.Temporary() {
		return true
	}
	if errors.Is(err, protocol.ErrNoLeader) {
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// Close is Shutdown with no deadline of its own: a request's retries end
// when its callers have gone.
func (p *Producer) Close() error { return p.Shutdown(context.Background()) }

// Shutdown refuses new writes, sends those queued and waits for the
// requests in flight, then closes the connections. When ctx ends first,
// the calls still queued are answered ErrProducerClosed (a caller that
// gets an error publishes again, or tells its buyer: nothing acknowledged
// is dropped), and the requests in flight are left to answer their own.
func (p *Producer) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	sent := make(chan struct{})
	go func() {
		p.sending.Wait()
		close(sent)
	}()
	select {
	case <-sent:
		p.transport.CloseIdleConnections()
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	// A deadline already past refuses nothing when nothing waits: a
	// request in flight is answered by its own sender.
	waiting := 0
	for _, q := range p.partitions {
		waiting += len(q.waiting)
	}
	if waiting == 0 {
		p.mu.Unlock()
		p.transport.CloseIdleConnections()
		return nil
	}
	dropped := 0
	for _, q := range p.partitions {
		for _, c := range q.waiting {
			c.done <- ErrProducerClosed
		}
		dropped += len(q.waiting)
		clear(q.waiting)
		q.waiting, q.bytes = q.waiting[:0], 0
	}
	select {
	case <-p.abandoned:
	default:
		close(p.abandoned)
	}
	p.mu.Unlock()
	p.transport.CloseIdleConnections()
	return fmt.Errorf("kafka producer of %s: %d queued writes refused at shutdown: %w", p.topic, dropped, context.Cause(ctx))
}

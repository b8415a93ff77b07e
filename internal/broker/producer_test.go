package broker_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/testsupport"
)

// Many callers at once: every message acknowledged is in the topic once,
// on the partition kafka.Hash gives its key (where a kafka.Writer of the
// same topic puts it: the relay's and the api's events of one sale meet),
// a call's messages in their order, and a caller's calls (which do not
// overlap) in theirs; and the calls that arrived while a request was in
// flight went out together.
func TestProducerWritesEveryMessageOnceOnItsKeysPartition(t *testing.T) {
	k := testsupport.MustKafka(t)
	const partitions, callers, calls = 3, 64, 10
	topic := k.MustTopic(t, partitions)
	p := broker.NewProducer(k.Brokers, topic, 0)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var g errgroup.Group
	for c := range callers {
		g.Go(func() error {
			for i := range calls {
				// Two messages a call, of one key: their order is kept.
				key := []byte(strconv.Itoa(c % 7))
				err := p.WriteMessages(ctx,
					kafka.Message{Key: key, Value: fmt.Appendf(nil, "%d-%d-a", c, i)},
					kafka.Message{Key: key, Value: fmt.Appendf(nil, "%d-%d-b", c, i)})
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	want := callers * calls * 2
	stats := p.Stats()
	// A request refused by a broker not yet the new topic's leader is
	// tried again, and counts again.
	if stats.Messages < int64(want) || stats.Requests >= int64(callers*calls) {
		t.Fatalf("%+v: want %d messages in fewer requests than the %d calls", stats, want, callers*calls)
	}
	t.Logf("%d messages in %d produce requests", stats.Messages, stats.Requests)

	all := make([]int, partitions)
	for i := range all {
		all[i] = i
	}
	var hash kafka.Hash
	seen := map[string]bool{}
	for part := range partitions {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: k.Brokers, Topic: topic, Partition: part, MaxWait: 100 * time.Millisecond})
		last, err := lastOffset(ctx, k, topic, part)
		if err != nil {
			t.Fatal(err)
		}
		prevA := map[string]bool{}
		lastCall := map[string]int{} // a caller's last call seen on the partition
		for off := int64(0); off < last; off++ {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			v := string(m.Value)
			if seen[v] {
				t.Fatalf("%s written twice", v)
			}
			seen[v] = true
			if got := hash.Balance(kafka.Message{Key: m.Key}, all...); got != part {
				t.Fatalf("%s of key %s on partition %d; kafka.Hash gives %d", v, m.Key, part, got)
			}
			call := v[:len(v)-2]
			var caller, i int
			fmt.Sscanf(call, "%d-%d", &caller, &i)
			if prev, ok := lastCall[strconv.Itoa(caller)]; ok && v[len(v)-1] == 'a' && i <= prev {
				t.Fatalf("%s after call %d of the same caller: a caller's calls out of order", v, prev)
			}
			lastCall[strconv.Itoa(caller)] = i
			switch v[len(v)-1] {
			case 'a':
				prevA[call] = true
			case 'b':
				if !prevA[call] {
					t.Fatalf("%s before its call's first message", v)
				}
			}
		}
		r.Close()
	}
	if len(seen) != want {
		t.Fatalf("%d messages in the topic, want %d", len(seen), want)
	}
}

func lastOffset(ctx context.Context, k *testsupport.Kafka, topic string, partition int) (int64, error) {
	conn, err := kafka.DialLeader(ctx, "tcp", k.Brokers[0], topic, partition)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return conn.ReadLastOffset()
}

// A caller whose context has ended sends nothing; a topic that does not
// exist is an error, not a wait; Close answers every write it did not
// refuse, and a write after it fails.
func TestProducerEnds(t *testing.T) {
	k := testsupport.MustKafka(t)
	topic := k.MustTopic(t, 1)
	p := broker.NewProducer(k.Brokers, topic, 0)
	p.Linger = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	ended, end := context.WithCancel(ctx)
	end()
	if err := p.WriteMessages(ended, kafka.Message{Value: []byte("late")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a write on an ended context: %v, want context.Canceled", err)
	}

	missing := broker.NewProducer(k.Brokers, "t.producer.missing", 0)
	defer missing.Close()
	if err := missing.WriteMessages(ctx, kafka.Message{Value: []byte("x")}); err == nil {
		t.Fatal("a write to a topic that does not exist succeeded")
	}

	// Close while writes wait: each write is either refused as closed or
	// acknowledged and in the topic; none is left waiting. The metadata is
	// read first, and the requests are spaced, so that writes queue.
	if err := p.WriteMessages(ctx, kafka.Message{Key: []byte("k"), Value: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	written := 1
	requests := p.Stats().Requests
	for i := range 20 {
		wg.Go(func() {
			err := p.WriteMessages(ctx, kafka.Message{Key: []byte("k"), Value: fmt.Appendf(nil, "%d", i)})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				written++
			case !errors.Is(err, broker.ErrProducerClosed):
				t.Errorf("a write while closing: %v", err)
			}
		})
	}
	// The writes are queued behind the linger (or, on a machine slow
	// enough that the linger passed, sent): this test is about what Close
	// does with them.
	testsupport.Wait(t, 10*time.Second, "writes queued behind the linger", func() bool {
		s := p.Stats()
		return s.QueuedBytes > 0 || s.Requests > requests
	})
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if written < 2 {
		t.Fatalf("%d writes acknowledged: Close sent none of those queued", written)
	}
	if err := p.WriteMessages(ctx, kafka.Message{Value: []byte("after")}); err == nil {
		t.Fatal("a write after Close succeeded")
	}
	if n, err := lastOffset(ctx, k, topic, 0); err != nil || n != int64(written) {
		t.Fatalf("%d messages in the topic after Close, %v; want the %d acknowledged", n, err, written)
	}
}

// Linger spaces a partition's requests: under a crowd they are at least
// Linger apart, carrying the calls of the interval; a call after a quiet
// spell does not wait for it.
func TestProducerLingerSpacesRequests(t *testing.T) {
	k := testsupport.MustKafka(t)
	topic := k.MustTopic(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	lone := broker.NewProducer(k.Brokers, topic, 0)
	lone.Linger = 20 * time.Second
	defer lone.Close()
	start := time.Now()
	if err := lone.WriteMessages(ctx, kafka.Message{Value: []byte("lone")}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= lone.Linger {
		t.Fatalf("a lone call took %v: it waited for the linger (%v)", took, lone.Linger)
	}

	p := broker.NewProducer(k.Brokers, topic, 0)
	p.Linger = 20 * time.Millisecond
	defer p.Close()
	start = time.Now()
	var g errgroup.Group
	for c := range 32 {
		g.Go(func() error {
			for i := range 5 {
				if err := p.WriteMessages(ctx, kafka.Message{Value: fmt.Appendf(nil, "%d-%d", c, i)}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	stats := p.Stats()
	if most := int64(elapsed/p.Linger) + 1; stats.Requests > most {
		t.Fatalf("%d requests in %v: more than one per %v (%d at most)", stats.Requests, elapsed, p.Linger, most)
	}
	t.Logf("%d calls in %d requests over %v", 32*5, stats.Requests, elapsed.Round(time.Millisecond))
}

// queueWrites starts n writes of one 10-byte message on p, each in its
// own goroutine, and returns once all n wait in p's queue (74 bytes
// each by the producer's count); their outcomes come on the channel.
func queueWrites(t *testing.T, ctx context.Context, p *broker.Producer, n int) <-chan error {
	t.Helper()
	before := p.Stats().QueuedBytes
	out := make(chan error, n)
	for i := range n {
		go func() { out <- p.WriteMessages(ctx, kafka.Message{Value: fmt.Appendf(nil, "queued-%03d", i)}) }()
	}
	testsupport.Wait(t, 10*time.Second, fmt.Sprintf("%d writes queued", n), func() bool {
		return p.Stats().QueuedBytes == before+int64(n)*74
	})
	return out
}

// A partition whose requests do not go out holds at most MaxQueuedBytes:
// a write past it is refused at once, and those queued are still sent.
func TestProducerQueueIsBounded(t *testing.T) {
	k := testsupport.MustKafka(t)
	topic := k.MustTopic(t, 1)
	p := broker.NewProducer(k.Brokers, topic, 0)
	// Long enough that the queue cannot drain between its filling and the
	// write past it on a loaded machine.
	p.Linger = 5 * time.Second
	p.MaxQueuedBytes = 2 * 74
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.WriteMessages(ctx, kafka.Message{Value: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	queued := queueWrites(t, ctx, p, 2)
	start := time.Now()
	err := p.WriteMessages(ctx, kafka.Message{Value: []byte("one too many")})
	if !errors.Is(err, broker.ErrProducerFull) {
		t.Fatalf("a write past the queue's bound: %v, want ErrProducerFull", err)
	}
	if took := time.Since(start); took >= p.Linger {
		t.Fatalf("the refusal took %v: it waited for the queue", took)
	}
	for range 2 {
		if err := <-queued; err != nil {
			t.Fatalf("a queued write: %v", err)
		}
	}
	if n, err := lastOffset(ctx, k, topic, 0); err != nil || n != 3 {
		t.Fatalf("%d messages in the topic, %v; want the 3 acknowledged", n, err)
	}

	// A bound under one call's size still lets a call through an empty
	// queue: it limits what waits, not what may be sent.
	small := broker.NewProducer(k.Brokers, topic, 0)
	small.MaxQueuedBytes = 10
	defer small.Close()
	for i := range 2 {
		if err := small.WriteMessages(ctx, kafka.Message{Value: []byte("bigger than the bound")}); err != nil {
			t.Fatalf("write %d through an empty queue under a small bound: %v", i+1, err)
		}
	}
}

// Shutdown past its deadline answers the writes still queued
// ErrProducerClosed, sends none of them, and returns the deadline's error
// without waiting out the linger.
func TestProducerShutdownDeadline(t *testing.T) {
	k := testsupport.MustKafka(t)
	topic := k.MustTopic(t, 1)
	p := broker.NewProducer(k.Brokers, topic, 0)
	p.Linger = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.WriteMessages(ctx, kafka.Message{Value: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	queued := queueWrites(t, ctx, p, 3)
	sctx, scancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer scancel()
	start := time.Now()
	if err := p.Shutdown(sctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown past its deadline: %v, want context.DeadlineExceeded", err)
	}
	for range 3 {
		if err := <-queued; !errors.Is(err, broker.ErrProducerClosed) {
			t.Fatalf("a write queued at the deadline: %v, want ErrProducerClosed", err)
		}
	}
	if took := time.Since(start); took >= p.Linger {
		t.Fatalf("Shutdown and its answers took %v: the linger was waited out", took)
	}
	if p.Stats().QueuedBytes != 0 {
		t.Fatalf("%d bytes still queued after Shutdown", p.Stats().QueuedBytes)
	}
	if n, err := lastOffset(ctx, k, topic, 0); err != nil || n != 1 {
		t.Fatalf("%d messages in the topic, %v; want only the 1 acknowledged", n, err)
	}

	// A deadline already past refuses nothing when nothing is queued.
	idle := broker.NewProducer(k.Brokers, topic, 0)
	if err := idle.WriteMessages(ctx, kafka.Message{Value: []byte("sent")}); err != nil {
		t.Fatal(err)
	}
	past, pcancel := context.WithCancel(ctx)
	pcancel()
	for i := range 20 {
		if err := idle.Shutdown(past); err != nil {
			t.Fatalf("Shutdown %d of an emptied producer with its deadline past: %v, want nil", i+1, err)
		}
	}
}

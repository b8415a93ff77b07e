package broker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/testsupport"
)

// flakyCommits fails its first n commits.
type flakyCommits struct {
	*kafka.Reader
	failures atomic.Int64
}

func (r *flakyCommits) CommitMessages(ctx context.Context, msgs ...kafka.Message) error {
	if r.failures.Add(-1) >= 0 {
		return errors.New("injected: coordinator unavailable")
	}
	return r.Reader.CommitMessages(ctx, msgs...)
}

// A handler that fails N times and commits that fail N times lose nothing
// and skip nothing: every message is handled (some more than once), and
// the offsets end after the last message only once it was handled.
func TestConsumerRetriesFailuresWithoutSkipping(t *testing.T) {
	k := testsupport.MustKafka(t)
	topic, group := k.MustTopic(t, 1), testsupport.Group(t)
	const total = 50
	w := broker.NewWriter(k.Brokers, topic)
	defer w.Close()
	for i := range total {
		if err := w.WriteMessages(context.Background(), kafka.Message{Value: fmt.Appendf(nil, "%d", i)}); err != nil {
			t.Fatal(err)
		}
	}

	reader := &flakyCommits{Reader: newGroupReader(k, group, topic)}
	defer reader.Close()
	reader.failures.Store(3)
	var mu sync.Mutex
	handled := map[string]int{}
	handleFailures := 4
	c := &broker.Consumer{
		Name: "test", Reader: reader, BatchSize: 7, BatchWait: 20 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), Backoff: fast,
		Handle: func(_ context.Context, batch []kafka.Message) error {
			mu.Lock()
			defer mu.Unlock()
			if handleFailures > 0 {
				handleFailures--
				return errors.New("injected: MySQL unavailable")
			}
			for _, m := range batch {
				handled[string(m.Value)]++
			}
			return nil
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()

	if !testsupport.PollEvery(20*time.Second, 50*time.Millisecond, func() bool { return committed(t, k, group, topic) == total }) {
		t.Fatalf("committed %d of %d after 20 s", committed(t, k, group, topic), total)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(handled) != total || handleFailures != 0 || reader.failures.Load() >= 0 {
		t.Fatalf("%d of %d messages handled; %d handler and %d commit failures left", len(handled), total, handleFailures, reader.failures.Load()+1)
	}
	for i := range total {
		if handled[fmt.Sprint(i)] != 1 {
			t.Fatalf("message %d handled %d times, want once (a failed batch is retried whole, before any commit)", i, handled[fmt.Sprint(i)])
		}
	}
}

// committed is the group's committed offset on partition 0.
func committed(t *testing.T, k *testsupport.Kafka, group, topic string) int64 {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(k.Brokers...), Timeout: 10 * time.Second}
	res, err := client.OffsetFetch(context.Background(), &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: {0}}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Topics[topic][0].CommittedOffset
}

// A commit that fails for good (a backoff that gives up) stops the
// consumer with the error instead of leaving its stages blocked.
func TestConsumerStopsWhenCommitsGiveUp(t *testing.T) {
	k := testsupport.MustKafka(t)
	topic, group := k.MustTopic(t, 1), testsupport.Group(t)
	w := broker.NewWriter(k.Brokers, topic)
	defer w.Close()
	for i := range 20 {
		if err := w.WriteMessages(context.Background(), kafka.Message{Value: fmt.Appendf(nil, "%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	reader := &flakyCommits{Reader: newGroupReader(k, group, topic)}
	defer reader.Close()
	reader.failures.Store(1 << 40)
	c := &broker.Consumer{
		Name: "test", Reader: reader, BatchSize: 1, Logger: slog.New(slog.DiscardHandler),
		Backoff: func() backoff.BackOff { return backoff.WithMaxRetries(backoff.NewConstantBackOff(time.Millisecond), 2) },
		Handle:  func(context.Context, []kafka.Message) error { return nil },
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Run returned nil after its commits gave up")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run still blocked 20 s after its commits gave up")
	}
	if n := committed(t, k, group, topic); n > 0 {
		t.Fatalf("committed offset %d although every commit failed", n)
	}
}

// A batch that keeps failing is reported once past StuckAfter, with its
// offsets, counted, and still retried: when the handler recovers, the
// batch is handled and committed.
func TestConsumerReportsABatchStuckInRetry(t *testing.T) {
	k := testsupport.MustKafka(t)
	topic, group := k.MustTopic(t, 1), testsupport.Group(t)
	w := broker.NewWriter(k.Brokers, topic)
	defer w.Close()
	for i := range 3 {
		if err := w.WriteMessages(context.Background(), kafka.Message{Value: fmt.Appendf(nil, "%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	reader := newGroupReader(k, group, topic)
	defer reader.Close()
	var logs testsupport.SyncBuffer
	stuck := prometheus.NewCounter(prometheus.CounterOpts{Name: "stuck"})
	var failing atomic.Bool
	failing.Store(true)
	c := &broker.Consumer{
		Name: "test", Reader: reader, BatchSize: 10, BatchWait: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Backoff: func() backoff.BackOff { return backoff.NewConstantBackOff(10 * time.Millisecond) },
		StuckAfter: 300 * time.Millisecond, Stuck: stuck,
		Handle: func(context.Context, []kafka.Message) error {
			if failing.Load() {
				return errors.New("injected: lock wait timeout")
			}
			return nil
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	testsupport.Wait(t, 20*time.Second, "the stuck batch reported", func() bool { return testutil.ToFloat64(stuck) == 1 })
	time.Sleep(300 * time.Millisecond) // the test is about time: well past StuckAfter again, still reported once
	if n := testutil.ToFloat64(stuck); n != 1 {
		t.Fatalf("stuck counted %v times for one batch, want once", n)
	}
	if out := logs.String(); !strings.Contains(out, "holds its partition") || !strings.Contains(out, "first_offset=0") || !strings.Contains(out, "lock wait timeout") {
		t.Fatalf("log does not name the batch's offsets and error:\n%s", out)
	}
	if n := committed(t, k, group, topic); n > 0 {
		t.Fatalf("committed offset %d of a batch that never succeeded", n)
	}
	failing.Store(false)
	testsupport.Wait(t, 20*time.Second, "the batch committed after recovery", func() bool { return committed(t, k, group, topic) == 3 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

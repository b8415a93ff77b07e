package broker_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/broker"
)

// flakyWriter fails its first n writes, then keeps what it is given: the
// shape of redislock's flakyScripter.
type flakyWriter struct {
	mu       sync.Mutex
	failures int
	calls    int
	written  []kafka.Message
}

func (w *flakyWriter) WriteMessages(_ context.Context, msgs ...kafka.Message) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	if w.calls <= w.failures {
		return errors.New("injected: broker unavailable")
	}
	w.written = append(w.written, msgs...)
	return nil
}

func fast() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }

func TestForwarderRetriesUntilTheTopicTakesTheMessage(t *testing.T) {
	src := kafka.Message{Topic: "orders", Partition: 2, Offset: 41, Key: []byte("k"), Value: []byte("v")}
	reason := errors.New("undecodable")
	for _, failures := range []int{0, 1, 5} {
		w := &flakyWriter{failures: failures}
		f := &broker.Forwarder{Writer: w, Backoff: fast}
		if err := f.Forward(context.Background(), src, 3, reason); err != nil {
			t.Fatalf("%d failures: %v", failures, err)
		}
		if w.calls != failures+1 || len(w.written) != 1 {
			t.Fatalf("%d failures: %d calls, %d written; want %d calls, 1 written", failures, w.calls, len(w.written), failures+1)
		}
		m := w.written[0]
		want := map[string]string{broker.HeaderError: "undecodable", broker.HeaderTopic: "orders",
			broker.HeaderPartition: "2", broker.HeaderOffset: "41", broker.HeaderAttempt: "3"}
		for k, v := range want {
			if got := broker.Header(m, k); got != v {
				t.Errorf("header %s = %q, want %q", k, got, v)
			}
		}
		if string(m.Key) != "k" || string(m.Value) != "v" || broker.Attempt(m) != 3 {
			t.Errorf("forwarded %q=%q attempt %d, want the original key and value", m.Key, m.Value, broker.Attempt(m))
		}
	}
}

// A forward that never succeeds gives up only when its context ends, and
// says so: the caller must not commit past the message.
func TestForwarderGivesUpOnlyWithItsContext(t *testing.T) {
	w := &flakyWriter{failures: 1 << 30}
	f := &broker.Forwarder{Writer: w, Backoff: fast}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := f.Forward(ctx, kafka.Message{Topic: "t"}, 1, errors.New("x"))
	if !errors.Is(err, context.DeadlineExceeded) || w.calls < 2 || len(w.written) != 0 {
		t.Fatalf("forward against a dead topic: %v after %d calls", err, w.calls)
	}
}

// TestForwardKeepsTheTraceContext: a forwarded message belongs to the
// trace it came with (its consumer links to the order's request), and
// says so once.
func TestForwardKeepsTheTraceContext(t *testing.T) {
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	src := kafka.Message{Topic: "orders", Key: []byte("k"), Value: []byte("v"), Headers: []kafka.Header{
		{Key: "traceparent", Value: []byte(parent)}, {Key: "tracestate", Value: []byte("vendor=1")}, {Key: "other", Value: []byte("x")}}}
	w := &flakyWriter{}
	if err := (&broker.Forwarder{Writer: w, Backoff: fast}).Forward(context.Background(), src, 1, errors.New("refused")); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, h := range w.written[0].Headers {
		count[h.Key]++
	}
	if count["traceparent"] != 1 || count["tracestate"] != 1 || count["other"] != 0 {
		t.Errorf("forwarded headers %v: want traceparent and tracestate once, no other header of the source", w.written[0].Headers)
	}
	if got := broker.Header(w.written[0], "traceparent"); got != parent {
		t.Errorf("traceparent %q, want %q", got, parent)
	}
}

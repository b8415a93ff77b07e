package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// The headers of every message on a retry or dead-letter topic: why it is
// there, where it came from, and how many times it was tried.
const (
	HeaderError     = "error"
	HeaderTopic     = "topic"
	HeaderPartition = "partition"
	HeaderOffset    = "offset"
	HeaderAttempt   = "attempt"
)

// MessageWriter is what a Forwarder writes to (*kafka.Writer).
type MessageWriter interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

var _ MessageWriter = (*kafka.Writer)(nil)

// Forwarder puts a message its consumer could not handle on a retry or
// dead-letter topic: the same key and value, and the headers above.
type Forwarder struct {
	Writer MessageWriter
	// Timeout bounds one write; 10 s when zero.
	Timeout time.Duration
	// Backoff is the wait between failed writes; nil means exponential
	// from 100 ms to 5 s, without end.
	Backoff func() backoff.BackOff
	// Logger, when set, hears of the first failed write of a streak: the
	// caller is held (its offsets or binlog position wait) until it ends.
	Logger *slog.Logger
}

// Forward writes m with the reason it failed after attempt tries,
// retrying until the topic takes it or ctx ends: the caller must not
// commit past m before Forward returned nil. The message keeps the trace
// context it came with, and the forward is a span of ctx's trace linked to
// it.
func (f *Forwarder) Forward(ctx context.Context, m kafka.Message, attempt int, reason error) (err error) {
	out := kafka.Message{Key: m.Key, Value: m.Value, Headers: []kafka.Header{
		{Key: HeaderError, Value: []byte(reason.Error())},
		{Key: HeaderTopic, Value: []byte(m.Topic)},
		{Key: HeaderPartition, Value: strconv.AppendInt(nil, int64(m.Partition), 10)},
		{Key: HeaderOffset, Value: strconv.AppendInt(nil, m.Offset, 10)},
		{Key: HeaderAttempt, Value: strconv.AppendInt(nil, int64(attempt), 10)},
	}}
	out.Headers = append(out.Headers, traceHeaders(m)...)
	topic := "forward"
	if w, ok := f.Writer.(*Writer); ok {
		topic = w.Topic
	}
	ctx, span := tracer.Start(ctx, "send "+topic, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithLinks(Links([]kafka.Message{m})...), messaging("send", topic, 1),
		trace.WithAttributes(attribute.String("seckill.forward_reason", reason.Error()), attribute.Int("seckill.attempt", attempt)))
	defer func() { endSpan(span, err) }()
	timeout := f.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	err = retry(ctx, f.Logger, f.Backoff, "forwarding a message", func() error {
		wctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return f.Writer.WriteMessages(wctx, out)
	}, "from", m.Topic, "partition", m.Partition, "offset", m.Offset)
	if err != nil {
		return fmt.Errorf("forward message %s/%d/%d: %w", m.Topic, m.Partition, m.Offset, errors.Join(err, ctx.Err()))
	}
	return nil
}

// Header is the value of m's header key, "" when absent.
func Header(m kafka.Message, key string) string {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// Attempt is the attempt header of a forwarded message: 0 when absent or
// malformed.
func Attempt(m kafka.Message) int {
	n, err := strconv.Atoi(Header(m, HeaderAttempt))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

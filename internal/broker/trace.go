package broker

import (
	"context"
	"strconv"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// kafka-go has no OpenTelemetry instrumentation (segmentio/kafka-go#1025):
// the trace context travels in the message headers, as W3C traceparent and
// tracestate, through this carrier.
type headerCarrier struct{ headers *[]kafka.Header }

var _ propagation.TextMapCarrier = headerCarrier{}

func (c headerCarrier) Get(key string) string {
	for _, h := range *c.headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// Set replaces the header: a message forwarded with its trace context
// carries it once.
func (c headerCarrier) Set(key, value string) {
	for i, h := range *c.headers {
		if h.Key == key {
			(*c.headers)[i].Value = []byte(value)
			return
		}
	}
	*c.headers = append(*c.headers, kafka.Header{Key: key, Value: []byte(value)})
}

func (c headerCarrier) Keys() []string {
	keys := make([]string, len(*c.headers))
	for i, h := range *c.headers {
		keys[i] = h.Key
	}
	return keys
}

// InjectTrace puts ctx's trace context into m's headers (nothing while
// tracing is off: the global propagator is then a no-op).
func InjectTrace(ctx context.Context, m *kafka.Message) {
	otel.GetTextMapPropagator().Inject(ctx, headerCarrier{&m.Headers})
}

// TraceOf is the span context m's headers carry, invalid when none.
func TraceOf(m kafka.Message) trace.SpanContext {
	return trace.SpanContextFromContext(otel.GetTextMapPropagator().Extract(context.Background(), headerCarrier{&m.Headers}))
}

// Links are links to the spans msgs were sent from: a batch's span links
// to each of its messages' traces rather than having one parent, since its
// messages come from many requests.
func Links(msgs []kafka.Message) []trace.Link {
	var links []trace.Link
	for _, m := range msgs {
		if sc := TraceOf(m); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{
				attribute.String("messaging.destination.partition.id", strconv.Itoa(m.Partition)), attribute.Int64("messaging.kafka.offset", m.Offset)}})
		}
	}
	return links
}

var tracer = otel.Tracer("github.com/seckill/seckill/internal/broker")

// messaging are the attributes of a span that sends or processes n
// messages of topic.
func messaging(operation, topic string, n int) trace.SpanStartOption {
	return trace.WithAttributes(attribute.String("messaging.system", "kafka"),
		attribute.String("messaging.operation.type", operation),
		attribute.String("messaging.destination.name", topic),
		attribute.Int("messaging.batch.message_count", n))
}

// StartProcess starts the span of a consumer handling msgs from topic:
// linked to every message's trace, in a trace of its own.
func StartProcess(ctx context.Context, topic string, msgs []kafka.Message) (context.Context, trace.Span) {
	return tracer.Start(ctx, "process "+topic, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithNewRoot(),
		trace.WithLinks(Links(msgs)...), messaging("process", topic, len(msgs)))
}

// endSpan ends span, marking it failed when err is set.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// traceHeaders are m's trace context headers, for a copy of m that keeps
// the trace it belongs to (a forward, a replay).
func traceHeaders(m kafka.Message) []kafka.Header {
	var out []kafka.Header
	for _, h := range m.Headers {
		if h.Key == "traceparent" || h.Key == "tracestate" {
			out = append(out, h)
		}
	}
	return out
}

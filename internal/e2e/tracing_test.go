package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/telemetry"
	"github.com/seckill/seckill/internal/testsupport"
)

// span is the part of stdouttrace's JSON (OTEL_TRACES_EXPORTER=console)
// that the test reads.
type span struct {
	Name        string
	SpanContext struct{ TraceID string }
	Links       []struct{ SpanContext struct{ TraceID string } }
}

// spansIn are the spans a program printed among its log lines.
func spansIn(output string) []span {
	var out []span
	for _, line := range strings.Split(output, "\n") {
		var s span
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &s) == nil && s.Name != "" {
			out = append(out, s)
		}
	}
	return out
}

// TestTracingFromTheEnvironment runs the programs as an operator does:
// without OTEL_* variables nothing is traced (no trace context in the
// order events, no span printed); with OTEL_TRACES_EXPORTER=console the
// api prints the order's request span and the order-writer its batch span
// linked to the same trace, which the event's traceparent header names.
func TestTracingFromTheEnvironment(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
	}{
		{name: "off by default"},
		{name: "console exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_TRACES_SAMPLER_ARG": "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSaleOn(t, stack{testsupport.MustRedis(t), testsupport.MustMySQL(t), testsupport.MustKafka(t)}, tc.env, nil)
			voucher := s.voucher(t, 1, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
			accepted, _, _ := s.buy(t, voucher, s.sessions(t, 1, 1))
			s.audit(t, voucher, accepted, 1, 0)

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			events, err := broker.ReadDeadLetters(ctx, s.kafka.Brokers, s.writerEnv["SECKILL_ORDERS_TOPIC"])
			if err != nil || len(events) != 1 {
				t.Fatalf("the orders topic holds %d events (%v), want 1", len(events), err)
			}
			traceparent := broker.Header(events[0].Message(), "traceparent")
			// SIGTERM: each program exports what it still holds, then exits.
			for _, p := range []*testsupport.Process{s.apiProc, s.writer} {
				p.Signal(t, syscall.SIGTERM)
				if code, err := p.Wait(30 * time.Second); code != 0 || err != nil {
					t.Fatalf("exit %d %v", code, err)
				}
			}
			apiSpans, writerSpans := spansIn(s.apiProc.Output()), spansIn(s.writer.Output())

			if tc.env == nil {
				if traceparent != "" || len(apiSpans) != 0 || len(writerSpans) != 0 {
					t.Fatalf("tracing off: traceparent %q, %d api spans, %d writer spans; want none", traceparent, len(apiSpans), len(writerSpans))
				}
				return
			}
			link, ok := telemetry.LinkTo(traceparent)
			if !ok || !link.SpanContext.IsSampled() {
				t.Fatalf("the order event's traceparent %q names no sampled span", traceparent)
			}
			sc := link.SpanContext
			id := sc.TraceID().String()
			if !hasSpan(apiSpans, "POST /voucher-order/seckill/:id", id) || !hasSpan(apiSpans, "send "+s.writerEnv["SECKILL_ORDERS_TOPIC"], id) {
				t.Errorf("the api printed no request and publish spans of trace %s: %+v", id, apiSpans)
			}
			if !linksTo(writerSpans, "process "+s.writerEnv["SECKILL_ORDERS_TOPIC"], sc) {
				t.Errorf("the order-writer printed no batch span linked to trace %s: %+v", id, writerSpans)
			}
		})
	}
}

func hasSpan(spans []span, name, traceID string) bool {
	for _, s := range spans {
		if s.Name == name && s.SpanContext.TraceID == traceID {
			return true
		}
	}
	return false
}

func linksTo(spans []span, name string, sc trace.SpanContext) bool {
	for _, s := range spans {
		for _, l := range s.Links {
			if s.Name == name && l.SpanContext.TraceID == sc.TraceID().String() {
				return true
			}
		}
	}
	return false
}

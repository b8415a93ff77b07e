package telemetry_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/internal/telemetry"
)

func env(vars map[string]string) telemetry.Lookup {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

// TestSampler: the ratio samplers follow a sampled link (a batch of
// sampled orders is sampled), and a parent's decision stands.
func TestSampler(t *testing.T) {
	sampled := oteltrace.NewSpanContext(oteltrace.SpanContextConfig{TraceID: [16]byte{1}, SpanID: [8]byte{1}, TraceFlags: oteltrace.FlagsSampled})
	unsampled := oteltrace.NewSpanContext(oteltrace.SpanContextConfig{TraceID: [16]byte{2}, SpanID: [8]byte{2}})
	// A trace id that the 1 % ratio refuses: its lower 8 bytes are high.
	refused := oteltrace.TraceID{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	for _, tc := range []struct {
		name    string
		vars    map[string]string
		parent  oteltrace.SpanContext
		kind    oteltrace.SpanKind
		links   []oteltrace.SpanContext
		sampled bool
	}{
		{name: "default samples a root", vars: map[string]string{}, sampled: true},
		{name: "1 % refuses a root", vars: map[string]string{"OTEL_TRACES_SAMPLER_ARG": "0.01"}},
		{name: "1 % samples a root linked to a sampled span", vars: map[string]string{"OTEL_TRACES_SAMPLER_ARG": "0.01"}, links: []oteltrace.SpanContext{unsampled, sampled}, sampled: true},
		{name: "1 % refuses a root linked to unsampled spans", vars: map[string]string{"OTEL_TRACES_SAMPLER_ARG": "0.01"}, links: []oteltrace.SpanContext{unsampled}},
		{name: "1 % refuses a server span linked to a stranger's sampled span", vars: map[string]string{"OTEL_TRACES_SAMPLER_ARG": "0.01"},
			kind: oteltrace.SpanKindServer, links: []oteltrace.SpanContext{sampled}},
		{name: "a sampled parent stands", vars: map[string]string{"OTEL_TRACES_SAMPLER_ARG": "0"}, parent: sampled, sampled: true},
		{name: "an unsampled parent stands", vars: map[string]string{}, parent: unsampled},
		{name: "always_off ignores links", vars: map[string]string{"OTEL_TRACES_SAMPLER": "always_off"}, links: []oteltrace.SpanContext{sampled}},
		{name: "traceidratio follows links", vars: map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"}, links: []oteltrace.SpanContext{sampled}, sampled: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := telemetry.Sampler(env(tc.vars))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if tc.parent.IsValid() {
				ctx = oteltrace.ContextWithSpanContext(ctx, tc.parent)
			}
			p := trace.SamplingParameters{ParentContext: ctx, TraceID: refused, Name: "process seckill.orders", Kind: tc.kind}
			for _, l := range tc.links {
				p.Links = append(p.Links, oteltrace.Link{SpanContext: l})
			}
			if got := s.ShouldSample(p).Decision == trace.RecordAndSample; got != tc.sampled {
				t.Errorf("sampled: %v, want %v (%s)", got, tc.sampled, s.Description())
			}
		})
	}
}

// TestLogLinesOfATracedRequestCarryItsIDs: a line logged with the
// context of a span names its trace and span; one without, neither.
func TestLogLinesOfATracedRequestCarryItsIDs(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&buf, nil))).With("program", "api")
	sc := oteltrace.NewSpanContext(oteltrace.SpanContextConfig{TraceID: [16]byte{0xab, 1}, SpanID: [8]byte{0xcd, 2}, TraceFlags: oteltrace.FlagsSampled})
	logger.WarnContext(oteltrace.ContextWithSpanContext(context.Background(), sc), "publish failed", "order_id", 1)
	logger.Warn("untraced")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines: %q", lines)
	}
	for _, want := range []string{`"trace_id":"` + sc.TraceID().String() + `"`, `"span_id":"` + sc.SpanID().String() + `"`, `"program":"api"`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("traced line %s lacks %s", lines[0], want)
		}
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("untraced line names a trace: %s", lines[1])
	}
}

// TestTraceParent: only a sampled span's context is kept, and read back.
func TestTraceParent(t *testing.T) {
	sc := oteltrace.NewSpanContext(oteltrace.SpanContextConfig{TraceID: [16]byte{0xab, 1}, SpanID: [8]byte{0xcd, 2}, TraceFlags: oteltrace.FlagsSampled})
	tp := telemetry.TraceParent(oteltrace.ContextWithSpanContext(context.Background(), sc))
	if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; tp != want {
		t.Fatalf("traceparent %q, want %q", tp, want)
	}
	if l, ok := telemetry.LinkTo(tp); !ok || !l.SpanContext.Equal(sc.WithRemote(true)) {
		t.Errorf("LinkTo(%q) = %v %v", tp, l.SpanContext, ok)
	}
	if got := telemetry.TraceParent(oteltrace.ContextWithSpanContext(context.Background(), sc.WithTraceFlags(0))); got != "" {
		t.Errorf("an unsampled span is kept: %q", got)
	}
	for _, bad := range []string{"", "00-xyz", "00-00000000000000000000000000000000-0000000000000000-01"} {
		if _, ok := telemetry.LinkTo(bad); ok {
			t.Errorf("LinkTo(%q) names a span", bad)
		}
	}
}

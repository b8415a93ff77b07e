package telemetry

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// ChildrenOnly is the global tracer provider, for a client library's
// instrumentation (Redis, SQL): its spans start only inside a traced
// operation. A readiness ping, a lease renewal or a relay scan that finds
// nothing is no trace of its own; at 100 % sampling they would outnumber
// the orders.
func ChildrenOnly() trace.TracerProvider { return childrenOnly{} }

type childrenOnly struct{ embedded.TracerProvider }

func (childrenOnly) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return childTracer{inner: otel.GetTracerProvider().Tracer(name, opts...)}
}

type childTracer struct {
	embedded.Tracer
	inner trace.Tracer
}

var idle = noop.NewTracerProvider().Tracer("")

func (t childTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return idle.Start(ctx, name, opts...)
	}
	return t.inner.Start(ctx, name, opts...)
}

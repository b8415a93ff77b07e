package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

var w3c = propagation.TraceContext{}

// TraceParent is the W3C traceparent of ctx's span when it is sampled, ""
// otherwise: what a record that outlives the request (a reservation)
// keeps, so that whoever handles it later links back to the request.
func TraceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return ""
	}
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	return c["traceparent"]
}

// LinkTo is a link to the span a traceparent names; false when it names
// none (empty or malformed).
func LinkTo(traceparent string) (trace.Link, bool) {
	if traceparent == "" {
		return trace.Link{}, false
	}
	sc := trace.SpanContextFromContext(w3c.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent}))
	if !sc.IsValid() {
		return trace.Link{}, false
	}
	return trace.Link{SpanContext: sc}, true
}

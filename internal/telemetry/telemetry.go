// Package telemetry is the programs' tracing: whether it is on, the
// sampler, client spans only inside a traced operation, the trace context
// a record keeps, and the trace and span ids in the log lines of a traced
// request. Turning it on from the environment (the exporters) is
// telemetry/export's, which only the programs' mains import: the
// exporters' dependencies (gRPC among them) stay out of every other
// package and its tests.
//
// The adapters ask Enabled when they are built: with tracing off the HTTP
// server, Redis and MySQL are not wrapped at all, so an untraced system
// pays nothing for the instrumentation. The spans the project starts
// itself (the gate, a publish, a batch) go to the global provider, a no-op
// while tracing is off.
package telemetry

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

var enabled atomic.Bool

// Enabled reports whether a tracer provider was installed (export.Setup
// with an exporter, or Install).
func Enabled() bool { return enabled.Load() }

// Install makes tp the process's tracer provider, with the W3C trace
// context and baggage propagators, and turns the adapters' instrumentation
// on for what is built after it. export.Setup calls it; a test installs
// its own provider (an in-memory exporter) with it.
func Install(tp trace.TracerProvider) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	enabled.Store(true)
}

// Lookup reads a variable (os.LookupEnv).
type Lookup func(string) (string, bool)

// Setup turns a program's tracing on as its environment says, and returns
// what flushes and stops it at exit (export.Setup).
type Setup func(ctx context.Context, service string, env Lookup) (shutdown func(context.Context) error, err error)

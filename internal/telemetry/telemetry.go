// Package telemetry is the programs' tracing: OpenTelemetry set up from the
// standard OTEL_* variables, off unless OTEL_TRACES_EXPORTER names an
// exporter; the sampler; client spans only inside a traced operation; and
// the trace and span ids in the log lines of a traced request.
//
// The adapters ask Enabled when they are built: with tracing off the HTTP
// server, Redis and MySQL are not wrapped at all, so an untraced system
// pays nothing for the instrumentation. The spans the project starts
// itself (the gate, a publish, a batch) go to the global provider, a no-op
// while tracing is off.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

var enabled atomic.Bool

// Enabled reports whether a tracer provider was installed (Setup with an
// exporter, or Install).
func Enabled() bool { return enabled.Load() }

// Install makes tp the process's tracer provider, with the W3C trace
// context and baggage propagators, and turns the adapters' instrumentation
// on for what is built after it. Setup calls it; a test installs its own
// provider (an in-memory exporter) with it.
func Install(tp trace.TracerProvider) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	enabled.Store(true)
}

// Tracing is a program's tracer provider, flushed by Shutdown; its zero
// value is tracing off.
type Tracing struct{ provider *sdktrace.TracerProvider }

// Lookup reads a variable (os.LookupEnv).
type Lookup func(string) (string, bool)

// Setup turns tracing on when OTEL_TRACES_EXPORTER names an exporter
// (otlp, console; autoexport reads the exporter's own variables, such as
// OTEL_EXPORTER_OTLP_ENDPOINT), with the sampler OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG say (Sampler), and the resource of
// OTEL_SERVICE_NAME (default: service) and OTEL_RESOURCE_ATTRIBUTES.
// Unset, empty or "none" leaves it off, as does OTEL_SDK_DISABLED=true. A
// variable that cannot work is an error, not a silent fallback.
func Setup(ctx context.Context, service string, env Lookup) (*Tracing, error) {
	name, _ := env("OTEL_TRACES_EXPORTER")
	name = strings.TrimSpace(name)
	if disabled, _ := env("OTEL_SDK_DISABLED"); strings.EqualFold(strings.TrimSpace(disabled), "true") || name == "" || name == "none" {
		return &Tracing{}, nil
	}
	sampler, err := Sampler(env)
	if err != nil {
		return nil, err
	}
	exporter, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%s: %w", name, err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName(service)),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithProcessPID())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithSampler(sampler), sdktrace.WithResource(res))
	Install(tp)
	return &Tracing{provider: tp}, nil
}

// On reports whether t exports spans.
func (t *Tracing) On() bool { return t != nil && t.provider != nil }

// Shutdown exports the spans still queued and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.On() {
		return nil
	}
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing shutdown: %w", err)
	}
	return nil
}

// Package export turns a program's tracing on from the standard OTEL_*
// variables: the exporter (contrib's autoexport), the sampler, the
// resource. Only the programs' mains import it (app.Main takes Setup), so
// that the exporters' dependencies stay out of the other packages.
package export

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/seckill/seckill/internal/telemetry"
)

var _ telemetry.Setup = Setup

// Setup turns tracing on when OTEL_TRACES_EXPORTER names an exporter
// (otlp, console; autoexport reads the exporter's own variables, such as
// OTEL_EXPORTER_OTLP_ENDPOINT), with the sampler OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG say (telemetry.Sampler), and the resource of
// OTEL_SERVICE_NAME (default: service) and OTEL_RESOURCE_ATTRIBUTES.
// Unset, empty or "none" leaves it off, as does OTEL_SDK_DISABLED=true:
// nothing is installed, and shutdown does nothing. A variable that cannot
// work is an error, not a silent fallback.
func Setup(ctx context.Context, service string, env telemetry.Lookup) (shutdown func(context.Context) error, err error) {
	off := func(context.Context) error { return nil }
	name, _ := env("OTEL_TRACES_EXPORTER")
	name = strings.TrimSpace(name)
	if disabled, _ := env("OTEL_SDK_DISABLED"); strings.EqualFold(strings.TrimSpace(disabled), "true") || name == "" || name == "none" {
		return off, nil
	}
	sampler, err := telemetry.Sampler(env)
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
	telemetry.Install(tp)
	return func(ctx context.Context) error {
		if err := tp.Shutdown(ctx); err != nil {
			return fmt.Errorf("tracing shutdown: %w", err)
		}
		return nil
	}, nil
}

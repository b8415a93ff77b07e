package telemetry

import (
	"fmt"
	"strconv"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// DefaultSampler is the sampler when OTEL_TRACES_SAMPLER is unset: a
// request that arrives traced keeps its caller's decision; a new trace is
// sampled at OTEL_TRACES_SAMPLER_ARG (1.0 when unset).
const DefaultSampler = "parentbased_traceidratio"

// Sampler is the sampler OTEL_TRACES_SAMPLER names, with the ratio of
// OTEL_TRACES_SAMPLER_ARG for the ratio samplers; the SDK's own reading of
// these variables logs a bad value and falls back, this one refuses it.
//
// A new trace with links (a writer's batch, linked to its orders) is
// sampled when one of the traces it links to was, whatever the ratio:
// at 1 % every sampled order still shows the batch that wrote it. Not a
// server span's: its link is a stranger's traceparent (the API continues
// only a trusted proxy's), whose sampled flag anyone can set.
func Sampler(env Lookup) (sdktrace.Sampler, error) {
	name, _ := env("OTEL_TRACES_SAMPLER")
	name = strings.TrimSpace(name)
	if name == "" {
		name = DefaultSampler
	}
	ratio := 1.0
	if arg, ok := env("OTEL_TRACES_SAMPLER_ARG"); ok && strings.TrimSpace(arg) != "" && strings.HasSuffix(name, "traceidratio") {
		r, err := strconv.ParseFloat(strings.TrimSpace(arg), 64)
		if err != nil || r < 0 || r > 1 {
			return nil, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1", arg)
		}
		ratio = r
	}
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		return followLinks{sdktrace.TraceIDRatioBased(ratio)}, nil
	case "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(followLinks{sdktrace.TraceIDRatioBased(ratio)}), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER=%q: want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio", name)
}

// followLinks samples a span that links to a sampled span, and asks root
// about the others.
type followLinks struct{ root sdktrace.Sampler }

func (s followLinks) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if p.Kind == trace.SpanKindServer {
		return s.root.ShouldSample(p)
	}
	for _, l := range p.Links {
		if l.SpanContext.IsSampled() {
			return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample,
				Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState()}
		}
	}
	return s.root.ShouldSample(p)
}

func (s followLinks) Description() string { return "FollowLinks{" + s.root.Description() + "}" }

package export_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/seckill/seckill/internal/telemetry"
	"github.com/seckill/seckill/internal/telemetry/export"
)

// TestSetupIsOffByDefault: without an exporter named, Setup installs
// nothing (the adapters are not wrapped, no provider but the no-op one)
// and exports nothing; a variable that cannot work fails the start
// instead of falling back. (An exporter named turns it on: the programs'
// test, internal/e2e TestTracingFromTheEnvironment.)
func TestSetupIsOffByDefault(t *testing.T) {
	for _, tc := range []struct {
		name string
		vars map[string]string
		err  string
	}{
		{name: "nothing set", vars: map[string]string{}},
		{name: "empty exporter", vars: map[string]string{"OTEL_TRACES_EXPORTER": " "}},
		{name: "exporter none", vars: map[string]string{"OTEL_TRACES_EXPORTER": "none"}},
		{name: "sdk disabled", vars: map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}},
		{name: "sampler without exporter", vars: map[string]string{"OTEL_TRACES_SAMPLER": "nonsense"}},
		{name: "bad sampler", vars: map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_TRACES_SAMPLER": "sometimes"}, err: `OTEL_TRACES_SAMPLER="sometimes"`},
		{name: "bad ratio", vars: map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_TRACES_SAMPLER_ARG": "2"}, err: `OTEL_TRACES_SAMPLER_ARG="2"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shutdown, err := export.Setup(context.Background(), "seckill-test", func(k string) (string, bool) { v, ok := tc.vars[k]; return v, ok })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Setup: %v, want an error naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, sdk := otel.GetTracerProvider().(*sdktrace.TracerProvider); sdk || telemetry.Enabled() {
				t.Errorf("tracing installed (SDK provider: %v, enabled: %v)", sdk, telemetry.Enabled())
			}
			if err := shutdown(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
}

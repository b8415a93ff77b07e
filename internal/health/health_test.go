package health_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/health"
	"github.com/seckill/seckill/internal/testsupport"
)

// A program is unready only while a dependency it cannot work without is
// down; an optional one down leaves it ready and degraded. The public
// readiness says ready or unavailable and nothing else; the admin one
// says which dependency, where and why.
func TestReadinessCountsOnlyRequiredDependencies(t *testing.T) {
	down := errors.New("connection refused")
	cases := []struct {
		name               string
		required, optional error
		state              string
		code               int
		public             string
		degraded           float64
	}{
		{"all up", nil, nil, health.StateReady, 200, `{"status":"ready"}`, 0},
		{"optional down", nil, down, health.StateDegraded, 200, `{"status":"ready"}`, 1},
		{"required down", down, nil, health.StateUnavailable, 503, `{"status":"unavailable"}`, 0},
		{"both down", down, down, health.StateUnavailable, 503, `{"status":"unavailable"}`, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			reg := prometheus.NewRegistry()
			m := health.NewMonitor(slog.New(slog.NewTextHandler(io.Discard, nil)), reg, health.Options{})
			check := func(err error) health.Check { return func(context.Context) error { return err } }
			m.Add("redis", "10.0.0.1:6379", check(c.required))
			m.AddOptional("mysql", "10.0.0.2:3306", check(c.optional))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go m.Run(ctx)
			testsupport.Wait(t, 5*time.Second, "both dependencies checked", func() bool {
				for _, s := range m.Statuses() {
					if s.Error == "not checked yet" {
						return false
					}
				}
				return true
			})
			if got := m.State(); got != c.state {
				t.Fatalf("state %q, want %q (%+v)", got, c.state, m.Statuses())
			}
			if m.Ready() != (c.code == 200) {
				t.Fatalf("Ready() = %v in state %s", m.Ready(), c.state)
			}
			if got := degraded(t, reg); got != c.degraded {
				t.Fatalf("seckill_degraded %v, want %v", got, c.degraded)
			}
			pub := httptest.NewRecorder()
			m.PublicReadyHandler().ServeHTTP(pub, httptest.NewRequest("GET", "/readyz", nil))
			if pub.Code != c.code || strings.TrimSpace(pub.Body.String()) != c.public {
				t.Fatalf("public readiness %d %s, want %d %s", pub.Code, pub.Body, c.code, c.public)
			}
			admin := httptest.NewRecorder()
			m.ReadyHandler().ServeHTTP(admin, httptest.NewRequest("GET", "/readyz", nil))
			body := admin.Body.String()
			if admin.Code != c.code || !strings.Contains(body, `"status":"`+c.state+`"`) ||
				!strings.Contains(body, `{"name":"mysql","addr":"10.0.0.2:3306","up":`) || !strings.Contains(body, `"required":false`) {
				t.Fatalf("admin readiness %d %s, want %d naming each dependency, state %s", admin.Code, body, c.code, c.state)
			}
			if c.optional != nil && !strings.Contains(body, `"error":"connection refused"`) {
				t.Fatalf("admin readiness does not say why mysql is down: %s", body)
			}
		})
	}
}

func degraded(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "seckill_degraded" {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no seckill_degraded gauge")
	return 0
}

package daemon_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/daemon"
	"github.com/seckill/seckill/internal/health"
)

// The admin listener serves Go's profiles only when asked to; its other
// paths either way.
func TestAdminServesProfilesOnlyWhenAsked(t *testing.T) {
	for _, c := range []struct {
		pprof bool
		want  int
	}{{false, http.StatusNotFound}, {true, http.StatusOK}} {
		reg := prometheus.NewRegistry()
		admin, err := daemon.ListenAdmin("127.0.0.1:0", health.NewMonitor(slog.New(slog.NewTextHandler(io.Discard, nil)), reg, health.Options{}), reg, c.pprof)
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = admin.Serve() }()
		for path, want := range map[string]int{"/debug/pprof/": c.want, "/metrics": http.StatusOK, "/healthz": http.StatusOK} {
			res, err := http.Get("http://" + admin.Addr() + path)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != want {
				t.Errorf("pprof %v: %s answered %d, want %d", c.pprof, path, res.StatusCode, want)
			}
		}
		if err := admin.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// Package daemon is what every program of the project shares: the common
// settings, structured logging, the admin endpoints (/healthz, /readyz,
// /metrics) and an ordered, bounded shutdown.
package daemon

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/health"
	"github.com/seckill/seckill/internal/mysqldb"
	"github.com/seckill/seckill/internal/redisconn"
	"github.com/seckill/seckill/internal/telemetry"
)

// Common are the settings of every program. The defaults point at the
// local stack (deploy/local).
type Common struct {
	LogFormat       string
	LogLevel        slog.Level
	Redis           redisconn.Config
	MySQLDSN        string
	KafkaBrokers    []string
	ShutdownTimeout time.Duration
	// Pprof: the admin listener serves profiles (SECKILL_PPROF).
	Pprof bool
}

// NewLogger writes text (the default, for people) or JSON (for collectors).
func NewLogger(w io.Writer, format string, level slog.Level, program string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(telemetry.LogHandler(h)).With("program", program)
}

// OpenRedis is the client of c's Redis topology, refused at start when the
// configuration cannot work (see redisconn.Open); what may pass (a seed
// that does not answer, a node rejoining the cluster) is logged.
func OpenRedis(ctx context.Context, c Common, logger *slog.Logger) (redis.UniversalClient, error) {
	rdb, warnings, err := redisconn.Open(ctx, c.Redis)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		logger.Warn(w)
	}
	if err := redisconn.CheckNode(ctx, rdb); err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return rdb, nil
}

// NewRegistry is a metrics registry with the Go and process collectors; one
// per program keeps tests that run several programs in one process apart.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// AdminServer serves /healthz, /readyz and /metrics on a daemon's admin port.
type AdminServer struct {
	srv *http.Server
	ln  net.Listener
}

// ListenAdmin binds addr at once, so a taken port fails the start; with
// pprof, the profiles are served there too.
func ListenAdmin(addr string, monitor *health.Monitor, reg *prometheus.Registry, pprofOn bool) (*AdminServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin listener on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", health.LiveHandler())
	mux.Handle("GET /readyz", monitor.ReadyHandler())
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if pprofOn {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return &AdminServer{
		ln:  ln,
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second},
	}, nil
}

// Addr is the bound address (useful with port 0).
func (a *AdminServer) Addr() string { return a.ln.Addr().String() }

// Serve blocks until Shutdown.
func (a *AdminServer) Serve() error {
	if err := a.srv.Serve(a.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("admin server: %w", err)
	}
	return nil
}

// Shutdown stops accepting and waits for in-flight requests until ctx ends.
func (a *AdminServer) Shutdown(ctx context.Context) error { return a.srv.Shutdown(ctx) }

// Step is one stage of a shutdown.
type Step struct {
	Name string
	Do   func(ctx context.Context) error
}

// Shutdown runs the steps in order, all of them within timeout, and logs
// each. A step that fails or overruns is logged and the next one still runs:
// closing the database must not be skipped because a Kafka flush failed.
func Shutdown(logger *slog.Logger, timeout time.Duration, steps ...Step) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var errs []error
	for _, s := range steps {
		start := time.Now()
		if err := s.Do(ctx); err != nil {
			logger.Error("shutdown step failed", "step", s.Name, "err", err, "took", time.Since(start))
			errs = append(errs, fmt.Errorf("%s: %w", s.Name, err))
			continue
		}
		logger.Info("shutdown step done", "step", s.Name, "took", time.Since(start))
	}
	return errors.Join(errs...)
}

// KafkaCheck is the readiness name of Kafka.
const KafkaCheck = "kafka"

// WatchRedis adds the readiness check of c's Redis (redisconn.Serving). On
// a cluster it is that a majority of the masters serve, not every master:
// while one shard fails over the others keep selling, and a load balancer
// should keep sending them buyers.
func (c Common) WatchRedis(m *health.Monitor, rdb redis.UniversalClient) {
	where := c.Redis.Addr
	if where == "" {
		where = "cluster " + strings.Join(c.Redis.Cluster, ",")
	}
	m.Add("redis", where, func(ctx context.Context) error { return redisconn.Serving(ctx, rdb) })
}

// WatchMySQL adds the check of the MySQL of c.MySQLDSN, and on a Galera
// cluster the cluster's size on reg. required: the program is not ready
// without MySQL; otherwise it is degraded.
func (c Common) WatchMySQL(m *health.Monitor, reg prometheus.Registerer, db *sql.DB, required bool) {
	w := mysqldb.NewClusterWatch(reg)
	add := m.AddOptional
	if required {
		add = m.Add
	}
	add("mysql", mysqldb.Addr(c.MySQLDSN), func(ctx context.Context) error { return w.Check(ctx, db) })
}

// WatchKafka adds the readiness check of c.KafkaBrokers.
func (c Common) WatchKafka(m *health.Monitor) {
	m.Add(KafkaCheck, strings.Join(c.KafkaBrokers, ","), func(ctx context.Context) error { return broker.Ping(ctx, c.KafkaBrokers) })
}

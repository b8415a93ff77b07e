// Package app wires each program from its configuration: it opens the
// dependencies, builds the services and starts the workers (Run), and
// shuts them down in order (Close). The cmd/* mains and the integration
// tests start the same wiring.
package app

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/daemon"
	"github.com/seckill/seckill/internal/health"
	"github.com/seckill/seckill/internal/idgen"
	"github.com/seckill/seckill/internal/mysqldb"
	"github.com/seckill/seckill/internal/redisconn"
	"github.com/seckill/seckill/internal/schema"
	"github.com/seckill/seckill/internal/telemetry"
	"github.com/seckill/seckill/lua"
)

// Program is a wired program.
type Program interface {
	// Run opens the dependencies and starts the workers; it returns once
	// the program listens.
	Run(ctx context.Context) error
	// Done is closed when a worker failed and the program must stop.
	Done() <-chan struct{}
	// Close shuts the program down in order, within its shutdown timeout.
	Close() error
}

// Serve runs p until ctx ends (a signal) or p fails, then closes it.
func Serve(ctx context.Context, p Program) error {
	if err := p.Run(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-p.Done():
	}
	return p.Close()
}

// logger is a program's logger on w, as the common settings say.
func logger(w io.Writer, c daemon.Common, program string) *slog.Logger {
	return daemon.NewLogger(w, c.LogFormat, c.LogLevel, program)
}

// abandon closes what a Run that failed had opened, and returns its error.
func abandon(err error, closers []daemon.Step) error {
	for _, s := range closers {
		_ = s.Do(context.Background())
	}
	return err
}

// closer is a shutdown step that closes c.
func closer(name string, c io.Closer) daemon.Step {
	return daemon.Step{Name: name, Do: func(context.Context) error { return c.Close() }}
}

// base opens what every program has: its Redis, its metrics registry and
// its dependency monitor, with Redis's readiness check.
type base struct {
	logger  *slog.Logger
	rdb     redis.UniversalClient
	reg     *prometheus.Registry
	monitor *health.Monitor
	closers []daemon.Step
}

func newBase(ctx context.Context, c daemon.Common, logger *slog.Logger) (base, error) {
	rdb, err := daemon.OpenRedis(ctx, c, logger)
	if err != nil {
		return base{}, err
	}
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	if err := lua.LoadAll(lctx, rdb); err != nil {
		logger.Warn("the Lua scripts are not preloaded; each is loaded on its first call instead", "err", err)
	}
	cancel()
	b := base{logger: logger, rdb: rdb, reg: daemon.NewRegistry()}
	b.monitor = health.NewMonitor(logger, b.reg, health.Options{})
	c.WatchRedis(b.monitor, b.rdb)
	daemon.WatchRedisMemory(b.reg, b.rdb)
	b.closers = []daemon.Step{closer("redis", b.rdb)}
	return b, nil
}

// cacheRedis is the Redis of the shop caches: c's, checked as "cache
// redis" (required: the program is not ready without it; otherwise it is
// degraded), or the program's own Redis when c names none. Its client
// dials when first used, so that a cache Redis that is down does not stop
// a start.
func (b *base) cacheRedis(c redisconn.Config, required bool) (redis.UniversalClient, error) {
	if c.Addr == "" && len(c.Cluster) == 0 {
		return b.rdb, nil
	}
	rdb, err := redisconn.New(c)
	if err != nil {
		return nil, fmt.Errorf("the caches' Redis: %w", err)
	}
	where := c.Addr
	if where == "" {
		where = "cluster " + strings.Join(c.Cluster, ",")
	}
	add := b.monitor.AddOptional
	if required {
		add = b.monitor.Add
	}
	add("cache redis", where, func(ctx context.Context) error { return redisconn.Serving(ctx, rdb) })
	b.closeFirst(closer("cache redis", rdb))
	return rdb, nil
}

// newSaleBase is the base of a program on the order's path: Redis, MySQL
// and Kafka, each with its check; MySQL closes before Redis. needMySQL:
// the program is not ready without MySQL (the order-writer); the api
// sells without it, degraded.
func newSaleBase(ctx context.Context, c daemon.Common, logger *slog.Logger, needMySQL bool) (base, *sql.DB, error) {
	b, err := newBase(ctx, c, logger)
	if err != nil {
		return b, nil, err
	}
	db, err := mysqldb.Open(c.MySQLDSN)
	if err != nil {
		return b, nil, abandon(fmt.Errorf("SECKILL_MYSQL_DSN: %w", err), b.closers)
	}
	c.WatchMySQL(b.monitor, b.reg, db, needMySQL)
	// Required whether or not MySQL is: a program on a schema older than
	// its own would read and write columns that are not there yet.
	b.monitor.Add("schema", mysqldb.Addr(c.MySQLDSN), schema.NewCheck(db, "").Check)
	c.WatchKafka(b.monitor)
	b.closeFirst(closer("mysql", db))
	return b, db, nil
}

// lagInterval is how often a daemon reads its consumer group's lag for
// seckill_consumer_lag_messages: three Kafka requests, far under the
// alerts' minutes.
const lagInterval = 5 * time.Second

// orderIDs is the order-id generator every program shares: the API hands
// ids out, a reconcile raises it above the ids in use.
func orderIDs(rdb redis.UniversalClient, sale config.Sale) *idgen.Generator {
	return idgen.New(rdb, sale.KeyPrefix+"order", sale.IDBlock)
}

// running is a started program's daemon.
type running struct{ d daemon.Daemon }

// Done is closed when a worker failed and the program must stop.
func (r *running) Done() <-chan struct{} { return r.d.Done() }

// Close shuts the program down in order: its workers (a consumer commits
// what MySQL took, the HTTP server lets requests finish), the admin
// server, the monitor, then Kafka, MySQL and Redis.
func (r *running) Close() error { return r.d.Stop() }

// AdminAddr is the bound admin address, "" for a program without one.
func (r *running) AdminAddr() string { return r.d.BoundAdminAddr() }

// closeFirst puts a closer ahead of the others: what was opened last
// closes first.
func (b *base) closeFirst(s daemon.Step) { b.closers = append([]daemon.Step{s}, b.closers...) }

func (b *base) daemon(c daemon.Common, adminAddr string, workers ...daemon.Worker) daemon.Daemon {
	return daemon.Daemon{Logger: b.logger, Monitor: b.monitor, Registry: b.reg, AdminAddr: adminAddr, Pprof: c.Pprof,
		ShutdownTimeout: c.ShutdownTimeout, Workers: workers, Closers: b.closers}
}

// closers closes each in turn and joins their errors.
type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// Main is a program's main: it loads the configuration from the
// environment (a bad variable is named on stderr, exit 1), turns tracing
// on as the OTEL variables say (export.Setup, passed by the main so that
// only the mains link the exporters), builds the program, runs it until
// SIGINT or SIGTERM, closes it and flushes its spans. It returns the exit
// code.
func Main[C any, P Program](name string, load func(config.Lookup) (C, error), build func(C, io.Writer) P, tracing telemetry.Setup) int {
	cfg, err := load(os.LookupEnv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: configuration:\n%v\n", name, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopTracing, err := tracing(ctx, "seckill-"+name, os.LookupEnv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: tracing: %v\n", name, err)
		return 1
	}
	defer func() {
		// The spans of the last seconds, before the process ends.
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stopTracing(sctx); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		}
	}()
	if err := Serve(ctx, build(cfg, os.Stderr)); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	return 0
}

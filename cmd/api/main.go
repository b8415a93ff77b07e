// Command api is the HTTP flash-sale API. See README.md for its settings.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/seckill/seckill/internal/api"
	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/daemon"
	"github.com/seckill/seckill/internal/envconfig"
	"github.com/seckill/seckill/internal/health"
	"github.com/seckill/seckill/internal/idgen"
	"github.com/seckill/seckill/internal/mysqldb"
	"github.com/seckill/seckill/internal/seckill"
)

type config struct {
	daemon.Common
	API     api.Config
	Seckill seckill.Config
}

func loadConfig(r *envconfig.Reader) (config, error) {
	c := config{Common: daemon.LoadCommon(r), API: api.LoadConfig(r), Seckill: seckill.LoadConfig(r)}
	return c, r.Err()
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := loadConfig(envconfig.New())
	if err != nil {
		return fmt.Errorf("configuration:\n%w", err)
	}
	logger := daemon.NewLogger(os.Stderr, cfg.LogFormat, cfg.LogLevel, "api")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	rdb := daemon.NewRedis(cfg.Common)
	db, err := mysqldb.Open(cfg.MySQLDSN)
	if err != nil {
		return fmt.Errorf("SECKILL_MYSQL_DSN: %w", err)
	}
	reg := daemon.NewRegistry()
	monitor := health.NewMonitor(logger, reg, health.Options{})
	cfg.WatchRedis(monitor, rdb)
	cfg.WatchMySQL(monitor, db)
	cfg.WatchKafka(monitor)

	store := seckill.NewStore(rdb, cfg.Seckill.KeyPrefix)
	orderWriter := broker.NewWriter(cfg.KafkaBrokers, cfg.Seckill.OrdersTopic)
	orderWriter.BatchTimeout = cfg.Seckill.PublishBatchWait
	publisher := seckill.NewPublisher(orderWriter, cfg.Seckill.PublishTimeout)
	orders := &seckill.Service{
		Store: store, IDs: idgen.New(rdb, "order", cfg.Seckill.IDBlock), Publisher: publisher,
		KafkaUp: func() bool { return monitor.Up(daemon.KafkaCheck) }, SoldOut: seckill.NewSoldOutCache(cfg.Seckill.SoldOutTTL), Logger: logger,
	}
	srv, err := api.Listen(cfg.API, api.Deps{Logger: logger, Monitor: monitor, Registry: reg, Redis: rdb, DB: db, Store: store, Seckill: orders, KeyPrefix: cfg.Seckill.KeyPrefix})
	if err != nil {
		return err
	}
	monitorCtx, stopMonitor := context.WithCancel(context.Background())
	go monitor.Run(monitorCtx)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve() }()
	logger.Info("api listening", "addr", "http://"+srv.Addr())

	select {
	case <-ctx.Done():
		logger.Info("shutting down", "timeout", cfg.ShutdownTimeout)
	case err := <-serveErr:
		stopMonitor()
		return err
	}
	return errors.Join(daemon.Shutdown(logger, cfg.ShutdownTimeout,
		daemon.Step{Name: "http server", Do: srv.Shutdown},
		daemon.Step{Name: "kafka publisher", Do: func(context.Context) error { return publisher.Close() }},
		daemon.Step{Name: "dependency monitor", Do: func(context.Context) error { stopMonitor(); return nil }},
		daemon.Step{Name: "mysql", Do: func(context.Context) error { return db.Close() }},
		daemon.Step{Name: "redis", Do: func(context.Context) error { return rdb.Close() }},
	), <-serveErr)
}

// Command order-writer consumes accepted orders from Kafka and writes them
// to MySQL. See README.md for its settings.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/daemon"
	"github.com/seckill/seckill/internal/envconfig"
	"github.com/seckill/seckill/internal/health"
	"github.com/seckill/seckill/internal/mysqldb"
)

type config struct {
	daemon.Common
	AdminAddr string
}

func loadConfig(r *envconfig.Reader) (config, error) {
	c := config{Common: daemon.LoadCommon(r), AdminAddr: r.HostPort("SECKILL_ADMIN_ADDR", "127.0.0.1:9101")}
	return c, r.Err()
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "order-writer:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := loadConfig(envconfig.New())
	if err != nil {
		return fmt.Errorf("configuration:\n%w", err)
	}
	logger := daemon.NewLogger(os.Stderr, cfg.LogFormat, cfg.LogLevel, "order-writer")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	rdb := daemon.NewRedis(cfg.Common)
	db, err := mysqldb.Open(cfg.MySQLDSN)
	if err != nil {
		return fmt.Errorf("SECKILL_MYSQL_DSN: %w", err)
	}
	reg := daemon.NewRegistry()
	monitor := health.NewMonitor(logger, reg, health.Options{})
	monitor.Add("kafka", strings.Join(cfg.KafkaBrokers, ","), func(ctx context.Context) error { return broker.Ping(ctx, cfg.KafkaBrokers) })
	monitor.Add("mysql", mysqldb.Addr(cfg.MySQLDSN), db.PingContext)
	monitor.Add("redis", cfg.RedisAddr, func(ctx context.Context) error { return rdb.Ping(ctx).Err() })

	d := daemon.Daemon{Logger: logger, Monitor: monitor, Registry: reg, AdminAddr: cfg.AdminAddr, ShutdownTimeout: cfg.ShutdownTimeout}
	return d.Run(ctx, nil,
		daemon.Step{Name: "mysql", Do: func(context.Context) error { return db.Close() }},
		daemon.Step{Name: "redis", Do: func(context.Context) error { return rdb.Close() }},
	)
}

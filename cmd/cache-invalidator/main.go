// Command cache-invalidator follows the MySQL binlog and deletes the Redis
// cache keys of changed rows. See README.md for its settings.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/binlog"
	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/daemon"
	"github.com/seckill/seckill/internal/envconfig"
	"github.com/seckill/seckill/internal/health"
)

type config struct {
	daemon.Common
	AdminAddr     string
	Binlog        binlog.Source
	Database      string
	PositionFile  string
	KeyPrefix     string
	RetryTopic    string
	DLQTopic      string
	Group         string
	MaxAttempts   int
	DeleteTimeout time.Duration
}

func loadConfig(r *envconfig.Reader) (config, error) {
	c := config{
		Common:    daemon.LoadCommon(r),
		AdminAddr: r.HostPort("SECKILL_ADMIN_ADDR", "127.0.0.1:9102"),
		Binlog: binlog.Source{
			Addr:     r.HostPort("SECKILL_BINLOG_ADDR", "127.0.0.1:13306"),
			User:     r.String("SECKILL_BINLOG_USER", "canal"),
			Password: r.String("SECKILL_BINLOG_PASSWORD", "canal"),
			Flavor:   r.OneOf("SECKILL_BINLOG_FLAVOR", "mariadb", "mariadb", "mysql"),
			ServerID: uint32(r.Int("SECKILL_BINLOG_SERVER_ID", 1001, 1, 1<<32-1)),
		},
		Database:      r.String("SECKILL_BINLOG_DATABASE", "seckill"),
		PositionFile:  r.String("SECKILL_BINLOG_POSITION_FILE", ".stack/cache-invalidator/position.json"),
		KeyPrefix:     r.String("SECKILL_KEY_PREFIX", ""),
		RetryTopic:    r.String("SECKILL_INVALIDATE_RETRY_TOPIC", "cache.invalidate.retry"),
		DLQTopic:      r.String("SECKILL_INVALIDATE_DLQ_TOPIC", "cache.invalidate.dlq"),
		Group:         r.String("SECKILL_INVALIDATE_GROUP", "seckill-cache-invalidator"),
		MaxAttempts:   r.Int("SECKILL_INVALIDATE_MAX_ATTEMPTS", 12, 1, 100),
		DeleteTimeout: r.Duration("SECKILL_INVALIDATE_DELETE_TIMEOUT", time.Second),
	}
	return c, r.Err()
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cache-invalidator:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := loadConfig(envconfig.New())
	if err != nil {
		return fmt.Errorf("configuration:\n%w", err)
	}
	logger := daemon.NewLogger(os.Stderr, cfg.LogFormat, cfg.LogLevel, "cache-invalidator")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	rdb := daemon.NewRedis(cfg.Common)
	binlogDB, err := cfg.Binlog.Open()
	if err != nil {
		return err
	}
	reg := daemon.NewRegistry()
	monitor := health.NewMonitor(logger, reg, health.Options{})
	monitor.Add("binlog", cfg.Binlog.Addr, func(ctx context.Context) error { return binlog.CheckServer(ctx, binlogDB) })
	cfg.WatchRedis(monitor, rdb)
	cfg.WatchKafka(monitor)

	metrics := binlog.NewMetrics(reg)
	retry, dlq := broker.NewWriter(cfg.KafkaBrokers, cfg.RetryTopic), broker.NewWriter(cfg.KafkaBrokers, cfg.DLQTopic)
	invalidator := &binlog.Invalidator{
		Source: cfg.Binlog, Database: cfg.Database, Mapping: binlog.Mapping(cfg.KeyPrefix), KeyPrefix: cfg.KeyPrefix,
		Redis: rdb, Retry: retry, Positions: &binlog.PositionFile{Path: cfg.PositionFile, Every: time.Second},
		DeleteTimeout: cfg.DeleteTimeout, Logger: logger, Metrics: metrics,
	}
	reader := kafka.NewReader(kafka.ReaderConfig{
		Brokers: cfg.KafkaBrokers, GroupID: cfg.Group, Topic: cfg.RetryTopic, StartOffset: kafka.FirstOffset, MaxWait: 500 * time.Millisecond,
	})
	retrier := &binlog.Retrier{
		Reader: reader, Retry: retry, DLQ: dlq, Redis: rdb, MaxAttempts: cfg.MaxAttempts,
		DeleteTimeout: cfg.DeleteTimeout, Logger: logger, Metrics: metrics,
	}

	d := daemon.Daemon{Logger: logger, Monitor: monitor, Registry: reg, AdminAddr: cfg.AdminAddr, ShutdownTimeout: cfg.ShutdownTimeout}
	return d.Run(ctx, []daemon.Worker{{Name: "binlog invalidator", Run: invalidator.Run}, {Name: "retry consumer", Run: retrier.Run}},
		daemon.Step{Name: "kafka", Do: func(context.Context) error { return errors.Join(reader.Close(), retry.Close(), dlq.Close()) }},
		daemon.Step{Name: "binlog source", Do: func(context.Context) error { return binlogDB.Close() }},
		daemon.Step{Name: "redis", Do: func(context.Context) error { return rdb.Close() }},
	)
}

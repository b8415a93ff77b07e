// Command order-writer consumes accepted orders from Kafka and writes them
// to MySQL. See README.md for its settings.
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

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/daemon"
	"github.com/seckill/seckill/internal/envconfig"
	"github.com/seckill/seckill/internal/health"
	"github.com/seckill/seckill/internal/mysqldb"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/seckill"
)

type config struct {
	daemon.Common
	Seckill   seckill.Config
	AdminAddr string
	Group     string
	BatchSize int
	BatchWait time.Duration
}

func loadConfig(r *envconfig.Reader) (config, error) {
	c := config{
		Common:    daemon.LoadCommon(r),
		Seckill:   seckill.LoadConfig(r),
		AdminAddr: r.HostPort("SECKILL_ADMIN_ADDR", "127.0.0.1:9101"),
		Group:     r.String("SECKILL_ORDER_GROUP", "seckill-order-writer"),
		BatchSize: r.Int("SECKILL_ORDER_BATCH_SIZE", 2000, 1, 10000),
		BatchWait: r.Duration("SECKILL_ORDER_BATCH_WAIT", 20*time.Millisecond),
	}
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
	cfg.WatchKafka(monitor)
	cfg.WatchMySQL(monitor, db)
	cfg.WatchRedis(monitor, rdb)

	store := seckill.NewStore(rdb, cfg.Seckill.KeyPrefix)
	reader := kafka.NewReader(kafka.ReaderConfig{
		Brokers: cfg.KafkaBrokers, GroupID: cfg.Group, Topic: cfg.Seckill.OrdersTopic,
		StartOffset: kafka.FirstOffset, MaxBytes: 16 << 20, MaxWait: 200 * time.Millisecond,
		QueueCapacity: cfg.BatchSize, ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) {
			logger.Warn("kafka reader: " + fmt.Sprintf(msg, args...))
		}),
	})
	dlq := broker.NewWriter(cfg.KafkaBrokers, cfg.Seckill.OrdersDLQ)
	writer := &order.Writer{
		Reader: reader, DLQ: dlq, DB: db, Store: store, BatchSize: cfg.BatchSize, BatchWait: cfg.BatchWait,
		Logger: logger, Metrics: order.NewMetrics(reg),
	}
	relayPublisher := seckill.NewPublisher(broker.NewWriter(cfg.KafkaBrokers, cfg.Seckill.OrdersTopic), cfg.Seckill.PublishTimeout)
	relay := &seckill.Relay{
		Store: store, Publisher: relayPublisher, Age: cfg.Seckill.RelayAge, Interval: cfg.Seckill.RelayInterval,
		Batch: 1000, Logger: logger,
	}

	d := daemon.Daemon{Logger: logger, Monitor: monitor, Registry: reg, AdminAddr: cfg.AdminAddr, ShutdownTimeout: cfg.ShutdownTimeout}
	return d.Run(ctx, []daemon.Worker{{Name: "order writer", Run: writer.Run}, {Name: "reservation relay", Run: relay.Run}},
		daemon.Step{Name: "kafka reader", Do: func(context.Context) error { return reader.Close() }},
		daemon.Step{Name: "kafka writers", Do: func(context.Context) error { return errors.Join(dlq.Close(), relayPublisher.Close()) }},
		daemon.Step{Name: "mysql", Do: func(context.Context) error { return db.Close() }},
		daemon.Step{Name: "redis", Do: func(context.Context) error { return rdb.Close() }},
	)
}

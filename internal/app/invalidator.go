package app

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/binlog"
	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/daemon"
	"github.com/seckill/seckill/internal/schema"
	"github.com/seckill/seckill/internal/shop"
)

// CacheInvalidator is the cache-invalidator program: the binlog follower
// and the retry consumer.
type CacheInvalidator struct {
	cfg    config.CacheInvalidator
	logger *slog.Logger
	running
}

var _ Program = (*CacheInvalidator)(nil)

// NewCacheInvalidator is the cache-invalidator, logging to logs.
func NewCacheInvalidator(cfg config.CacheInvalidator, logs io.Writer) *CacheInvalidator {
	return &CacheInvalidator{cfg: cfg, logger: logger(logs, cfg.Common, "cache-invalidator")}
}

// Run opens Redis, the binlog source and Kafka, binds the admin address
// and starts the follower and the retry consumer.
func (m *CacheInvalidator) Run(ctx context.Context) error {
	c := m.cfg
	b, err := newBase(ctx, c.Common, m.logger)
	if err != nil {
		return err
	}
	binlogDB, err := c.Binlog.Open()
	if err != nil {
		return abandon(err, b.closers)
	}
	b.closeFirst(closer("binlog source", binlogDB))
	b.monitor.Add("binlog", c.Binlog.Addr, func(ctx context.Context) error { return binlog.CheckServer(ctx, binlogDB) })
	b.monitor.Add("schema", c.Binlog.Addr, schema.NewCheck(binlogDB, c.Database).Check)
	c.WatchKafka(b.monitor)

	caches, err := b.cacheRedis(c.CacheRedis, true)
	if err != nil {
		return abandon(err, b.closers)
	}
	keys := shop.Keys{Prefix: c.KeyPrefix}
	metrics := binlog.NewMetrics(b.reg)
	retryW, dlqW := broker.NewWriter(c.KafkaBrokers, c.RetryTopic), broker.NewWriter(c.KafkaBrokers, c.DLQTopic)
	reader := kafka.NewReader(broker.InGroup(kafka.ReaderConfig{
		Brokers: c.KafkaBrokers, GroupID: c.Group, Topic: c.RetryTopic, StartOffset: kafka.FirstOffset,
		MaxWait: broker.FetchMaxWait(500 * time.Millisecond),
	}))
	b.closeFirst(closer("kafka", closers{reader, retryW, dlqW}))
	retry, dlq := &broker.Forwarder{Writer: retryW, Logger: m.logger}, &broker.Forwarder{Writer: dlqW, Logger: m.logger}

	invalidator := &binlog.Invalidator{
		Source: c.Binlog, Database: c.Database, Mapping: binlog.Mapping(keys), Families: keys.Patterns(),
		Redis: caches, Retry: retry, Positions: &binlog.PositionFile{Path: c.PositionFile, Every: time.Second},
		DeleteTimeout: c.DeleteTimeout, Logger: m.logger, Metrics: metrics,
	}
	if c.ShopFilter > 0 {
		// The follower only adds: the API rebuilds the filter from MySQL.
		invalidator.Shops = shop.NewFilter(b.rdb, nil, keys, uint(c.ShopFilter), m.logger)
	}
	retrier := &binlog.Retrier{Retry: retry, DLQ: dlq, Redis: caches, MaxAttempts: c.MaxAttempts,
		DeleteTimeout: c.DeleteTimeout, Logger: m.logger, Metrics: metrics}
	retries := &broker.Consumer{Name: "cache retries", Reader: reader, Handle: retrier.Handle, Logger: m.logger,
		Stuck: broker.NewStuckMetric(b.reg).WithLabelValues("cache retries")}

	lag := &broker.LagWatch{Progress: &broker.Progress{Brokers: c.KafkaBrokers, Group: c.Group, Topic: c.RetryTopic},
		Gauge: broker.NewLagMetric(b.reg).WithLabelValues("cache retries"), Interval: lagInterval, Logger: m.logger}

	m.d = b.daemon(c.Common, c.AdminAddr,
		daemon.Worker{Name: "binlog invalidator", Run: invalidator.Run}, daemon.Worker{Name: "retry consumer", Run: retries.Run},
		daemon.Worker{Name: "consumer lag", Run: lag.Run})
	if err := m.d.Start(); err != nil {
		return abandon(err, b.closers)
	}
	return nil
}

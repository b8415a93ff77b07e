package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/daemon"
	"github.com/seckill/seckill/internal/draw"
	"github.com/seckill/seckill/internal/drawstate"
	"github.com/seckill/seckill/internal/gate"
	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/orderdb"
	"github.com/seckill/seckill/internal/orderwriter"
	"github.com/seckill/seckill/internal/outbox"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/internal/relay"
	"github.com/seckill/seckill/internal/replid"
	"github.com/seckill/seckill/internal/salerecords"
	"github.com/seckill/seckill/internal/salerepair"
	"github.com/seckill/seckill/internal/salestate"
)

// reconcilePoll is how often a reconcile reads the writer's committed
// offsets while it waits for the writer (twice per reconcile, the sale
// paused for the second): a failed-over master's sales sell again only
// after it, so a wait of 200 ms per poll was most of their pause after
// the promotion. One OffsetFetch per poll, only while a reconcile waits.
const reconcilePoll = 50 * time.Millisecond

// OrderWriter is the order-writer program: the orders consumer and the
// reservation relay.
type OrderWriter struct {
	cfg    config.OrderWriter
	logger *slog.Logger
	running
}

var _ Program = (*OrderWriter)(nil)

// NewOrderWriter is the order-writer, logging to logs.
func NewOrderWriter(cfg config.OrderWriter, logs io.Writer) *OrderWriter {
	return &OrderWriter{cfg: cfg, logger: logger(logs, cfg.Common, "order-writer")}
}

// Run opens Redis, MySQL and Kafka, binds the admin address and starts
// the consumer and the relay.
func (m *OrderWriter) Run(ctx context.Context) error {
	c := m.cfg
	b, db, err := newSaleBase(ctx, c.Common, m.logger, true)
	if err != nil {
		return err
	}
	sales := salestate.New(b.rdb, c.Sale.KeyPrefix)
	repair := salerepair.New(sales)

	reader := kafka.NewReader(broker.InGroup(kafka.ReaderConfig{
		Brokers: c.KafkaBrokers, GroupID: c.Group, Topic: c.Sale.OrdersTopic,
		// A fetch waits for 64 KB (about 700 events) or FetchWait,
		// whichever comes first: fewer, fuller fetches for the broker, at
		// most FetchWait more on the way to MySQL. Each partition is
		// fetched on its own, so FetchWait is also how often an idle one
		// costs the broker a request. FetchMaxWait: the reader waits a
		// second beyond the broker's wait, or a late answer reconnects.
		StartOffset: kafka.FirstOffset, MaxBytes: 16 << 20, MinBytes: 64 << 10, MaxWait: broker.FetchMaxWait(c.FetchWait),
		QueueCapacity: c.BatchSize, ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) {
			m.logger.Warn("kafka reader: " + fmt.Sprintf(msg, args...))
		}),
	}))
	dlq := broker.NewWriter(c.KafkaBrokers, c.Sale.OrdersDLQ)
	relayPublisher := broker.NewOrderPublisher(broker.NewProducer(c.KafkaBrokers, c.Sale.OrdersTopic, 0), c.Sale.PublishTimeout)
	b.closeFirst(closer("kafka writers", closers{dlq, relayPublisher}))
	b.closeFirst(closer("kafka reader", reader))

	progress := &broker.Progress{Brokers: c.KafkaBrokers, Group: c.Group, Topic: c.Sale.OrdersTopic}
	guard := reconcile.NewGuard(&reconcile.Reconciler{Sale: repair, Records: &orderdb.Orders{DB: db}, Backlog: progress,
		Locks: lock.New(b.rdb, c.Sale.KeyPrefix),
		IDs:   orderIDs(b.rdb, c.Sale), Wait: time.Minute, Poll: reconcilePoll, Logger: m.logger}, 2*time.Minute, b.reg)
	b.closeFirst(closer("reconciles", guard))
	writer := &orderwriter.Writer{DB: db, DeadLetters: &broker.Forwarder{Writer: dlq, Logger: m.logger}, Reservations: sales, Records: salerecords.New(sales),
		Logger: m.logger, Metrics: orderwriter.NewMetrics(b.reg), Sale: repair, Guard: guard}
	// Before the guard its checks report to, and Redis.
	b.closeFirst(closer("order-writer's Redis steps", writer))
	consumer := &broker.Consumer{Name: "orders", Reader: reader, Handle: writer.Handle,
		BatchSize: c.BatchSize, BatchWait: c.BatchWait, StuckAfter: c.StuckAfter, Logger: m.logger,
		Stuck: broker.NewStuckMetric(b.reg).WithLabelValues("orders")}
	relayWorker := &relay.Relay{Store: outbox.New(sales), Transfers: gate.New(sales), Publisher: relayPublisher,
		Backlog: progress,
		Locks:   lock.New(b.rdb, c.Sale.KeyPrefix), LeaseTTL: c.Sale.RelayLease,
		Age: c.Sale.RelayAge, Interval: c.Sale.RelayInterval, Batch: 1000, Keep: c.Sale.SaleKeep, Logger: m.logger}
	drawer := &draw.Drawer{Sales: drawstate.New(sales), Records: orderdb.DrawRecords{DB: db}, Publisher: relayPublisher,
		Locks: lock.New(b.rdb, c.Sale.KeyPrefix), LeaseTTL: c.Sale.RelayLease, Interval: c.Sale.DrawInterval, Logger: m.logger}
	relayed := prometheus.NewCounter(prometheus.CounterOpts{Name: "seckill_relay_republished_total",
		Help: "Reservations whose order events never reached Kafka, republished by the relay."})
	b.reg.MustRegister(relayed)
	relayWorker.Relayed = func(n int) { relayed.Add(float64(n)) }
	lag := &broker.LagWatch{Progress: progress, Gauge: broker.NewLagMetric(b.reg).WithLabelValues("orders"),
		Interval: lagInterval, Logger: m.logger}

	checkErrors := prometheus.NewCounter(prometheus.CounterOpts{Name: "seckill_sale_check_errors_total",
		Help: "Vouchers whose periodic sale check could not be made (the others were checked)."})
	b.reg.MustRegister(checkErrors)
	checks := &orderwriter.SaleChecks{DB: db, Sale: repair, Guard: guard, Interval: c.SaleChecks, Logger: m.logger, Errors: checkErrors}
	// A new replication id pauses every sale at the gate: check them all at
	// once, which reconciles them.
	epoch := replid.NewWatcher(b.rdb, c.Sale.EpochInterval, m.logger).CountChanges(b.reg)
	epoch.OnChange = checks.Now

	m.d = b.daemon(c.Common, c.AdminAddr,
		daemon.Worker{Name: "order writer", Run: consumer.Run}, daemon.Worker{Name: "reservation relay", Run: relayWorker.Run},
		daemon.Worker{Name: "drawer", Run: drawer.Run},
		daemon.Worker{Name: "sale checks", Run: checks.Run}, daemon.Worker{Name: "redis epoch", Run: epoch.Run},
		daemon.Worker{Name: "consumer lag", Run: lag.Run})
	if err := m.d.Start(); err != nil {
		return abandon(err, b.closers)
	}
	return nil
}

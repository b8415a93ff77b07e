package order

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/seckill"
)

// Writer is the order-writer's consumer: batches of order events from the
// group, one MySQL transaction per batch, offsets committed only after the
// transaction.
type Writer struct {
	Reader    *kafka.Reader
	DLQ       *kafka.Writer // undecodable events go here, with the reason
	DB        *sql.DB
	Store     *seckill.Store // reservations to confirm
	BatchSize int
	BatchWait time.Duration // how long a batch waits to fill after its first event
	Logger    *slog.Logger
	Metrics   *Metrics
}

// Metrics are the writer's counters.
type Metrics struct {
	inserted, already prometheus.Counter
	failed            *prometheus.CounterVec
	deadLettered      prometheus.Counter
	batch             prometheus.Histogram
	lag               prometheus.Histogram
}

// NewMetrics registers the writer's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		inserted:     prometheus.NewCounter(prometheus.CounterOpts{Name: "seckill_orders_inserted_total", Help: "Orders written to tb_voucher_order."}),
		already:      prometheus.NewCounter(prometheus.CounterOpts{Name: "seckill_orders_redelivered_total", Help: "Order events already settled (redeliveries)."}),
		failed:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_orders_failed_total", Help: "Accepted orders MySQL refused, by reason."}, []string{"reason"}),
		deadLettered: prometheus.NewCounter(prometheus.CounterOpts{Name: "seckill_order_events_dead_lettered_total", Help: "Order events sent to the dead-letter topic: undecodable, or their order id held by another order."}),
		batch:        prometheus.NewHistogram(prometheus.HistogramOpts{Name: "seckill_order_batch_size", Help: "Events per batch.", Buckets: prometheus.ExponentialBuckets(1, 2, 14)}),
		lag:          prometheus.NewHistogram(prometheus.HistogramOpts{Name: "seckill_order_lag_seconds", Help: "From acceptance in Redis to commit in MySQL.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
	}
	reg.MustRegister(m.inserted, m.already, m.failed, m.deadLettered, m.batch, m.lag)
	return m
}

// Run consumes until ctx ends, in three stages joined by channels of one
// batch: while one batch is in its MySQL transaction, the next is fetched
// and decoded, and the one before has its reservations confirmed and its
// offsets committed, in order. On shutdown the batches MySQL already took
// are still committed (within commitGrace); an in-flight transaction is
// abandoned and its batch delivered again, which Apply's idempotency makes
// harmless.
func (w *Writer) Run(ctx context.Context) error {
	prepared := make(chan preparedBatch, 1)
	settled := make(chan settledBatch, 1)
	prepareCtx, stopPreparing := context.WithCancel(ctx)
	defer stopPreparing()
	preparerDone := make(chan error, 1)
	go func() { preparerDone <- w.prepare(prepareCtx, prepared) }()
	committerDone := make(chan error, 1)
	go func() { committerDone <- w.committer(ctx, settled) }()

	err := w.consume(ctx, prepared, settled)
	stopPreparing()
	close(settled)
	return errors.Join(err, <-preparerDone, <-committerDone)
}

// preparedBatch is a fetched batch: its messages, and the events of those
// that decoded (the others are on the dead-letter topic); events[i] came
// from msgs[origin[i]].
type preparedBatch struct {
	msgs   []kafka.Message
	events []seckill.OrderEvent
	origin []int
}

// messageOf is the message event e came from.
func (p preparedBatch) messageOf(e seckill.OrderEvent) kafka.Message {
	i := slices.Index(p.events, e)
	return p.msgs[p.origin[i]]
}

// errIDCollision is why an order whose id another order holds goes to the
// dead-letter topic.
var errIDCollision = errors.New("order id already held by another order: the id generator repeated it (did Redis lose its last writes?)")

// settledBatch is a batch MySQL has committed: its reservations to confirm
// and its messages to commit.
type settledBatch struct {
	reservations []seckill.Reservation
	msgs         []kafka.Message
}

// commitGrace bounds the commits of already-settled batches at shutdown.
const commitGrace = 5 * time.Second

// prepare fetches and decodes batches until ctx ends. A batch it could not
// hand over is simply not committed: it is delivered again.
func (w *Writer) prepare(ctx context.Context, prepared chan<- preparedBatch) error {
	defer close(prepared)
	for {
		msgs, err := w.fetch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// The reader reconnects by itself; pause so a persistent
			// error does not spin.
			w.Logger.Warn("fetching order events failed; retrying", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
			continue
		}
		batch, err := w.decode(ctx, msgs)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case prepared <- batch:
		case <-ctx.Done():
			return nil
		}
	}
}

// consume writes the prepared batches into MySQL, one transaction each,
// until prepare stops or ctx ends.
func (w *Writer) consume(ctx context.Context, prepared <-chan preparedBatch, settled chan<- settledBatch) error {
	for p := range prepared {
		batch, err := w.settle(ctx, p)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case settled <- batch:
		case <-ctx.Done():
			// MySQL has it; commit it anyway so a restart does not
			// redeliver it.
			settled <- batch
			return nil
		}
	}
	return nil
}

func (w *Writer) committer(ctx context.Context, settled <-chan settledBatch) error {
	for b := range settled {
		cctx := ctx
		if ctx.Err() != nil {
			var cancel context.CancelFunc
			cctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), commitGrace)
			defer cancel()
		}
		// A reservation left unconfirmed is only republished by the relay
		// and settled again as a redelivery: log, do not stop.
		if err := w.Store.Confirm(cctx, b.reservations); err != nil {
			w.Logger.Warn("confirm reservations in Redis failed; the relay will redeliver them", "count", len(b.reservations), "err", err)
		}
		if err := w.commit(cctx, b.msgs); err != nil {
			if cctx.Err() != nil {
				// Shutting down: the batch is delivered again later.
				for range settled {
				}
				return nil
			}
			return err
		}
	}
	return nil
}

// fetch blocks for a first message, then takes what arrives within
// BatchWait, up to BatchSize.
func (w *Writer) fetch(ctx context.Context) ([]kafka.Message, error) {
	first, err := w.Reader.FetchMessage(ctx)
	if err != nil {
		return nil, err
	}
	msgs := []kafka.Message{first}
	fill, cancel := context.WithTimeout(ctx, w.BatchWait)
	defer cancel()
	for len(msgs) < w.BatchSize {
		m, err := w.Reader.FetchMessage(fill)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			break
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// decode turns a batch into events and dead-letters what cannot be decoded.
func (w *Writer) decode(ctx context.Context, msgs []kafka.Message) (preparedBatch, error) {
	b := preparedBatch{msgs: msgs, events: make([]seckill.OrderEvent, 0, len(msgs)), origin: make([]int, 0, len(msgs))}
	for i, m := range msgs {
		e, err := seckill.DecodeOrderEvent(m.Value)
		if err != nil {
			if err := w.deadLetter(ctx, m, err); err != nil {
				return b, err
			}
			continue
		}
		b.events = append(b.events, e)
		b.origin = append(b.origin, i)
	}
	return b, nil
}

// settle writes a prepared batch's events into MySQL.
func (w *Writer) settle(ctx context.Context, p preparedBatch) (settledBatch, error) {
	b := settledBatch{msgs: p.msgs}
	if len(p.events) == 0 {
		return b, nil
	}
	out, err := w.applyWithRetry(ctx, p.events)
	if err != nil {
		return b, err
	}
	w.record(p.events, out)
	// Parked with the reason, and their reservations confirmed below like
	// the rest: left pending, the relay would bring them back forever.
	for _, e := range out.Collided {
		w.Logger.Error("an accepted order's id is held by another order; the order is on the dead-letter topic",
			"order", e.OrderID, "user", e.UserID, "voucher", e.VoucherID)
		if err := w.deadLetter(ctx, p.messageOf(e), errIDCollision); err != nil {
			return b, err
		}
	}
	b.reservations = make([]seckill.Reservation, len(p.events))
	for i, e := range p.events {
		b.reservations[i] = e.Reservation()
	}
	return b, nil
}

// commit retries until Kafka stores the offsets or ctx ends; a batch whose
// commit never happened is delivered again and settles as a redelivery.
func (w *Writer) commit(ctx context.Context, msgs []kafka.Message) error {
	policy := backoff.WithContext(backoff.NewExponentialBackOff(backoff.WithMaxElapsedTime(0), backoff.WithMaxInterval(5*time.Second)), ctx)
	logged := false
	err := backoff.Retry(func() error {
		err := w.Reader.CommitMessages(ctx, msgs...)
		if err != nil && !logged && ctx.Err() == nil {
			w.Logger.Error("committing order offsets failed; retrying", "events", len(msgs), "err", err)
			logged = true
		}
		return err
	}, policy)
	if err != nil {
		return fmt.Errorf("commit %d order events: %w", len(msgs), err)
	}
	return nil
}

// applyWithRetry retries a batch until MySQL takes it or ctx ends: nothing
// is committed to Kafka and nothing is skipped while MySQL is down.
func (w *Writer) applyWithRetry(ctx context.Context, events []seckill.OrderEvent) (Outcome, error) {
	policy := backoff.NewExponentialBackOff()
	policy.InitialInterval, policy.MaxInterval, policy.MaxElapsedTime = 100*time.Millisecond, 5*time.Second, 0
	failing := false
	for {
		out, err := Apply(ctx, w.DB, events)
		if err == nil {
			if failing {
				w.Logger.Info("MySQL takes order batches again")
			}
			return out, nil
		}
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		wait := policy.NextBackOff()
		if !failing {
			w.Logger.Error("order batch failed; retrying with backoff, nothing committed or skipped",
				"events", len(events), "err", err)
			failing = true
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(wait):
		}
	}
}

func (w *Writer) record(events []seckill.OrderEvent, out Outcome) {
	if w.Metrics == nil {
		return
	}
	m := w.Metrics
	m.batch.Observe(float64(len(events)))
	m.inserted.Add(float64(out.Inserted))
	m.already.Add(float64(out.Already))
	for reason, n := range out.Failed {
		m.failed.WithLabelValues(reason).Add(float64(n))
	}
	now := time.Now()
	for _, e := range events {
		m.lag.Observe(now.Sub(time.UnixMilli(e.AcceptedAt)).Seconds())
	}
}

// deadLetter parks an event the writer cannot settle (undecodable, or its
// order id held by another order) with the reason and where it came from,
// retrying until the dead-letter topic takes it or ctx ends.
func (w *Writer) deadLetter(ctx context.Context, m kafka.Message, reason error) error {
	dl := kafka.Message{Key: m.Key, Value: m.Value, Headers: []kafka.Header{
		{Key: "error", Value: []byte(reason.Error())},
		{Key: "topic", Value: []byte(m.Topic)},
		{Key: "partition", Value: []byte(strconv.Itoa(m.Partition))},
		{Key: "offset", Value: []byte(strconv.FormatInt(m.Offset, 10))},
	}}
	policy := backoff.WithContext(backoff.NewExponentialBackOff(backoff.WithMaxElapsedTime(0)), ctx)
	err := backoff.Retry(func() error {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return w.DLQ.WriteMessages(wctx, dl)
	}, policy)
	if err != nil {
		return fmt.Errorf("dead-letter order event at %s/%d/%d: %w", m.Topic, m.Partition, m.Offset, errors.Join(err, ctx.Err()))
	}
	w.Logger.Warn("order event sent to the dead-letter topic", "topic", m.Topic,
		"partition", m.Partition, "offset", m.Offset, "reason", reason)
	if w.Metrics != nil {
		w.Metrics.deadLettered.Inc()
	}
	return nil
}

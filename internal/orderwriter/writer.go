// Package orderwriter is the order-writer's work: it consumes the order
// events in batches (broker.Consumer), settles each batch in one MySQL
// transaction (orderdb.Apply), parks what it cannot settle on the
// dead-letter topic, and confirms the settled orders' reservations.
package orderwriter

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/codes"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/orderdb"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/internal/sale"
)

// Writer settles batches of order events.
type Writer struct {
	DB           *sql.DB
	DeadLetters  *broker.Forwarder // undecodable events, id collisions and rows MySQL refuses, with the reason
	Reservations order.Confirmer   // the settled orders' reservations to remove
	// Records keeps each settled order's status where lookups read it
	// while its sale runs; nil records nothing (lookups then read MySQL).
	Records order.SettledRecorder
	Logger  *slog.Logger
	Metrics *Metrics
	// Sale and Guard check, after each batch, that Redis still holds what
	// MySQL just committed; nil Guard skips the check.
	Sale  SaleInspector
	Guard *reconcile.Guard

	settlingOnce sync.Once
	settling     chan struct{}  // a slot per batch whose Redis steps run (settle)
	settles      sync.WaitGroup // the steps still running (Close)
	slowSince    time.Time      // when settle last said a batch went on without its steps
}

// SaleInspector reads a voucher's sale in Redis: whether it is there, its
// stock, and which of users are not among its buyers.
type SaleInspector interface {
	Inspect(ctx context.Context, voucherID int64, users []int64) (exists bool, stock int64, missing []int64, err error)
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
		deadLettered: prometheus.NewCounter(prometheus.CounterOpts{Name: "seckill_order_events_dead_lettered_total", Help: "Order events sent to the dead-letter topic: undecodable, their order id held by another order, or their row refused by MySQL."}),
		batch:        prometheus.NewHistogram(prometheus.HistogramOpts{Name: "seckill_order_batch_size", Help: "Events per batch.", Buckets: prometheus.ExponentialBuckets(1, 2, 14)}),
		lag:          prometheus.NewHistogram(prometheus.HistogramOpts{Name: "seckill_order_lag_seconds", Help: "From acceptance in Redis to commit in MySQL.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
	}
	reg.MustRegister(m.inserted, m.already, m.failed, m.deadLettered, m.batch, m.lag)
	// Each reason's series exists from the start at 0, so that an alert on
	// increase() sees the first refusal (a series born at 1 shows none).
	for _, reason := range []string{order.ReasonSoldOut, order.ReasonDuplicateUser, order.ReasonUnknownVoucher} {
		m.failed.WithLabelValues(reason)
	}
	return m
}

// ErrIDCollision is why an order whose id another order holds goes to the
// dead-letter topic.
var ErrIDCollision = errors.New("order id already held by another order: the id generator repeated it (did Redis lose its last writes?)")

// Handle settles one batch: the broker.Consumer's handler. An error (a
// transient one: the connection, a deadlock, a lock wait, a read-only
// server) leaves the batch to be tried again whole, which Apply's
// idempotency makes harmless; nothing is dead-lettered before MySQL has
// taken the rest of the batch. An event that can never be settled (it
// does not decode, its id is another order's, MySQL refuses its row) goes
// to the dead-letter topic, so that it cannot hold the orders behind it.
//
// Each try is a span of a trace of its own, linked to the trace of every
// order in the batch (one batch, many requests: links, not a parent); its
// statements and Redis calls are its children (Redis calls that outlive
// settleWait end after it).
func (w *Writer) Handle(ctx context.Context, msgs []kafka.Message) (err error) {
	ctx, span := broker.StartProcess(ctx, msgs[0].Topic, msgs)
	defer func() {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	events := make([]order.Event, 0, len(msgs))
	origin := make(map[order.Event]kafka.Message, len(msgs))
	var undecodable []kafka.Message
	var reasons []error
	for _, m := range msgs {
		e, err := broker.DecodeOrder(m.Value)
		if err != nil {
			undecodable, reasons = append(undecodable, m), append(reasons, err)
			continue
		}
		events = append(events, e)
		origin[e] = m
	}
	var out orderdb.Outcome
	var refused []refusal
	if len(events) > 0 {
		var err error
		if out, refused, err = w.apply(ctx, events); err != nil {
			return err
		}
		w.record(events, out)
	}
	for i, m := range undecodable {
		if err := w.deadLetter(ctx, m, reasons[i]); err != nil {
			return err
		}
	}
	for _, r := range refused {
		w.Logger.Error("MySQL refused an accepted order's row; the order is on the dead-letter topic",
			"order", r.event.OrderID, "user", r.event.UserID, "voucher", r.event.VoucherID, "err", r.err)
		if err := w.deadLetter(ctx, origin[r.event], fmt.Errorf("%w: %w", ErrRefused, r.err)); err != nil {
			return err
		}
	}
	// Parked with the reason, and their reservations confirmed below like
	// the rest: left pending, the relay would bring them back forever.
	for _, e := range out.Collided {
		w.Logger.Error("an accepted order's id is held by another order; the order is on the dead-letter topic",
			"order", e.OrderID, "user", e.UserID, "voucher", e.VoucherID)
		if err := w.deadLetter(ctx, origin[e], ErrIDCollision); err != nil {
			return err
		}
	}
	w.settle(ctx, events, out)
	return nil
}

// settleWait bounds how long a batch waits for its Redis steps. A master
// that froze holds each call until the client's read timeout (1 s, tried
// again after it: go-redis reads past a context's deadline), and a batch
// waiting for three such calls held its offsets for seconds, which a
// reconcile after the master's failover waits for: the failed-over
// master's sales waited with it (TestChaosClusterMasterFrozen). Past
// settleWait the batch goes on and the steps finish or fail on their own;
// each may land late or never: a status not recorded is read from MySQL, a
// reservation not confirmed is republished by the relay and settled again
// as a redelivery (the relay may also republish one whose confirmation is
// still on its way: relay.Relay), a check not made is made by a later
// batch or the periodic sale check.
const settleWait = 200 * time.Millisecond

// maxSettling bounds the batches whose Redis steps still run after their
// batch went on; past it a batch waits for a slot, and a master that stays
// frozen slows the writer to the pace of its timeouts. 16 covers the four
// seconds or so a frozen master takes to be failed over at the writer's
// pace of a few batches a second: with 4 the writer fell behind during the
// freeze, and the reconcile after the promotion waited for its backlog
// (0.73–1.03 s from the promotion to the sales selling again, against
// 0.57–0.87 s with 16; three runs each).
const maxSettling = 16

// settle runs the batch's Redis steps, waiting for them up to settleWait.
func (w *Writer) settle(ctx context.Context, events []order.Event, out orderdb.Outcome) {
	w.settlingOnce.Do(func() { w.settling = make(chan struct{}, maxSettling) })
	select {
	case w.settling <- struct{}{}:
	case <-ctx.Done():
		return
	}
	committed := time.Now()
	done := make(chan struct{})
	w.settles.Add(1)
	go func() {
		defer w.settles.Done()
		defer close(done)
		defer func() { <-w.settling }()
		// Recorded before the reservations go, so that a lookup finds the
		// order in one or the other; a status not recorded is read from
		// MySQL.
		if w.Records != nil {
			if err := w.Records.RecordSettled(ctx, out.Settled); err != nil && ctx.Err() == nil {
				w.Logger.Warn("record settled orders in Redis failed; their lookups read MySQL", "count", len(out.Settled), "err", err)
			}
		}
		// A reservation left unconfirmed is only republished by the relay
		// and settled again as a redelivery: log, do not fail the batch.
		if err := w.Reservations.Confirm(ctx, events); err != nil && ctx.Err() == nil {
			w.Logger.Warn("confirm reservations in Redis failed; the relay will redeliver them", "count", len(events), "err", err)
		}
		w.check(ctx, out, time.Since(committed) <= settleWait)
	}()
	t := time.NewTimer(settleWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		// Once per episode: during a freeze every batch goes on so.
		if time.Since(w.slowSince) > time.Minute {
			w.Logger.Warn("a batch's Redis steps (statuses, reservations, check) take longer than settleWait: batches go on without them (said once a minute)",
				"orders", len(events), "wait", settleWait)
			w.slowSince = time.Now()
		}
	case <-ctx.Done():
	}
}

// settleDrain bounds how long Close waits for the Redis steps still
// running: a call to a frozen master ends within its read timeouts and
// retries, about 3 s.
const settleDrain = 5 * time.Second

// Close waits for the batches' Redis steps still running, up to
// settleDrain: the guard their check reports to, and the Redis client,
// close after the writer. Steps still running then are given up, which
// their batches allow (settle).
func (w *Writer) Close() error {
	done := make(chan struct{})
	go func() {
		w.settles.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(settleDrain):
		return fmt.Errorf("the Redis steps of a batch still run after %v: given up (the relay redelivers an unconfirmed reservation)", settleDrain)
	}
}

// check compares Redis with what this batch committed, per voucher with
// new orders, in one round trip each: the sale is there, its stock is not
// above MySQL's, and every user just confirmed is a buyer. Redis that lost
// writes (a failover to a lagging replica, a restore) breaks one of them;
// the guard then reconciles the voucher from MySQL. A check that cannot
// read Redis is skipped: the next batch checks again.
//
// fresh is false for a check made later than settleWait after the commit
// (its Redis was slow): MySQL's stock it compares with may have moved
// since (an admin's restock), so the stock is not compared then.
func (w *Writer) check(ctx context.Context, out orderdb.Outcome, fresh bool) {
	if w.Guard == nil || len(out.New) == 0 {
		return
	}
	users := map[int64][]int64{}
	for _, e := range out.New {
		users[e.VoucherID] = append(users[e.VoucherID], e.UserID)
	}
	for voucher, us := range users {
		exists, stock, missing, err := w.Sale.Inspect(ctx, voucher, us)
		switch {
		case err != nil:
			w.Logger.Warn("checking Redis against the batch failed; the next batch checks again", "voucher", voucher, "err", err)
		case !exists:
			w.Guard.Violated(voucher, sale.CheckVoucherMissing)
		case fresh && stock > out.Stock[voucher]:
			w.Guard.Violated(voucher, sale.CheckStockAboveMySQL, "redis_stock", stock, "mysql_stock", out.Stock[voucher])
		case len(missing) > 0:
			w.Guard.Violated(voucher, sale.CheckBuyersLost, lostUsers(missing)...)
		}
	}
}

// loggedUsers is how many of the users Redis lost one log line names: a
// sale rebuilt without its buyers lost all of them, and a line naming
// 200,000 users was 1.8 MB.
const loggedUsers = 20

// lostUsers is the log's detail of the users Redis lost: how many, and
// the first loggedUsers of them.
func lostUsers(missing []int64) []any {
	return []any{"users_lost", len(missing), "users", missing[:min(len(missing), loggedUsers)]}
}

// ErrRefused is why an order whose row MySQL refuses (a data error, a
// constraint) goes to the dead-letter topic instead of stalling its
// partition: the same row would be refused on every try.
var ErrRefused = errors.New("MySQL refused the order's row")

type refusal struct {
	event order.Event
	err   error
}

// apply settles events in one transaction. When MySQL refuses a row of it
// (orderdb.Refused), which row is unknown: the events are then settled one
// by one, in acceptance order as Apply would, and the refused ones
// returned. Any other error is the batch's to retry.
func (w *Writer) apply(ctx context.Context, events []order.Event) (orderdb.Outcome, []refusal, error) {
	out, err := orderdb.Apply(ctx, w.DB, events)
	if !orderdb.Refused(err) {
		return out, nil, err
	}
	w.Logger.Warn("MySQL refused a row of an order batch; settling its events one by one", "events", len(events), "err", err)
	events = slices.Clone(events)
	slices.SortStableFunc(events, func(a, b order.Event) int { return cmp.Compare(a.AcceptedAt, b.AcceptedAt) })
	out = orderdb.Outcome{Failed: map[string]int{}, Stock: map[int64]int64{}}
	var refused []refusal
	for _, e := range events {
		one, err := orderdb.Apply(ctx, w.DB, []order.Event{e})
		switch {
		case orderdb.Refused(err):
			refused = append(refused, refusal{e, err})
			continue
		case err != nil:
			return orderdb.Outcome{}, nil, err
		}
		out.Inserted += one.Inserted
		out.Already += one.Already
		out.New = append(out.New, one.New...)
		out.Settled = append(out.Settled, one.Settled...)
		out.Collided = append(out.Collided, one.Collided...)
		maps.Copy(out.Stock, one.Stock)
		for reason, n := range one.Failed {
			out.Failed[reason] += n
		}
	}
	return out, refused, nil
}

func (w *Writer) deadLetter(ctx context.Context, m kafka.Message, reason error) error {
	if err := w.DeadLetters.Forward(ctx, m, 1, reason); err != nil {
		return err
	}
	w.Logger.Warn("order event sent to the dead-letter topic", "topic", m.Topic,
		"partition", m.Partition, "offset", m.Offset, "reason", reason)
	if w.Metrics != nil {
		w.Metrics.deadLettered.Inc()
	}
	return nil
}

func (w *Writer) record(events []order.Event, out orderdb.Outcome) {
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

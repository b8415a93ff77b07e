// Package relay runs the reservation relay, a leased worker of the
// order-writer: it republishes the reservations whose order events never
// reached Kafka, finishes the stock transfers whose mover stopped half
// way, and retires the sales that ended with every order settled. The
// sale's state it works on is the outbox's (internal/outbox) and the
// gate's transfers; it reads and writes it only through the interfaces it
// is given.
package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/telemetry"
)

// Relay republishes reservations whose events were lost: the API died
// between the gate and the publish, or the publish failed. The
// order-writer's idempotency makes a duplicate harmless, but not free: a
// relay that took a writer's backlog for lost orders would fill the topic
// with copies just when the writer is behind, and the copies would slow it
// down further. So the relay republishes only what cannot be queued ahead of
// the writer any more, and runs in one place at a time.
//
// What can still be queued: a reservation accepted at A was published, if
// ever, by A + Age (Age is above the API's publish timeout). The relay
// notes the time T and the topic's end offsets as a baseline; once the
// writer's group has committed past those offsets, every event published
// before T has been settled and its reservation confirmed, so a reservation
// accepted before T - Age that is still pending was never published (or
// its confirmation failed): that one is republished. While the writer is
// behind nothing is. One exception: a batch whose Redis steps are slow (a
// master that froze) commits its offsets before its confirmations end
// (orderwriter.settleWait), and a reservation read in between is
// republished and settled again as a redelivery; the freeze that slows the
// confirmation slows the relay's read of the same master too.
type Relay struct {
	Store Store
	// Transfers finishes the stock transfers of sales in buckets.
	Transfers Transfers
	Publisher order.Publisher
	Backlog   Backlog
	// Locks hands out the relay's lease: every order-writer runs a relay,
	// one of them at a time works.
	Locks    *lock.Client
	LeaseTTL time.Duration
	Age      time.Duration // above the API's publish timeout
	Interval time.Duration // between scans
	Batch    int64         // reservations per voucher per read
	// Keep is how long an ended sale's keys stay once every order is
	// settled; the relay then scans it no more. Zero keeps them for ever.
	Keep   time.Duration
	Logger *slog.Logger
	// Relayed counts republished reservations, for metrics.
	Relayed func(n int)
	// Clock reads the time reservations are judged by: Redis's, whose
	// TIME stamped them (nil). A test moves it on instead of sleeping
	// through Age.
	Clock func(ctx context.Context) (time.Time, error)

	base *baseline
}

// Store is the sale state the relay works on (outbox.Store).
type Store interface {
	// Active are the vouchers whose sales may hold a reservation.
	Active(ctx context.Context) ([]int64, error)
	// Retire lets an ended, settled sale's keys expire; it reports
	// whether the sale left the active vouchers.
	Retire(ctx context.Context, voucherID int64, keep time.Duration) (bool, error)
	// Now is the clock reservations are stamped by.
	Now(ctx context.Context) (time.Time, error)
	// Due are up to limit reservations accepted before cutoff.
	Due(ctx context.Context, voucherID int64, cutoff time.Time, limit int64) ([]order.Event, error)
	// Reschedule makes events due again only after at.
	Reschedule(ctx context.Context, voucherID int64, at time.Time, events []order.Event) error
}

// Transfers are the stock moves between a sale's buckets (gate.Store).
type Transfers interface {
	// FinishTransfers deposits the stock transfers taken before cutoff
	// whose mover stopped between its two steps.
	FinishTransfers(ctx context.Context, voucherID int64, cutoff time.Time) (int, error)
}

var tracer = otel.Tracer("github.com/seckill/seckill/internal/relay")

// Backlog is how far the order-writer has consumed the orders topic
// (broker.Progress).
type Backlog interface {
	// Ends are the topic's end offsets by partition.
	Ends(ctx context.Context) (map[int]int64, error)
	// Reached reports whether the writer has consumed the topic up to ends.
	Reached(ctx context.Context, ends map[int]int64) (bool, error)
}

// baseline is the orders topic's end offsets at a moment of Redis's clock.
type baseline struct {
	at   time.Time
	ends map[int]int64
}

// leaseName is the relay's lease in package lock.
const leaseName = "seckill-relay"

// Run scans every Interval while it holds the relay's lease, and tries to
// take the lease every Interval while another relay holds it. A failed scan
// is logged and retried at the next interval.
func (r *Relay) Run(ctx context.Context) error {
	lease := &lock.Lease{Locks: r.Locks, Name: leaseName, TTL: r.LeaseTTL, Interval: r.Interval, Logger: r.Logger, What: "relay lease"}
	return lease.Run(ctx, func(ctx context.Context) error {
		_, err := r.Scan(ctx)
		return err
	})
}

// Scan republishes the reservations that cannot be queued ahead of the
// writer any more, once each, and returns how many. The first scan only
// takes a baseline; a scan while the writer has not consumed up to the
// baseline does nothing. A voucher whose keys cannot be read or written
// (one bucket's master away) is reported in the error and the others are
// scanned all the same: one sale's trouble stops no other sale's orders.
func (r *Relay) Scan(ctx context.Context) (int, error) {
	ids, err := r.Store.Active(ctx)
	if err != nil {
		return 0, fmt.Errorf("relay: %w", err)
	}
	ids, errs := r.sweep(ctx, ids)
	errs = append(errs, r.finishTransfers(ctx, ids)...)
	if r.base == nil {
		return 0, errors.Join(append(errs, r.takeBaseline(ctx))...)
	}
	reached, err := r.Backlog.Reached(ctx, r.base.ends)
	if err != nil {
		return 0, errors.Join(append(errs, fmt.Errorf("relay: writer progress: %w", err))...)
	}
	if !reached {
		return 0, errors.Join(errs...)
	}
	now, err := r.now(ctx)
	if err != nil {
		return 0, errors.Join(append(errs, err)...)
	}
	clock := redisClock{at: now, read: time.Now()}
	cutoff := r.base.at.Add(-r.Age)
	total := 0
	for _, vid := range ids {
		// A full batch means more may wait: take them now rather than a
		// batch per interval.
		for {
			n, err := r.scanVoucher(ctx, vid, cutoff, clock)
			total += n
			if err != nil {
				errs = append(errs, err)
				break
			}
			if int64(n) < r.Batch {
				break
			}
		}
	}
	if total > 0 {
		r.Logger.Info("relay republished reservations", "count", total)
		if r.Relayed != nil {
			r.Relayed(total)
		}
	}
	return total, errors.Join(append(errs, r.takeBaseline(ctx))...)
}

// sweep retires the sales among ids that ended with every order settled
// (their keys now expire: Store.Retire) and returns the others, the ones
// the relay scans, with the errors of those it could not look at.
func (r *Relay) sweep(ctx context.Context, ids []int64) (live []int64, errs []error) {
	if r.Keep <= 0 {
		return ids, nil
	}
	for _, id := range ids {
		retired, err := r.Store.Retire(ctx, id, r.Keep)
		if err != nil {
			errs = append(errs, fmt.Errorf("relay: %w", err))
		}
		if retired {
			r.Logger.Info("sale ended and settled: its keys now expire", "voucher", id, "in", r.Keep)
			continue
		}
		live = append(live, id)
	}
	return live, errs
}

// finishTransfers deposits the stock transfers among ids' buckets whose
// mover died between its two steps (Transfers.FinishTransfers): those taken
// more than Age ago, far longer than a live mover takes.
func (r *Relay) finishTransfers(ctx context.Context, ids []int64) (errs []error) {
	now, err := r.now(ctx)
	if err != nil {
		return []error{err}
	}
	for _, id := range ids {
		n, err := r.Transfers.FinishTransfers(ctx, id, now.Add(-r.Age))
		if err != nil {
			errs = append(errs, fmt.Errorf("relay: %w", err))
		}
		if n > 0 {
			r.Logger.Warn("finished stock transfers whose mover stopped between its two steps", "voucher", id, "transfers", n)
		}
	}
	return errs
}

func (r *Relay) now(ctx context.Context) (time.Time, error) {
	if r.Clock != nil {
		return r.Clock(ctx)
	}
	t, err := r.Store.Now(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("relay: %w", err)
	}
	return t, nil
}

func (r *Relay) takeBaseline(ctx context.Context) error {
	at, err := r.now(ctx)
	if err != nil {
		return err
	}
	ends, err := r.Backlog.Ends(ctx)
	if err != nil {
		return fmt.Errorf("relay: orders topic: %w", err)
	}
	r.base = &baseline{at: at, ends: ends}
	return nil
}

// republish publishes events in a span of a trace of its own, linked to
// the request of every order that was traced: the order's trace shows it
// was relayed, and its message still carries the request's context.
func (r *Relay) republish(ctx context.Context, voucherID int64, events []order.Event) (err error) {
	var links []trace.Link
	for _, e := range events {
		if l, ok := telemetry.LinkTo(e.Trace); ok {
			links = append(links, l)
		}
	}
	ctx, span := tracer.Start(ctx, "relay republish", trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithAttributes(attribute.Int64("seckill.voucher_id", voucherID), attribute.Int("seckill.orders", len(events))))
	defer func() {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	return r.Publisher.Publish(ctx, events...)
}

// redisClock carries Redis' clock forward with the local monotonic clock,
// so a long scan reads the time without a round trip per batch.
type redisClock struct {
	at   time.Time
	read time.Time
}

func (c redisClock) now() time.Time { return c.at.Add(time.Since(c.read)) }

func (r *Relay) scanVoucher(ctx context.Context, voucherID int64, cutoff time.Time, clock redisClock) (int, error) {
	events, dueErr := r.Store.Due(ctx, voucherID, cutoff, r.Batch)
	if dueErr != nil {
		dueErr = fmt.Errorf("relay: %w", dueErr)
	}
	if len(events) == 0 {
		return 0, dueErr
	}
	if err := r.republish(ctx, voucherID, events); err != nil {
		return 0, errors.Join(dueErr, err)
	}
	// Due again only if still pending once the writer has passed a
	// baseline taken after this publish: counted from its end.
	if err := r.Store.Reschedule(ctx, voucherID, clock.now(), events); err != nil {
		return len(events), errors.Join(dueErr, fmt.Errorf("relay: %w", err))
	}
	return len(events), dueErr
}

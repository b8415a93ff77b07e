package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
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
// behind nothing is.
type Relay struct {
	Store     *Store
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

// Backlog is how far the order-writer has consumed the orders topic.
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
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	var lease *lock.Lock
	defer func() {
		if lease != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			_ = lease.Release(rctx)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if lease != nil && lease.Context().Err() != nil {
			r.Logger.Warn("relay lease lost; another order-writer's relay may take over", "fence", lease.Fence,
				"cause", context.Cause(lease.Context()))
			lease = nil
		}
		if lease == nil {
			l, err := r.Locks.Acquire(ctx, leaseName, lock.Options{TTL: r.LeaseTTL, Watchdog: true})
			switch {
			case errors.Is(err, lock.ErrNotObtained):
				continue
			case err != nil:
				r.Logger.Warn("relay lease: cannot ask Redis; retrying at the next interval", "err", err)
				continue
			}
			lease = l
			r.Logger.Info("relay lease taken: this order-writer's relay republishes lost orders", "fence", l.Fence)
		}
		sctx, cancel := context.WithCancel(lease.Context())
		stop := context.AfterFunc(ctx, cancel)
		_, err := r.Scan(sctx)
		stop()
		cancel()
		if err != nil && sctx.Err() == nil {
			r.Logger.Warn("relay scan failed; retrying at the next interval", "err", err)
		}
	}
}

// Scan republishes the reservations that cannot be queued ahead of the
// writer any more, once each, and returns how many. The first scan only
// takes a baseline; a scan while the writer has not consumed up to the
// baseline does nothing.
func (r *Relay) Scan(ctx context.Context) (int, error) {
	ids, err := r.activeVouchers(ctx)
	if err != nil {
		return 0, err
	}
	if r.base == nil {
		return 0, r.takeBaseline(ctx)
	}
	reached, err := r.Backlog.Reached(ctx, r.base.ends)
	if err != nil {
		return 0, fmt.Errorf("relay: writer progress: %w", err)
	}
	if !reached {
		return 0, nil
	}
	now, err := r.now(ctx)
	if err != nil {
		return 0, err
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
				return total, err
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
	return total, r.takeBaseline(ctx)
}

// activeVouchers are the vouchers whose sale is on, or still has orders
// pending; the others are retired on the way.
func (r *Relay) activeVouchers(ctx context.Context) ([]int64, error) {
	members, err := r.Store.rdb.SMembers(ctx, r.Store.ActiveVouchers()).Result()
	if err != nil {
		return nil, fmt.Errorf("relay: active vouchers: %w", err)
	}
	ids := make([]int64, 0, len(members))
	for _, m := range members {
		id, err := strconv.ParseInt(m, 10, 64)
		if err != nil {
			continue
		}
		if r.Keep > 0 {
			retired, err := r.Store.Retire(ctx, id, r.Keep)
			if err != nil {
				return nil, fmt.Errorf("relay: %w", err)
			}
			if retired {
				r.Logger.Info("sale ended and settled: its keys now expire", "voucher", id, "in", r.Keep)
				continue
			}
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func (r *Relay) now(ctx context.Context) (time.Time, error) {
	if r.Clock != nil {
		return r.Clock(ctx)
	}
	t, err := r.Store.rdb.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("relay: redis time: %w", err)
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
	k, rdb := r.Store.KeysOf(voucherID), r.Store.rdb
	max := strconv.FormatInt(cutoff.UnixMilli(), 10)
	orderIDs, err := rdb.ZRangeByScore(ctx, k.PendingAt, &redis.ZRangeBy{Min: "-inf", Max: max, Count: r.Batch}).Result()
	if err != nil || len(orderIDs) == 0 {
		return 0, err
	}
	vals, err := rdb.HMGet(ctx, k.Pending, orderIDs...).Result()
	if err != nil {
		return 0, fmt.Errorf("relay: reservations of voucher %d: %w", voucherID, err)
	}
	var events []order.Event
	var stale []any
	for i, v := range vals {
		oid, _ := strconv.ParseInt(orderIDs[i], 10, 64)
		s, ok := v.(string)
		if !ok {
			// Confirmed between the two reads: the zset entry is left over.
			stale = append(stale, orderIDs[i])
			continue
		}
		e, err := parseReservation(voucherID, oid, s)
		if err != nil {
			return 0, err
		}
		events = append(events, e)
	}
	if len(stale) > 0 {
		rdb.ZRem(ctx, k.PendingAt, stale...)
	}
	if len(events) == 0 {
		return 0, nil
	}
	if err := r.republish(ctx, voucherID, events); err != nil {
		return 0, err
	}
	// Due again only if still pending once the writer has passed a
	// baseline taken after this publish: counted from its end.
	published := clock.now()
	members := make([]redis.Z, len(events))
	for i, e := range events {
		members[i] = redis.Z{Score: float64(published.UnixMilli()), Member: strconv.FormatInt(e.OrderID, 10)}
	}
	if err := rdb.ZAddXX(ctx, k.PendingAt, members...).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return len(events), fmt.Errorf("relay: reschedule: %w", err)
	}
	return len(events), nil
}

package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/order"
)

// Relay republishes reservations that stayed unconfirmed longer than Age:
// the API died between the gate and the publish, or the publish failed.
// The order-writer's idempotency makes a duplicate harmless.
type Relay struct {
	Store     *Store
	Publisher order.Publisher
	Age       time.Duration // how long a reservation may wait for its event
	Interval  time.Duration // between scans
	Batch     int64         // reservations per voucher per scan
	Logger    *slog.Logger
	// Relayed counts republished reservations, for metrics.
	Relayed func(n int)
}

// Run scans until ctx ends. A failed scan is logged and retried at the
// next interval.
func (r *Relay) Run(ctx context.Context) error {
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := r.Scan(ctx); err != nil && ctx.Err() == nil {
			r.Logger.Warn("relay scan failed; retrying at the next interval", "err", err)
		}
	}
}

// Scan republishes every reservation older than Age once and returns how
// many it republished.
func (r *Relay) Scan(ctx context.Context) (int, error) {
	now, err := r.Store.rdb.Time(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("relay: redis time: %w", err)
	}
	clock := redisClock{at: now, read: time.Now()}
	ids, err := r.Store.rdb.SMembers(ctx, r.Store.ActiveVouchers()).Result()
	if err != nil {
		return 0, fmt.Errorf("relay: active vouchers: %w", err)
	}
	total := 0
	for _, id := range ids {
		vid, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			continue
		}
		// A full batch means more may wait: take them now rather than a
		// batch per interval.
		for {
			n, err := r.scanVoucher(ctx, vid, clock)
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
	return total, nil
}

// redisClock carries Redis' clock forward with the local monotonic clock,
// so a long scan reads the time without a round trip per batch.
type redisClock struct {
	at   time.Time
	read time.Time
}

func (c redisClock) now() time.Time { return c.at.Add(time.Since(c.read)) }

func (r *Relay) scanVoucher(ctx context.Context, voucherID int64, clock redisClock) (int, error) {
	k, rdb := r.Store.KeysOf(voucherID), r.Store.rdb
	cutoff := strconv.FormatInt(clock.at.Add(-r.Age).UnixMilli(), 10)
	orderIDs, err := rdb.ZRangeByScore(ctx, k.PendingAt, &redis.ZRangeBy{Min: "-inf", Max: cutoff, Count: r.Batch}).Result()
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
	if err := r.Publisher.Publish(ctx, events...); err != nil {
		return 0, err
	}
	// Next look in another Age after this publish, not at every scan, while
	// the writer works: counted from now, since a slow publish may itself
	// have taken longer than Age.
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

package gate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/order"
)

// Active is every voucher listed among the active sales (ActiveVouchers):
// those whose state may hold a reservation.
func (s *Store) Active(ctx context.Context) ([]int64, error) {
	members, err := s.rdb.SMembers(ctx, s.ActiveVouchers()).Result()
	if err != nil {
		return nil, fmt.Errorf("active vouchers: %w", err)
	}
	ids := make([]int64, 0, len(members))
	for _, m := range members {
		if id, err := strconv.ParseInt(m, 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// Now is Redis's clock, the one that stamps reservations.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	t, err := s.rdb.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("redis time: %w", err)
	}
	return t, nil
}

// Due is up to limit of voucherID's reservations scheduled at or before
// cutoff, oldest first in each bucket, bucket after bucket. A schedule entry
// whose reservation is gone (the order was confirmed between the two reads)
// is dropped on the way.
func (s *Store) Due(ctx context.Context, voucherID int64, cutoff time.Time, limit int64) ([]order.Event, error) {
	lay, err := s.LayoutOf(ctx, voucherID)
	if err != nil {
		return nil, err
	}
	var events []order.Event
	var errs []error
	for b := 0; b < lay.N() && int64(len(events)) < limit; b++ {
		due, err := s.dueIn(ctx, voucherID, lay.bucketKeys(s.prefix, b), cutoff, limit-int64(len(events)))
		if err != nil {
			// The other buckets' reservations are due all the same.
			errs = append(errs, fmt.Errorf("bucket %d: %w", b, err))
			continue
		}
		events = append(events, due...)
	}
	return events, errors.Join(errs...)
}

func (s *Store) dueIn(ctx context.Context, voucherID int64, k Keys, cutoff time.Time, limit int64) ([]order.Event, error) {
	max := strconv.FormatInt(cutoff.UnixMilli(), 10)
	orderIDs, err := s.rdb.ZRangeByScore(ctx, k.PendingAt, &redis.ZRangeBy{Min: "-inf", Max: max, Count: limit}).Result()
	if err != nil {
		return nil, fmt.Errorf("reservations due of voucher %d: %w", voucherID, err)
	}
	if len(orderIDs) == 0 {
		return nil, nil
	}
	vals, err := s.rdb.HMGet(ctx, k.Pending, orderIDs...).Result()
	if err != nil {
		return nil, fmt.Errorf("reservations of voucher %d: %w", voucherID, err)
	}
	var events []order.Event
	var stale []any
	for i, v := range vals {
		oid, _ := strconv.ParseInt(orderIDs[i], 10, 64)
		r, ok := v.(string)
		if !ok {
			stale = append(stale, orderIDs[i])
			continue
		}
		e, err := parseReservation(voucherID, oid, r)
		if err != nil {
			return nil, err
		}
		events = append(events, e)
	}
	if len(stale) > 0 {
		// Best effort: an entry left over is read, and dropped, again.
		s.rdb.ZRem(ctx, k.PendingAt, stale...)
	}
	return events, nil
}

// Reschedule moves the reservations of events still pending to at: due
// again only once at is old enough. A reservation confirmed meanwhile is
// not brought back.
func (s *Store) Reschedule(ctx context.Context, voucherID int64, at time.Time, events []order.Event) error {
	lay, err := s.LayoutOf(ctx, voucherID)
	if err != nil {
		return err
	}
	byBucket := map[int][]redis.Z{}
	for _, e := range events {
		b := lay.Home(e.UserID)
		byBucket[b] = append(byBucket[b], redis.Z{Score: float64(at.UnixMilli()), Member: strconv.FormatInt(e.OrderID, 10)})
	}
	for b, members := range byBucket {
		err := s.rdb.ZAddXX(ctx, lay.bucketKeys(s.prefix, b).PendingAt, members...).Err()
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("reschedule the reservations of voucher %d: %w", voucherID, err)
		}
	}
	return nil
}

// Package outbox is the sale's state in Redis as the outbox of accepted
// orders: the reservations the relay republishes when they are late, and
// the sale's retirement once every order is settled. The order-writer
// confirms reservations through salestate.Store.Confirm.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/lua"
)

// Store is the outbox's side of the sale's state.
type Store struct{ *salestate.Store }

// New is the outbox of base's sales.
func New(base *salestate.Store) *Store { return &Store{base} }

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
		due, err := s.dueIn(ctx, voucherID, s.Bucket(lay, b), cutoff, limit-int64(len(events)))
		if err != nil {
			// The other buckets' reservations are due all the same.
			errs = append(errs, fmt.Errorf("bucket %d: %w", b, err))
			continue
		}
		events = append(events, due...)
	}
	return events, errors.Join(errs...)
}

func (s *Store) dueIn(ctx context.Context, voucherID int64, k salestate.Keys, cutoff time.Time, limit int64) ([]order.Event, error) {
	max := strconv.FormatInt(cutoff.UnixMilli(), 10)
	orderIDs, err := s.Redis().ZRangeByScore(ctx, k.PendingAt, &redis.ZRangeBy{Min: "-inf", Max: max, Count: limit}).Result()
	if err != nil {
		return nil, fmt.Errorf("reservations due of voucher %d: %w", voucherID, err)
	}
	if len(orderIDs) == 0 {
		return nil, nil
	}
	vals, err := s.Redis().HMGet(ctx, k.Pending, orderIDs...).Result()
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
		e, err := salestate.ParseReservation(voucherID, oid, r)
		if err != nil {
			return nil, err
		}
		events = append(events, e)
	}
	if len(stale) > 0 {
		// Best effort: an entry left over is read, and dropped, again.
		s.Redis().ZRem(ctx, k.PendingAt, stale...)
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
		err := s.Redis().ZAddXX(ctx, s.Bucket(lay, b).PendingAt, members...).Err()
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("reschedule the reservations of voucher %d: %w", voucherID, err)
		}
	}
	return nil
}

// Retire puts an expiry of keep on the keys of voucherID's sale once it has
// ended with every order settled, and drops it from the active vouchers; a
// sale whose keys are gone is dropped too. It reports whether the voucher
// left the active set. A sale of several buckets leaves it once every
// bucket is retired, its directory last.
func (s *Store) Retire(ctx context.Context, voucherID int64, keep time.Duration) (bool, error) {
	lay, err := s.LayoutOf(ctx, voucherID)
	if err != nil {
		return false, err
	}
	for b := range lay.N() {
		keys := s.Bucket(lay, b)
		res, err := lua.RetireSale.Run(ctx, s.Redis(), keys.List(keys.Entrants), keep.Milliseconds()).Int()
		if err != nil {
			return false, fmt.Errorf("retire voucher %d: %w", voucherID, err)
		}
		if res == 0 {
			return false, nil
		}
	}
	if lay.N() > 1 {
		if err := s.Redis().PExpire(ctx, s.KeysOf(voucherID).Voucher, keep).Err(); err != nil {
			return false, fmt.Errorf("retire voucher %d: its directory: %w", voucherID, err)
		}
	}
	if err := s.Redis().SRem(ctx, s.ActiveVouchers(), voucherID).Err(); err != nil {
		return false, fmt.Errorf("retire voucher %d: %w", voucherID, err)
	}
	return true, nil
}

package salestate

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/order"
)

// A reservation is an accepted order in its sale's state until the
// order-writer settles it: "userId:acceptedMs[:traceparent]" in the
// Pending hash, its order id in PendingAt by acceptedMs. The gate writes
// it, the relay republishes it when it is late, and Confirm ends it.

// ParseReservation reads a reservation's "userId:acceptedMs", with the
// request's ":traceparent" when it was traced.
func ParseReservation(voucherID, orderID int64, v string) (order.Event, error) {
	user, rest, ok := strings.Cut(v, ":")
	ms, traceparent, _ := strings.Cut(rest, ":")
	uid, err1 := strconv.ParseInt(user, 10, 64)
	at, err2 := strconv.ParseInt(ms, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return order.Event{}, fmt.Errorf("reservation %d of voucher %d: malformed %q", orderID, voucherID, v)
	}
	return order.Event{OrderID: orderID, UserID: uid, VoucherID: voucherID, AcceptedAt: at, Trace: traceparent}, nil
}

var _ order.Confirmer = (*Store)(nil)

// Confirm removes the reservations of orders the order-writer has settled
// (inserted or recorded as failed): one variadic HDEL and ZREM per bucket
// (each order's reservation is in its buyer's home bucket).
func (s *Store) Confirm(ctx context.Context, orders []order.Event) error {
	if len(orders) == 0 {
		return nil
	}
	// Grouped by voucher and bucket number, the keys built once a bucket:
	// building a bucket's seven key names for every order (and hashing
	// them as the map's key) was 7.5 % of the order-writer's CPU under a
	// crowd (pprof).
	type bucket struct {
		voucher int64
		b       int
	}
	layouts := map[int64]Layout{}
	byBucket := map[bucket][]string{}
	for _, o := range orders {
		lay, ok := layouts[o.VoucherID]
		if !ok {
			var err error
			if lay, err = s.LayoutOf(ctx, o.VoucherID); err != nil {
				return fmt.Errorf("confirm %d reservations: %w", len(orders), err)
			}
			layouts[o.VoucherID] = lay
		}
		b := bucket{o.VoucherID, lay.Home(o.UserID)}
		byBucket[b] = append(byBucket[b], strconv.FormatInt(o.OrderID, 10))
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b, ids := range byBucket {
			k := s.Bucket(layouts[b.voucher], b.b)
			members := make([]any, len(ids))
			for i, id := range ids {
				members[i] = id
			}
			p.HDel(ctx, k.Pending, ids...)
			p.ZRem(ctx, k.PendingAt, members...)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("confirm %d reservations: %w", len(orders), err)
	}
	return nil
}

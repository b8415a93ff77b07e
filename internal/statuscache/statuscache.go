// Package statuscache keeps MySQL's answers to order lookups in Redis for
// a while (its keys seckill:order:<id> and seckill:order-of:{voucher}:<user>
// are its own): an order's status is final once settled.
package statuscache

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/order"
)

var _ order.SettledFinder = (*Cache)(nil)

// Cache keeps MySQL's answers to order lookups in Redis for a
// while: once a sale's state has left Redis, its orders are still polled
// (a client's page left open), and each order then costs MySQL one read
// per TTL instead of one per poll. A settled order's status is final, so
// the cache is never stale; "no order for this voucher" is cached too, and
// only asked for when the voucher's sale is not in Redis (a live sale
// answers it from its buyers). The cache is best effort: when Redis fails,
// the lookup reads MySQL.
type Cache struct {
	Next   order.SettledFinder
	rdb    redis.Cmdable
	prefix string
	ttl    time.Duration
}

// NewCache caches next's answers under prefix for ttl.
func New(rdb redis.Cmdable, prefix string, ttl time.Duration, next order.SettledFinder) *Cache {
	return &Cache{Next: next, rdb: rdb, prefix: prefix, ttl: ttl}
}

// none is the cached "no such order".
const none = "-"

func (c *Cache) orderKey(orderID int64) string {
	return c.prefix + "seckill:order:" + strconv.FormatInt(orderID, 10)
}

func (c *Cache) userKey(userID, voucherID int64) string {
	v := strconv.FormatInt(voucherID, 10)
	return c.prefix + "seckill:order-of:{" + v + "}:" + strconv.FormatInt(userID, 10)
}

// A cached status: "<order id>:<voucher id>:<user id>:<ms>:c" confirmed,
// "…:f:<reason>" failed.
func encodeCached(s order.Status) string {
	v := strings.Join([]string{strconv.FormatInt(s.ID, 10), strconv.FormatInt(s.VoucherID, 10), strconv.FormatInt(s.UserID, 10),
		strconv.FormatInt(s.CreateTime.UnixMilli(), 10)}, ":")
	if s.Status == order.StatusFailed {
		return v + ":f:" + s.Reason
	}
	return v + ":c"
}

// decodeCached reads encodeCached's form; anything else (a value an
// earlier release cached) is a miss.
func decodeCached(v string) (order.Status, bool) {
	parts := strings.SplitN(v, ":", 6)
	if len(parts) < 5 {
		return order.Status{}, false
	}
	var n [4]int64
	for i := range n {
		var err error
		if n[i], err = strconv.ParseInt(parts[i], 10, 64); err != nil {
			return order.Status{}, false
		}
	}
	s := order.Status{ID: n[0], VoucherID: n[1], UserID: n[2], CreateTime: time.UnixMilli(n[3]).UTC()}
	switch {
	case parts[4] == "c" && len(parts) == 5:
		s.Status = order.StatusConfirmed
	case parts[4] == "f" && len(parts) == 6:
		s.Status, s.Reason = order.StatusFailed, parts[5]
	default:
		return order.Status{}, false
	}
	return s, true
}

// FindSettled is the cached status of orderID, else Next's, cached when
// found.
func (c *Cache) FindSettled(ctx context.Context, orderID int64) (order.Status, bool, error) {
	key := c.orderKey(orderID)
	if v, err := c.rdb.Get(ctx, key).Result(); err == nil {
		if s, ok := decodeCached(v); ok {
			return s, true, nil
		}
	}
	s, found, err := c.Next.FindSettled(ctx, orderID)
	if err == nil && found {
		c.rdb.Set(ctx, key, encodeCached(s), c.ttl)
	}
	return s, found, err
}

// FindSettledOf is the cached answer for userID's order of voucherID,
// else Next's, cached found or not.
func (c *Cache) FindSettledOf(ctx context.Context, userID, voucherID int64) (order.Status, bool, error) {
	key := c.userKey(userID, voucherID)
	if v, err := c.rdb.Get(ctx, key).Result(); err == nil {
		if v == none {
			return order.Status{}, false, nil
		}
		if s, ok := decodeCached(v); ok {
			return s, true, nil
		}
	}
	s, found, err := c.Next.FindSettledOf(ctx, userID, voucherID)
	if err != nil {
		return s, found, err
	}
	v := none
	if found {
		v = encodeCached(s)
	}
	c.rdb.Set(ctx, key, v, c.ttl)
	return s, found, nil
}

package gate

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/order"
)

var _ order.SettledFinder = (*SettledCache)(nil)

// SettledCache keeps MySQL's answers to order lookups in Redis for a
// while: once a sale's state has left Redis, its orders are still polled
// (a client's page left open), and each order then costs MySQL one read
// per TTL instead of one per poll. A settled order's status is final, so
// the cache is never stale; "no order for this voucher" is cached too, and
// only asked for when the voucher's sale is not in Redis (a live sale
// answers it from its buyers). The cache is best effort: when Redis fails,
// the lookup reads MySQL.
type SettledCache struct {
	Next   order.SettledFinder
	rdb    redis.Cmdable
	prefix string
	ttl    time.Duration
}

// NewSettledCache caches next's answers under prefix for ttl.
func NewSettledCache(rdb redis.Cmdable, prefix string, ttl time.Duration, next order.SettledFinder) *SettledCache {
	return &SettledCache{Next: next, rdb: rdb, prefix: prefix, ttl: ttl}
}

// none is the cached "no such order".
const none = "-"

func (c *SettledCache) orderKey(orderID int64) string {
	return c.prefix + "seckill:order:" + strconv.FormatInt(orderID, 10)
}

func (c *SettledCache) userKey(userID, voucherID int64) string {
	v := strconv.FormatInt(voucherID, 10)
	return c.prefix + "seckill:order-of:{" + v + "}:" + strconv.FormatInt(userID, 10)
}

// A cached status: "<order id>:<voucher id>:" and the Settled hash's
// encoding.
func encodeCached(s order.Status) string {
	return strconv.FormatInt(s.ID, 10) + ":" + strconv.FormatInt(s.VoucherID, 10) + ":" + encodeStatus(s)
}

func decodeCached(v string) (order.Status, bool) {
	parts := strings.SplitN(v, ":", 3)
	if len(parts) != 3 {
		return order.Status{}, false
	}
	id, err1 := strconv.ParseInt(parts[0], 10, 64)
	voucher, err2 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil {
		return order.Status{}, false
	}
	s, err := decodeStatus(id, voucher, parts[2])
	return s, err == nil
}

// FindSettled is the cached status of orderID, else Next's, cached when
// found.
func (c *SettledCache) FindSettled(ctx context.Context, orderID int64) (order.Status, bool, error) {
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
func (c *SettledCache) FindSettledOf(ctx context.Context, userID, voucherID int64) (order.Status, bool, error) {
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

package seckill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// ErrNotTaken means the order was not taken because the pipeline cannot
// carry it now (Kafka known to be down): nothing was reserved.
var ErrNotTaken = errors.New("flash sale temporarily unavailable: your order was not taken, try again shortly")

// NotPublishedError is an order the gate accepted whose event could not be
// published: its reservation stays in Redis and the relay publishes it
// later, so the order is delayed, not lost.
type NotPublishedError struct {
	OrderID int64
	Err     error
}

func (e *NotPublishedError) Error() string {
	return fmt.Sprintf("order %d reserved but not yet published: %v", e.OrderID, e.Err)
}

func (e *NotPublishedError) Unwrap() error { return e.Err }

// IDs makes order ids.
type IDs interface {
	Next(ctx context.Context) (int64, error)
}

// Publishing is where accepted orders go.
type Publishing interface {
	Publish(ctx context.Context, events ...OrderEvent) error
}

// Service takes flash-sale orders.
type Service struct {
	Store     *Store
	IDs       IDs
	Publisher Publishing
	// KafkaUp says whether the broker answers; when it does not, orders
	// are refused before the gate takes a unit.
	KafkaUp func() bool
	SoldOut *SoldOutCache
	Logger  *slog.Logger
}

// Order takes one unit of voucherID for userID and returns the order id.
// The business outcomes are the gate's errors; ErrNotTaken and
// *NotPublishedError are the pipeline's.
func (s *Service) Order(ctx context.Context, userID, voucherID int64) (int64, error) {
	if s.SoldOut.Has(voucherID) {
		return 0, ErrSoldOut
	}
	if s.KafkaUp != nil && !s.KafkaUp() {
		return 0, ErrNotTaken
	}
	orderID, err := s.IDs.Next(ctx)
	if err != nil {
		return 0, err
	}
	d, err := s.Store.Try(ctx, voucherID, userID, orderID)
	if err != nil {
		return 0, err
	}
	if errors.Is(d.Err, ErrSoldOut) || d.Err == nil && d.StockLeft == 0 {
		s.SoldOut.Mark(voucherID)
	}
	if d.Err != nil {
		return 0, d.Err
	}
	event := OrderEvent{OrderID: orderID, UserID: userID, VoucherID: voucherID, AcceptedAt: d.AcceptedAt.UnixMilli()}
	if err := s.Publisher.Publish(ctx, event); err != nil {
		s.Logger.Warn("order reserved, publish failed: the relay will publish it", "order_id", orderID, "err", err)
		return orderID, &NotPublishedError{OrderID: orderID, Err: err}
	}
	return orderID, nil
}

// SoldOutCache remembers sold-out vouchers for a short time, so each API
// instance answers a sold-out sale without a Redis round trip. The TTL
// bounds how long a restocked voucher still looks sold out.
type SoldOutCache struct {
	ttl time.Duration
	mu  sync.RWMutex
	m   map[int64]time.Time
}

// NewSoldOutCache remembers for ttl; zero disables it.
func NewSoldOutCache(ttl time.Duration) *SoldOutCache {
	return &SoldOutCache{ttl: ttl, m: map[int64]time.Time{}}
}

// Has reports whether voucherID was seen sold out within the TTL.
func (c *SoldOutCache) Has(voucherID int64) bool {
	if c == nil || c.ttl == 0 {
		return false
	}
	c.mu.RLock()
	until, ok := c.m[voucherID]
	c.mu.RUnlock()
	return ok && time.Now().Before(until)
}

// Mark records voucherID as sold out.
func (c *SoldOutCache) Mark(voucherID int64) {
	if c == nil || c.ttl == 0 {
		return
	}
	c.mu.Lock()
	c.m[voucherID] = time.Now().Add(c.ttl)
	c.mu.Unlock()
}

// Forget drops voucherID, after a restock through this instance.
func (c *SoldOutCache) Forget(voucherID int64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	delete(c.m, voucherID)
	c.mu.Unlock()
}

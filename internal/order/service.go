package order

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// IDs makes order ids.
type IDs interface {
	Next(ctx context.Context) (int64, error)
}

// Gate decides an attempt atomically: the sale's window, the stock and one
// order per user; an accepted attempt takes a unit and leaves a
// reservation.
type Gate interface {
	Try(ctx context.Context, voucherID, userID, orderID int64) (Decision, error)
}

// Publisher sends accepted orders on to the order-writer.
type Publisher interface {
	Publish(ctx context.Context, events ...Event) error
}

// Durability says whether an order of a voucher can be made durable in
// the order queue now (on Kafka: its partition has a leader and enough
// in-sync replicas), and hears of a publish that failed.
type Durability interface {
	Accepting(voucherID int64) bool
	Failed(voucherID int64)
}

// Service takes flash-sale orders.
type Service struct {
	IDs       IDs
	Gate      Gate
	Publisher Publisher
	// Durable, when set, refuses an order before the gate takes a unit
	// while the queue could not keep it.
	Durable Durability
	SoldOut *SoldOutCache
	Logger  *slog.Logger
	// Metrics, when set, count the answers and follow each sale's stock.
	Metrics *Metrics
}

// Place takes one unit of voucherID for userID and returns the order id.
// The business outcomes are the gate's answers; ErrNotTaken and
// ErrNotPublished are the pipeline's.
//
// A client that hangs up before the gate is asked takes nothing. Once the
// gate is asked, the caller's cancellation no longer applies: the gate's
// decision and the publish complete on their own deadlines (the Redis
// client's timeouts, the publisher's), so an accepted order reaches Kafka
// at once instead of waiting for the relay, whoever still listens.
func (s *Service) Place(ctx context.Context, userID, voucherID int64) (orderID int64, err error) {
	defer func() { s.Metrics.answered(err) }()
	if s.SoldOut.Has(voucherID) {
		return 0, ErrSoldOut
	}
	if s.Durable != nil && !s.Durable.Accepting(voucherID) {
		return 0, ErrNotTaken
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	ctx = context.WithoutCancel(ctx)
	orderID, err = s.IDs.Next(ctx)
	if err != nil {
		return 0, ErrNotTaken.Wrap(err)
	}
	d, err := s.Gate.Try(ctx, voucherID, userID, orderID)
	if err != nil {
		return 0, ErrUndecided.Wrap(err)
	}
	if errors.Is(d.Err, ErrEntered) {
		// No unit moved: AcceptedAt is when the draw is.
		return d.OrderID, &Entry{OrderID: d.OrderID, DrawAt: d.AcceptedAt}
	}
	if errors.Is(d.Err, ErrSoldOut) || d.Err == nil && d.StockLeft == 0 && !d.Share {
		s.SoldOut.Mark(voucherID)
	}
	if !errors.Is(d.Err, ErrUnknownVoucher) && !d.Share {
		s.Metrics.stockSeen(voucherID, d.StockLeft, d.AcceptedAt)
	}
	if errors.Is(d.Err, ErrAlreadyBought) && d.OrderID != 0 {
		// The buyer's order id, so a client that lost it can follow it.
		return 0, ErrAlreadyBought.WithData(strconv.FormatInt(d.OrderID, 10))
	}
	if d.Err != nil {
		return 0, d.Err
	}
	event := Event{OrderID: orderID, UserID: userID, VoucherID: voucherID, AcceptedAt: d.AcceptedAt.UnixMilli()}
	if err := s.Publisher.Publish(ctx, event); err != nil {
		if s.Durable != nil {
			s.Durable.Failed(voucherID)
		}
		s.Logger.WarnContext(ctx, "order reserved, publish failed: the relay will publish it", "order_id", orderID, "err", err)
		return orderID, ErrNotPublished.WithData(strconv.FormatInt(orderID, 10)).Wrap(err)
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

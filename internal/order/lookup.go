package order

import (
	"context"
	"errors"
	"time"
)

// SettledFinder finds orders MySQL has settled, confirmed or failed.
type SettledFinder interface {
	FindSettled(ctx context.Context, orderID int64) (Status, bool, error)
	// FindSettledOf is userID's order for voucherID: the confirmed one,
	// else the latest failed one.
	FindSettledOf(ctx context.Context, userID, voucherID int64) (Status, bool, error)
}

// ReservationFinder finds accepted orders not yet settled, and the order
// the gate recorded for a buyer.
type ReservationFinder interface {
	FindReservation(ctx context.Context, orderID int64) (Event, bool, error)
	FindBuyerOrder(ctx context.Context, voucherID, userID int64) (int64, bool, error)
}

// Lookup finds a user's order wherever it is on its way.
type Lookup struct {
	Settled SettledFinder
	Pending ReservationFinder
}

// Find is userID's order orderID: settled in MySQL, else pending in Redis.
// Someone else's order is as unknown as a missing one: ErrNotFound.
//
// Redis is read first: the order-writer removes a reservation only after
// MySQL has committed the order, so an order on its way is in at least one
// of the two reads. Read the other way round, an order settled between
// the reads would be in neither.
func (l *Lookup) Find(ctx context.Context, orderID, userID int64) (Status, error) {
	e, pending, err := l.Pending.FindReservation(ctx, orderID)
	if err != nil {
		return Status{}, err
	}
	s, settled, err := l.Settled.FindSettled(ctx, orderID)
	if err != nil {
		return Status{}, err
	}
	switch {
	case settled:
	case pending:
		s = Status{ID: orderID, UserID: e.UserID, VoucherID: e.VoucherID, Status: StatusPending,
			CreateTime: time.UnixMilli(e.AcceptedAt).UTC()}
	default:
		return Status{}, ErrNotFound
	}
	if s.UserID != userID {
		return Status{}, ErrNotFound
	}
	return s, nil
}

// FindOf is userID's order for voucherID, in any state: for a client that
// lost its order id (a dropped response, a crash). The gate's record of the
// buyer names the order while the sale's state is in Redis; MySQL answers
// for orders settled before it expired.
func (l *Lookup) FindOf(ctx context.Context, userID, voucherID int64) (Status, error) {
	orderID, ok, err := l.Pending.FindBuyerOrder(ctx, voucherID, userID)
	if err != nil {
		return Status{}, err
	}
	if ok {
		s, err := l.Find(ctx, orderID, userID)
		if !errors.Is(err, ErrNotFound) {
			return s, err
		}
	}
	s, ok, err := l.Settled.FindSettledOf(ctx, userID, voucherID)
	if err != nil {
		return Status{}, err
	}
	if !ok {
		return Status{}, ErrNotFound
	}
	return s, nil
}

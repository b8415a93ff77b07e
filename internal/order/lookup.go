package order

import (
	"context"
	"time"
)

// SettledFinder finds an order MySQL has settled, confirmed or failed.
type SettledFinder interface {
	FindSettled(ctx context.Context, orderID int64) (Status, bool, error)
}

// ReservationFinder finds an accepted order not yet settled.
type ReservationFinder interface {
	FindReservation(ctx context.Context, orderID int64) (Event, bool, error)
}

// Lookup finds a user's order wherever it is on its way.
type Lookup struct {
	Settled SettledFinder
	Pending ReservationFinder
}

// Find is userID's order orderID: in MySQL, else among the pending
// reservations. Someone else's order is as unknown as a missing one:
// ErrNotFound.
func (l *Lookup) Find(ctx context.Context, orderID, userID int64) (Status, error) {
	s, ok, err := l.Settled.FindSettled(ctx, orderID)
	if err != nil {
		return Status{}, err
	}
	if !ok {
		e, pending, err := l.Pending.FindReservation(ctx, orderID)
		if err != nil {
			return Status{}, err
		}
		if !pending {
			return Status{}, ErrNotFound
		}
		s = Status{ID: orderID, UserID: e.UserID, VoucherID: e.VoucherID, Status: StatusPending,
			CreateTime: time.UnixMilli(e.AcceptedAt).UTC()}
	}
	if s.UserID != userID {
		return Status{}, ErrNotFound
	}
	return s, nil
}

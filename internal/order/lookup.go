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

// SaleRecords finds orders in the sales whose state is in Redis: pending
// ones by their reservation, settled ones by the order-writer's record,
// and the order a sale records for a buyer.
type SaleRecords interface {
	FindInSales(ctx context.Context, orderID int64) (Status, bool, error)
	// FindBuyerOrder is the order voucherID's sale records for userID;
	// live reports whether the sale's state is in Redis: while it is, a
	// user it records nothing of has no order for the voucher.
	FindBuyerOrder(ctx context.Context, voucherID, userID int64) (orderID int64, found, live bool, err error)
}

// SettledRecorder records what the order-writer settled where SaleRecords
// finds it.
type SettledRecorder interface {
	RecordSettled(ctx context.Context, statuses []Status) error
}

// EntryFinder finds a buyer's entry in a sale's draw (drawstate.Store).
type EntryFinder interface {
	FindEntry(ctx context.Context, voucherID, userID int64) (e DrawEntry, found bool, err error)
}

// DrawEntry is a buyer's entry in a draw and where the draw stands.
type DrawEntry struct {
	OrderID int64
	DrawAt  time.Time // when the draw is due
	Drawn   time.Time // when it was made; zero until then
}

// Lookup finds a user's order wherever it is on its way. While its sale
// runs, Redis answers; MySQL only for orders of sales no longer in Redis.
type Lookup struct {
	Settled SettledFinder
	Sales   SaleRecords
	// Entries, when set, answers for a buyer who entered a sale's draw
	// and holds no order: entered until the draw, sold out after it.
	Entries EntryFinder
}

// Find is userID's order orderID: in a sale's records in Redis, else
// settled in MySQL. Someone else's order is as unknown as a missing one:
// ErrNotFound.
//
// Redis is read first: the order-writer removes a reservation only after
// MySQL has committed the order, so an order on its way is in at least one
// of the two reads. Read the other way round, an order settled between
// the reads would be in neither.
func (l *Lookup) Find(ctx context.Context, orderID, userID int64) (Status, error) {
	s, found, err := l.Sales.FindInSales(ctx, orderID)
	if err != nil {
		return Status{}, err
	}
	if !found {
		if s, found, err = l.Settled.FindSettled(ctx, orderID); err != nil {
			return Status{}, err
		}
	}
	if !found || s.UserID != userID {
		return Status{}, ErrNotFound
	}
	return s, nil
}

// FindOf is userID's order for voucherID, in any state: for a client that
// lost its order id (a dropped response, a crash). While the sale's state
// is in Redis, its records answer, "no order" included; MySQL answers for
// sales no longer there.
func (l *Lookup) FindOf(ctx context.Context, userID, voucherID int64) (Status, error) {
	orderID, found, live, err := l.Sales.FindBuyerOrder(ctx, voucherID, userID)
	if err != nil {
		return Status{}, err
	}
	if found {
		s, err := l.Find(ctx, orderID, userID)
		if !errors.Is(err, ErrNotFound) {
			return s, err
		}
	} else if live {
		return l.findEntry(ctx, userID, voucherID)
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

// findEntry is userID's entry in voucherID's draw as its status, for a
// buyer the sale records no order of.
func (l *Lookup) findEntry(ctx context.Context, userID, voucherID int64) (Status, error) {
	if l.Entries == nil {
		return Status{}, ErrNotFound
	}
	e, found, err := l.Entries.FindEntry(ctx, voucherID, userID)
	if err != nil {
		return Status{}, err
	}
	if !found {
		return Status{}, ErrNotFound
	}
	at := e.DrawAt.UTC()
	if e.Drawn.IsZero() {
		return Status{ID: e.OrderID, UserID: userID, VoucherID: voucherID, Status: StatusEntered, CreateTime: at, DrawAt: &at}, nil
	}
	// The draw may have served this buyer between the read of the buyers
	// and this one: read them again, now that the draw is made.
	orderID, bought, _, err := l.Sales.FindBuyerOrder(ctx, voucherID, userID)
	if err != nil {
		return Status{}, err
	}
	if bought {
		return l.Find(ctx, orderID, userID)
	}
	// Drawn and holding no order: not among the first stock entrants.
	return Status{ID: e.OrderID, UserID: userID, VoucherID: voucherID, Status: StatusFailed, Reason: ReasonSoldOut,
		CreateTime: e.Drawn.UTC(), DrawAt: &at}, nil
}

package sale

import (
	"cmp"
	"slices"
	"time"

	"github.com/seckill/seckill/internal/order"
)

// Truth is MySQL's record of one flash-sale voucher.
type Truth struct {
	Stock      int64 // units MySQL still allows
	Buckets    int   // the stock buckets the sale is sold from (salestate/layout.go)
	Begin, End time.Time
	Draw       time.Duration   // the draw's window; zero for a first-come sale
	Holders    map[int64]int64 // user id -> confirmed order id
	// Settled are the pending reservations' order ids that MySQL already
	// holds, confirmed or failed: their reservations only wait for a
	// confirmation that was lost.
	Settled map[int64]bool
	// MaxOrderID is the largest order id MySQL holds, of any voucher.
	MaxOrderID int64
}

// Plan is what Redis is to hold for the voucher.
type Plan struct {
	Stock   int64
	Buckets int
	Draw    time.Duration   // the draw's window, kept through the rebuild
	Buyers  map[int64]int64 // user id -> order id
	// Settled are reservations to drop: MySQL has settled their orders.
	Settled []order.Event
	// Unsettled are reservations whose orders MySQL has not seen: they
	// stay pending (the relay publishes them) and keep their units.
	Unsettled int
	// Oversold counts unsettled orders for which MySQL has no unit left:
	// the writer will record them sold_out. Redis accepted them after it
	// had lost the writes that took those units.
	Oversold int64
}

// Make is Redis's state from MySQL's truth and the reservations still
// pending in Redis. The buyers are MySQL's order holders and the users of
// unsettled reservations; the stock is MySQL's less one unit for each
// unsettled order that will take one, as the writer will settle them: in
// acceptance order, one order per user (a user who already holds an order
// takes no second unit).
func Make(t Truth, pending []order.Event) Plan {
	p := Plan{Buyers: make(map[int64]int64, len(t.Holders)+len(pending)), Buckets: max(t.Buckets, 1), Draw: t.Draw}
	for u, o := range t.Holders {
		p.Buyers[u] = o
	}
	pending = slices.Clone(pending)
	slices.SortStableFunc(pending, func(a, b order.Event) int { return cmp.Compare(a.AcceptedAt, b.AcceptedAt) })
	var taking int64
	for _, e := range pending {
		if t.Settled[e.OrderID] {
			p.Settled = append(p.Settled, e)
			continue
		}
		p.Unsettled++
		if _, holds := p.Buyers[e.UserID]; holds {
			continue
		}
		p.Buyers[e.UserID] = e.OrderID
		taking++
	}
	p.Stock = t.Stock - taking
	if p.Stock < 0 {
		p.Oversold, p.Stock = -p.Stock, 0
	}
	return p
}

package salestate

import (
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/sale"
)

// Outcome is the gate script's answer to one attempt: lua/sale.lua's
// OUTCOME table, by the same names (TestOutcomesAgreeWithThePrelude fails
// when the two drift).
type Outcome int64

const (
	Accepted       Outcome = iota // one unit taken, the buyer and the reservation recorded
	UnknownVoucher                // no such sale here (a bucket lost with its master, too)
	NotStarted
	Ended
	AlreadyBought // the reply's order id is the buyer's order
	SoldOut       // this bucket's: with several, the caller looks at the others
	Paused        // frozen for a reconcile, or built under another replication id: nothing taken
	OtherLayout   // the sale has another number of buckets than the caller thinks: the reply's stock is that number
	Entered       // entered in the sale's draw: the reply's ms is the draw's time, its order id the entry's
	Drawing       // the draw is being made and the buyer is not in it; to a drawer, its token is not the draw's
	NotAnEntrant  // to the drawer only: no entry of this buyer under this order id
	outcomes
)

// outcomeErrs are the order's answers by outcome. OtherLayout is the
// caller's to act on, never an answer.
var outcomeErrs = [outcomes]error{
	Accepted:       nil,
	UnknownVoucher: order.ErrUnknownVoucher,
	NotStarted:     order.ErrNotStarted,
	Ended:          order.ErrEnded,
	AlreadyBought:  order.ErrAlreadyBought,
	SoldOut:        order.ErrSoldOut,
	Paused:         order.ErrPaused,
	OtherLayout:    nil,
	Entered:        order.ErrEntered,
	Drawing:        order.ErrDrawing,
	NotAnEntrant:   sale.ErrNotAnEntrant,
}

// Known reports whether the script's answer is an outcome this code knows:
// a newer script's is not.
func (o Outcome) Known() bool { return o >= 0 && o < outcomes }

// Err is the order's answer for o: nil when accepted.
func (o Outcome) Err() error { return outcomeErrs[o] }

// MaxBatch bounds the attempts of one gate call: an accepted attempt costs
// its master about 16 µs (docs/performance.md), so a full batch holds the
// master's one thread about a millisecond.
const MaxBatch = 64

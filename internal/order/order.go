// Package order is what a flash-sale order is and what can happen to it:
// the accepted order (the event the API publishes, the reservation Redis
// keeps until MySQL has it), its status, the reasons MySQL can refuse it,
// and the outcomes a buyer reads. It also takes orders and looks them up,
// through small interfaces that the sale's state in Redis (internal/gate
// and the other jobs on internal/salestate), the Kafka adapter
// (internal/broker) and the MySQL adapter (internal/orderdb) implement. It
// imports none of them.
package order

import (
	"context"
	"time"

	"github.com/seckill/seckill/internal/apperr"
)

// Event is an accepted order: what the API publishes, the reservation
// Redis keeps until the order-writer settles it, and what the writer
// settles.
type Event struct {
	OrderID    int64
	UserID     int64
	VoucherID  int64
	AcceptedAt int64 // ms since 1970, Redis's clock
	// Trace is the W3C traceparent of the request that accepted the order,
	// when it was traced: a republished order (the relay) keeps its link
	// to it. It travels in the event's message headers, not its value.
	Trace string
}

// The gate's answers a buyer should read.
var (
	ErrUnknownVoucher = apperr.New(apperr.Outcome, "no such flash-sale voucher")
	ErrNotStarted     = apperr.New(apperr.Outcome, "the flash sale has not started yet")
	ErrEnded          = apperr.New(apperr.Outcome, "the flash sale has ended")
	ErrAlreadyBought  = apperr.New(apperr.Outcome, "you already have an order for this voucher: one per user")
	ErrSoldOut        = apperr.New(apperr.Outcome, "sold out")
	// ErrEntered: the attempt entered the sale's draw (Decision.OrderID is
	// the entry's order id, AcceptedAt when the draw is made); nothing was
	// taken. Place answers it as an Entry.
	ErrEntered = apperr.New(apperr.Outcome, "entered in the draw")
)

// The pipeline's answers.
var (
	// ErrPaused: the voucher's sale is frozen while its state is rebuilt
	// from MySQL; nothing was taken.
	ErrPaused = apperr.New(apperr.Unavailable, "sale paused, try again in a moment").Retry(2 * time.Second)
	// ErrMovingStock: the sale is sold from several stock buckets, the
	// buyer's is dry and units are on their way to it from the others;
	// nothing was taken, and it is not sold out.
	ErrMovingStock = apperr.New(apperr.Unavailable, "units are being moved to your queue, try again in a moment").Retry(time.Second)
	// ErrNotTaken: the pipeline cannot carry an order now (Kafka down, or
	// fewer in-sync replicas than an order needs), so nothing was reserved.
	ErrNotTaken = apperr.New(apperr.Unavailable, "flash sale temporarily unavailable: your order was not taken, try again shortly").
			Retry(5 * time.Second)
	// ErrUndecided: the gate could not be asked, or its answer was lost
	// (Redis unreachable, a cluster shard failing over). The attempt may
	// have taken a unit: a retry then answers "already bought" with the
	// order's id, and the relay delivers that order.
	ErrUndecided = apperr.New(apperr.Unavailable, "flash sale temporarily unavailable: try again shortly; if your order was taken, the answer says so").
			Retry(time.Second)
	// ErrNotPublished: the gate accepted the order but its event could not
	// be published; its reservation stays in Redis and the relay publishes
	// it later, so the order is delayed, not lost. The error carries the
	// order id as its Data.
	ErrNotPublished = apperr.New(apperr.Unavailable, "your order is reserved but the order queue is slow: it will be processed; follow it by its id").
			Retry(5 * time.Second)
	// ErrDrawing: the sale's draw is being made and the buyer did not
	// enter it; after it, the sale is first-come on what is left.
	ErrDrawing = apperr.New(apperr.Unavailable, "the draw is being made: try again in a moment").Retry(time.Second)
	// ErrNotFound: no such order of this user.
	ErrNotFound = apperr.New(apperr.NotFound, "no such order")
)

// Entry is an attempt that entered a sale's draw: the order it becomes
// if drawn, and when the draw is made. The buyer follows it at
// GET /voucher-order/of/voucher/{voucherId}.
type Entry struct {
	OrderID int64
	DrawAt  time.Time
}

func (e *Entry) Error() string {
	return "entered in the draw made at " + e.DrawAt.UTC().Format(time.RFC3339Nano)
}

// Is makes an Entry an ErrEntered.
func (e *Entry) Is(target error) bool { return target == ErrEntered }

// Decision is the gate's answer to one attempt.
type Decision struct {
	Err       error // nil when accepted, else one of the gate's answers above
	StockLeft int64
	// Share: StockLeft is one bucket's of a sale sold from several, so its
	// zero does not say the sale is sold out.
	Share      bool
	AcceptedAt time.Time // Redis's clock
	// OrderID is the order the gate recorded for the buyer: this attempt's
	// when accepted, the earlier one's when already bought.
	OrderID int64
}

// Why an accepted order could not become an order row.
const (
	ReasonSoldOut        = "sold_out"        // MySQL's stock was used up
	ReasonDuplicateUser  = "duplicate_user"  // the user holds another order for the voucher
	ReasonUnknownVoucher = "unknown_voucher" // no tb_seckill_voucher row
)

// The states of an accepted order.
const (
	StatusPending   = "pending"   // accepted, not yet in MySQL
	StatusConfirmed = "confirmed" // a tb_voucher_order row
	StatusFailed    = "failed"    // refused by MySQL, with a reason; or not drawn (sold_out)
	StatusEntered   = "entered"   // entered in a sale's draw, not yet drawn
)

// Status is an order as its owner sees it.
type Status struct {
	ID         int64     `json:"id,string"`
	UserID     int64     `json:"-"`
	VoucherID  int64     `json:"voucherId"`
	Status     string    `json:"status"`
	Reason     string    `json:"reason,omitempty"`
	CreateTime time.Time `json:"createTime"`
	// DrawAt is when the draw of an entry is made.
	DrawAt *time.Time `json:"drawAt,omitempty"`
}

// Confirmer removes the reservations of orders the order-writer has
// settled (inserted, or recorded as failed).
type Confirmer interface {
	Confirm(ctx context.Context, events []Event) error
}

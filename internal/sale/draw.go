package sale

import (
	"fmt"
	"time"

	"github.com/seckill/seckill/internal/apperr"
)

// A draw is a sale's admission option: the attempts in its window's first
// seconds are entries, one per buyer, and at the window's end one draw
// puts the entrants in a random order and serves them in it, so that
// arriving first within the window buys nothing (docs/bot-defence.md).

// The admission modes of a sale.
const (
	AdmissionFirstCome = "first-come"
	AdmissionDraw      = "draw"
)

// MaxDrawWindow bounds a draw's window: entries are held in the sale's
// state until it, and a crowd told to wait longer would not.
const MaxDrawWindow = 10 * time.Minute

// Entrant is one entry of a draw: the buyer, and the order the entry
// becomes if drawn.
type Entrant struct {
	UserID  int64
	OrderID int64
}

// DrawState is a draw's place in its sale: read with the sale's clock.
type DrawState struct {
	Draw  bool      // the sale has a draw
	At    time.Time // when the draw is due: the window's end
	Drawn time.Time // when it was made; zero until then
	Now   time.Time // a clock of the sale's Redis, as it was read
}

// Due reports whether the draw is to be made now.
func (d DrawState) Due() bool { return d.Draw && d.Drawn.IsZero() && !d.Now.Before(d.At) }

// ErrDrawFenced: a drawer with a newer fencing token has begun the draw
// since this one's lease was taken; this one must stop.
var ErrDrawFenced = apperr.New(apperr.Conflict, "draw: a newer drawer has taken this draw over")

// ErrNotAnEntrant is the gate's answer to a drawer serving a buyer whose
// entry it does not hold under that order id.
var ErrNotAnEntrant = apperr.New(apperr.Conflict, "draw: not an entrant of this draw under this order id")

// ErrDrawNotDue: the draw's window has not ended by the clock of the
// Redis server that takes its entries (another server's clock said it
// had).
var ErrDrawNotDue = apperr.New(apperr.Conflict, "draw: its window has not ended yet")

// DrawFencedError is ErrDrawFenced with the token the draw has seen: the
// drawer's lock counter is raised above it before the lease is taken
// again (a counter that lost writes would hand out stale tokens).
type DrawFencedError struct{ Seen int64 }

func (e *DrawFencedError) Error() string {
	return fmt.Sprintf("%v: the draw has seen token %d", ErrDrawFenced, e.Seen)
}

// Is makes a DrawFencedError an ErrDrawFenced.
func (e *DrawFencedError) Is(target error) bool { return target == ErrDrawFenced }

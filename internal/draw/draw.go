// Package draw makes the draws of the sales that have one: at a draw's
// window's end, its entrants are put in a uniformly random order and the
// gate serves them in it, as if they had arrived so (internal/gate takes
// the units and leaves the reservations; the order events go the way of
// every order). It runs as a leased, fenced job of the order-writer, the
// relay's pattern: one drawer at a time, and a drawer that lost its lease
// while paused is refused by the sale's state.
//
// A draw is reproducible: its seed is kept in MySQL with the sale before
// any entrant is served, so a drawer that dies half way is followed by one
// that makes the same draw (the gate's decisions are idempotent by order
// id), and anyone can recompute the order from the seed (Order).
package draw

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"time"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/sale"
)

// Sales is the sales' state the drawer works on (gate.Store).
type Sales interface {
	// Active are the vouchers whose sales are in Redis.
	Active(ctx context.Context) ([]int64, error)
	DrawState(ctx context.Context, voucherID int64) (sale.DrawState, error)
	Entrants(ctx context.Context, voucherID int64) ([]sale.Entrant, error)
	// BeginDraw makes fence the draw's token, keeping the seed beside it;
	// sale.ErrDrawFenced when a larger token was seen.
	BeginDraw(ctx context.Context, voucherID, fence int64, seed string) error
	// Admit decides the entrants' attempts in the order given.
	Admit(ctx context.Context, voucherID, fence int64, entrants []sale.Entrant) ([]order.Decision, error)
	EndDraw(ctx context.Context, voucherID, fence int64) error
}

// Seeds keeps each draw's seed with its sale in MySQL (orderdb.Seeds).
type Seeds interface {
	// Seed keeps fresh as voucherID's draw seed unless one is kept
	// already, and returns the one kept.
	Seed(ctx context.Context, voucherID int64, fresh string) (string, error)
}

// Drawer makes the draws that are due.
type Drawer struct {
	Sales     Sales
	Seeds     Seeds
	Publisher order.Publisher
	Locks     *lock.Client
	LeaseTTL  time.Duration
	Interval  time.Duration
	Logger    *slog.Logger
	// Chunk is how many entrants are decided and published at a time
	// (256 when zero).
	Chunk int
	// Admitted, when set, hears of each chunk of entrants the gate has
	// decided: the tests stop a drawer there, as a crash would.
	Admitted func(voucherID int64, decided int)
}

// leaseName is the drawer's lease in package lock.
const leaseName = "seckill-draw"

// Run makes the draws that are due every Interval while it holds the
// drawer's lease.
func (d *Drawer) Run(ctx context.Context) error {
	lease := &lock.Lease{Locks: d.Locks, Name: leaseName, TTL: d.LeaseTTL, Interval: d.Interval, Logger: d.Logger, What: "draw lease"}
	return lease.RunFenced(ctx, d.Scan)
}

// Scan makes every draw that is due under fence, the lease's token. A sale
// whose draw fails is reported, and the others are drawn all the same.
func (d *Drawer) Scan(ctx context.Context, fence int64) error {
	ids, err := d.Sales.Active(ctx)
	if err != nil {
		return fmt.Errorf("draw: %w", err)
	}
	var errs []error
	for _, id := range ids {
		st, err := d.Sales.DrawState(ctx, id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !st.Due() {
			continue
		}
		if err := d.Draw(ctx, id, fence); err != nil {
			if errors.Is(err, sale.ErrDrawFenced) {
				return fmt.Errorf("%w: %w", lock.ErrStale, err)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Draw makes voucherID's draw under fence, or makes it again after a
// drawer that stopped half way: the same seed, the same entrants, the same
// order, and the gate's answers for those already served are its first.
func (d *Drawer) Draw(ctx context.Context, voucherID, fence int64) error {
	fresh := make([]byte, 32)
	_, _ = rand.Read(fresh)
	seed, err := d.Seeds.Seed(ctx, voucherID, hex.EncodeToString(fresh))
	if err != nil {
		return fmt.Errorf("draw of voucher %d: its seed: %w", voucherID, err)
	}
	if err := d.Sales.BeginDraw(ctx, voucherID, fence, seed); err != nil {
		return err
	}
	entrants, err := d.Sales.Entrants(ctx, voucherID)
	if err != nil {
		return err
	}
	ordered, err := Order(seed, entrants)
	if err != nil {
		return fmt.Errorf("draw of voucher %d: %w", voucherID, err)
	}
	chunk := cmp.Or(d.Chunk, 256)
	won, soldOut := 0, false
	for start := 0; start < len(ordered) && !soldOut; start += chunk {
		part := ordered[start:min(len(ordered), start+chunk)]
		decisions, err := d.Sales.Admit(ctx, voucherID, fence, part)
		if err != nil {
			return err
		}
		var events []order.Event
		for i, dec := range decisions {
			switch {
			case dec.Err == nil:
				events = append(events, order.Event{OrderID: part[i].OrderID, UserID: part[i].UserID, VoucherID: voucherID,
					AcceptedAt: dec.AcceptedAt.UnixMilli()})
			case errors.Is(dec.Err, order.ErrSoldOut):
				soldOut = true
			case errors.Is(dec.Err, order.ErrDrawing):
				return fmt.Errorf("draw of voucher %d: %w: the gate refused entrant %d under token %d", voucherID, sale.ErrDrawFenced,
					part[i].UserID, fence)
			default:
				// Paused (the sale is rebuilt after its master lost writes)
				// or unknown: the draw is made again once it sells.
				return fmt.Errorf("draw of voucher %d: entrant %d: %w", voucherID, part[i].UserID, dec.Err)
			}
		}
		if len(events) > 0 {
			// A publish that fails leaves the reservations to the relay,
			// as for any order; the draw goes on.
			if err := d.Publisher.Publish(ctx, events...); err != nil {
				d.Logger.Warn("draw: orders reserved, publish failed: the relay will publish them", "voucher", voucherID, "orders", len(events), "err", err)
			}
		}
		won += len(events)
		if d.Admitted != nil {
			d.Admitted(voucherID, start+len(part))
		}
	}
	if err := d.Sales.EndDraw(ctx, voucherID, fence); err != nil {
		return err
	}
	d.Logger.Info("draw made", "voucher", voucherID, "entrants", len(entrants), "orders", won, "seed", seed)
	return nil
}

// Order is the draw's order of entrants under seed (64 hex digits): the
// entrants sorted by user id, then shuffled by Fisher–Yates with ChaCha8
// keyed by the seed (math/rand/v2), so anyone with the seed and the
// entrants gets the same order.
func Order(seed string, entrants []sale.Entrant) ([]sale.Entrant, error) {
	raw, err := hex.DecodeString(seed)
	if err != nil || len(raw) != 32 {
		return nil, fmt.Errorf("a draw seed is 64 hex digits, not %q", seed)
	}
	out := slices.Clone(entrants)
	slices.SortFunc(out, func(a, b sale.Entrant) int { return cmp.Compare(a.UserID, b.UserID) })
	r := mrand.New(mrand.NewChaCha8([32]byte(raw)))
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out, nil
}

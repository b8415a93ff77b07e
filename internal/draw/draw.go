// Package draw makes the draws of the sales that have one: at a draw's
// window's end, its entrants are put in a uniformly random order and the
// gate serves them in it, as if they had arrived so (internal/drawstate
// runs the gate script, which takes the units and leaves the
// reservations; the order events go the way of every order). It runs as a leased, fenced job of the order-writer, the
// relay's pattern: one drawer at a time, and a drawer that lost its lease
// while paused is refused by the sale's state.
//
// A draw is reproducible: its seed and then its entrants are kept in
// MySQL with the sale before any entrant is served, so a drawer that dies
// half way is followed by one that makes the same draw (the gate's
// decisions are idempotent by order id), whatever Redis lost meanwhile,
// and anyone can recompute the order from them (Order).
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

// Sales is the sales' state the drawer works on (drawstate.Store).
type Sales interface {
	// Active are the vouchers whose sales are in Redis.
	Active(ctx context.Context) ([]int64, error)
	// DrawStates are where each voucher's draw stands, in one read; a
	// voucher that cannot be read reads as no draw, named in the error.
	DrawStates(ctx context.Context, voucherIDs []int64) ([]sale.DrawState, error)
	Entrants(ctx context.Context, voucherID int64) ([]sale.Entrant, error)
	// RestoreEntrants puts back the entries of es that the sale's state
	// lost (a failover), so that the gate lets their drawer serve them.
	RestoreEntrants(ctx context.Context, voucherID int64, es []sale.Entrant) error
	// BeginDraw makes fence the draw's token, keeping the seed beside it,
	// once the window has ended; made reports a draw already made.
	// *sale.DrawFencedError when a larger token was seen.
	BeginDraw(ctx context.Context, voucherID, fence int64, seed string) (made bool, err error)
	// Admit decides the entrants' attempts in the order given.
	Admit(ctx context.Context, voucherID, fence int64, entrants []sale.Entrant) ([]order.Decision, error)
	EndDraw(ctx context.Context, voucherID, fence int64) error
}

// Records keeps what a draw is made from with its sale in MySQL
// (orderdb.DrawRecords).
type Records interface {
	// Seed keeps fresh as voucherID's draw seed unless one is kept
	// already, and returns the one kept.
	Seed(ctx context.Context, voucherID int64, fresh string) (string, error)
	// Entrants are the entrants of record; kept is false until some are.
	Entrants(ctx context.Context, voucherID int64) (es []sale.Entrant, kept bool, err error)
	// KeepEntrants keeps es as the entrants of record, unless some are.
	KeepEntrants(ctx context.Context, voucherID int64, es []sale.Entrant) error
}

// Drawer makes the draws that are due.
type Drawer struct {
	Sales     Sales
	Records   Records
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
	if len(ids) == 0 {
		return nil
	}
	states, err := d.Sales.DrawStates(ctx, ids)
	if states == nil {
		return fmt.Errorf("draw: %w", err)
	}
	errs := []error{err}
	for i, id := range ids {
		if !states[i].Due() {
			continue
		}
		err := d.Draw(ctx, id, fence)
		switch {
		case errors.Is(err, sale.ErrDrawFenced):
			// Stale for every sale: the lease is taken again first.
			return errors.Join(append(errs, fmt.Errorf("%w: %w", lock.ErrStale, err))...)
		case errors.Is(err, sale.ErrDrawNotDue):
			// Another master's clock said it was: the next scan.
		case err != nil:
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
	seed, err := d.Records.Seed(ctx, voucherID, hex.EncodeToString(fresh))
	if err != nil {
		return fmt.Errorf("draw of voucher %d: its seed: %w", voucherID, err)
	}
	made, err := d.Sales.BeginDraw(ctx, voucherID, fence, seed)
	if fenced, ok := errors.AsType[*sale.DrawFencedError](err); ok && ctx.Err() == nil {
		// The lease's counter may have lost writes (its master failed
		// over): raised to the draw's token, the next lease's is above it.
		if rerr := d.Locks.RaiseFence(ctx, leaseName, fenced.Seen); rerr != nil {
			d.Logger.Warn("draw: cannot raise the lease's fencing counter", "voucher", voucherID, "err", rerr)
		}
	}
	if err != nil || made {
		return err
	}
	entrants, err := d.entrantsOfRecord(ctx, voucherID)
	if err != nil {
		return err
	}
	ordered, err := Order(seed, entrants)
	if err != nil {
		return fmt.Errorf("draw of voucher %d: %w", voucherID, err)
	}
	chunk := cmp.Or(d.Chunk, 256)
	won := 0
	for start := 0; start < len(ordered); start += chunk {
		part := ordered[start:min(len(ordered), start+chunk)]
		served, soldOut, err := d.serve(ctx, voucherID, fence, part)
		won += served
		if err != nil {
			return err
		}
		if d.Admitted != nil {
			d.Admitted(voucherID, start+len(part))
		}
		if soldOut {
			break
		}
	}
	if err := d.Sales.EndDraw(ctx, voucherID, fence); err != nil {
		return err
	}
	d.Logger.Info("draw made", "voucher", voucherID, "entrants", len(entrants), "orders", won, "seed", seed)
	return nil
}

// entrants are the draw's entrants of record: MySQL's, kept by the first
// drawer from the entries in Redis once the window had ended.
func (d *Drawer) entrants(ctx context.Context, voucherID int64) ([]sale.Entrant, error) {
	es, kept, err := d.Records.Entrants(ctx, voucherID)
	if err != nil || kept {
		return es, err
	}
	entries, err := d.Sales.Entrants(ctx, voucherID)
	if err != nil {
		return nil, err
	}
	if err := d.Records.KeepEntrants(ctx, voucherID, entries); err != nil {
		return nil, err
	}
	es, kept, err = d.Records.Entrants(ctx, voucherID)
	if err == nil && !kept {
		err = fmt.Errorf("draw of voucher %d: its entrants were kept and are not there", voucherID)
	}
	return es, err
}

// entrantsOfRecord are the entrants the draw is made among, with every
// one of them in the sale's state, where the gate checks them.
func (d *Drawer) entrantsOfRecord(ctx context.Context, voucherID int64) ([]sale.Entrant, error) {
	es, err := d.entrants(ctx, voucherID)
	if err != nil {
		return nil, err
	}
	return es, d.Sales.RestoreEntrants(ctx, voucherID, es)
}

// serve runs part of the draw's order through the gate and publishes the
// orders it took: how many entrants hold an order now, and whether the
// stock ran out. The orders taken are published even when a later answer
// stops the draw.
func (d *Drawer) serve(ctx context.Context, voucherID, fence int64, part []sale.Entrant) (served int, soldOut bool, err error) {
	decisions, err := d.Sales.Admit(ctx, voucherID, fence, part)
	var events []order.Event
	for i, dec := range decisions {
		switch {
		case dec.Err == nil:
			events = append(events, order.Event{OrderID: part[i].OrderID, UserID: part[i].UserID, VoucherID: voucherID,
				AcceptedAt: dec.AcceptedAt.UnixMilli()})
		case errors.Is(dec.Err, order.ErrAlreadyBought):
			// An entrant who holds another order: after Redis lost the
			// record of a draw made, one who lost it and then bought
			// first-come. The unit is taken; nothing to serve.
			served++
		case errors.Is(dec.Err, order.ErrSoldOut):
			soldOut = true
		case errors.Is(dec.Err, order.ErrDrawing):
			err = cmp.Or(err, fmt.Errorf("draw of voucher %d: the gate refused token %d: %w", voucherID, fence, sale.ErrDrawFenced))
		default:
			// Paused (the sale is rebuilt after its master lost writes):
			// the draw is made again once it sells.
			err = cmp.Or(err, fmt.Errorf("draw of voucher %d: entrant %d: %w", voucherID, part[i].UserID, dec.Err))
		}
	}
	if len(events) > 0 {
		// A publish that fails leaves the reservations to the relay, as
		// for any order; the draw goes on.
		if perr := d.Publisher.Publish(ctx, events...); perr != nil {
			d.Logger.Warn("draw: orders reserved, publish failed: the relay will publish them", "voucher", voucherID, "orders", len(events), "err", perr)
		}
	}
	return served + len(events), soldOut, err
}

// Order is the draw's order of entrants under seed (64 hex digits), spelt
// out so that anyone can recompute it in any language: the entrants sorted
// by user id, then shuffled by Fisher–Yates from the last place down,
// place i swapping with place j drawn uniformly from 0 to i out of the
// ChaCha8 stream keyed by the seed (C2SP chacha8rand, Go's
// math/rand/v2.ChaCha8): a 64-bit draw x below 2^64 mod (i+1) is drawn
// again, else j = x mod (i+1).
func Order(seed string, entrants []sale.Entrant) ([]sale.Entrant, error) {
	raw, err := hex.DecodeString(seed)
	if err != nil || len(raw) != 32 {
		return nil, fmt.Errorf("a draw seed is 64 hex digits, not %q", seed)
	}
	out := slices.Clone(entrants)
	slices.SortFunc(out, func(a, b sale.Entrant) int { return cmp.Compare(a.UserID, b.UserID) })
	src := mrand.NewChaCha8([32]byte(raw))
	for i := len(out) - 1; i > 0; i-- {
		n := uint64(i + 1)
		x, below := src.Uint64(), -n%n // 2^64 mod n
		for x < below {
			x = src.Uint64()
		}
		j := x % n
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

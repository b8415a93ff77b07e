// Package reconcile rebuilds a voucher's sale state in Redis from MySQL's
// truth: after Redis lost acknowledged writes, after a stock change that
// reached one store and could not be undone in it, or to warm a voucher
// whose warm-up failed after its row was committed. The sale is frozen
// meanwhile (the gate answers "paused", taking nothing), and the rebuild
// waits until the order-writer has consumed every event published before
// the freeze, so MySQL's truth is complete.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/sale"
)

// Sale is a voucher's state where the gate decides.
type Sale interface {
	// Freeze makes the gate answer "paused" for the voucher, taking
	// nothing. Freeze, Unfreeze and Rebuild carry the reconcile's fencing
	// token (0: none) and answer sale.ErrFenced when the voucher has seen a
	// larger one: Redis is the resource that checks the token.
	Freeze(ctx context.Context, voucherID, fence int64) error
	Unfreeze(ctx context.Context, voucherID, fence int64) error
	// FreezeSuspect freezes the part of the voucher's sale that may have
	// lost writes — on a sale in stock buckets, those built under another
	// replication id than their server's, or gone — and the whole sale
	// when no part is known to have; Freeze then freezes the rest.
	FreezeSuspect(ctx context.Context, voucherID, fence int64) error
	// Stopped reports whether what FreezeSuspect would freeze sells
	// nothing already (the gate pauses a part built under another
	// replication id than its server's, or gone, on its own).
	Stopped(ctx context.Context, voucherID int64) (bool, error)
	// Pending are the voucher's reservations.
	Pending(ctx context.Context, voucherID int64) ([]order.Event, error)
	// Rebuild puts the plan in place and unfreezes the voucher, once
	// however often its last step is sent.
	Rebuild(ctx context.Context, voucherID int64, p sale.Plan, begin, end time.Time, fence int64) error
	// SeenFence is the largest fencing token any part of the voucher's
	// sale has seen.
	SeenFence(ctx context.Context, voucherID int64) (int64, error)
}

// Records is MySQL's side.
type Records interface {
	// SaleTruth is MySQL's record of voucherID; of the pending order ids,
	// it tells which MySQL has settled. ok is false for no such voucher.
	SaleTruth(ctx context.Context, voucherID int64, pending []int64) (t sale.Truth, ok bool, err error)
}

// IDFloor keeps the order-id generator above ids in use.
type IDFloor interface {
	Above(ctx context.Context, id, margin int64) error
}

// idMargin is how far above the largest id in use the generator is raised:
// about a million ids, far more than this system leases in the second or
// two of writes Redis can lose, blocks held by API instances included.
const idMargin = 1 << 20

// Backlog is how far the order-writer has consumed the orders topic: the
// reconcile waits on it, and so does the relay (relay.Relay).
type Backlog interface {
	// Ends are the topic's end offsets by partition.
	Ends(ctx context.Context) (map[int]int64, error)
	// Reached reports whether the writer has consumed the topic up to ends.
	Reached(ctx context.Context, ends map[int]int64) (bool, error)
}

// The outcomes callers branch on.
var (
	ErrNoSuchVoucher = apperr.New(apperr.NotFound, "reconcile: no such flash-sale voucher in MySQL")
	// ErrWriterBehind: the order-writer did not consume the events
	// published before the freeze within the wait; MySQL's truth would be
	// incomplete, so nothing was rebuilt (and the sale is unfrozen).
	ErrWriterBehind = apperr.New(apperr.Unavailable, "reconcile: the order-writer has not caught up with the orders topic; is it running? try again")
)

// Locks take a lock in Redis (lock.Client).
type Locks interface {
	Acquire(ctx context.Context, name string, opt lock.Options) (*lock.Lock, error)
	RaiseFence(ctx context.Context, name string, floor int64) error
}

// Reconciler rebuilds sales from MySQL.
type Reconciler struct {
	Sale    Sale
	Records Records
	Backlog Backlog
	// Locks, when set, lets one reconcile of a voucher run at a time
	// across processes (two order-writers that see the same failover,
	// seckillctl beside them): one that unfroze the sale must not be
	// followed by one whose reading of MySQL predates the orders taken
	// since, which would hand their units out again. A second waits for
	// the first (up to Wait), then runs: a reconcile is idempotent.
	Locks Locks
	// IDs, when set, is raised above every order id MySQL or a
	// reservation holds, so that a counter Redis rolled back does not hand
	// them out again.
	IDs    IDFloor
	Wait   time.Duration // for the writer to catch up
	Poll   time.Duration
	Logger *slog.Logger
	// BeforeFreezeAll, when set, is called once the suspect part of a
	// sale is frozen and the writer has caught up, before the rest is
	// frozen: a test's seam.
	BeforeFreezeAll func()
}

// Report is what a reconcile did.
type Report struct {
	VoucherID int64
	Plan      sale.Plan
	Waited    time.Duration // for the writer
	// FrozenWait is the part of Waited the suspect part of the sale was
	// frozen for; the rest of it sold on.
	FrozenWait time.Duration
}

// LockName is the reconcile lock of voucherID. It carries the voucher's
// hash tag: its fencing token is checked against the fence in the sale's
// hash, and on one slot a failover that loses the counter's writes loses
// the fence's too, so the check never sees a counter gone back below it.
func LockName(voucherID int64) string { return "reconcile:{" + strconv.FormatInt(voucherID, 10) + "}" }

// rebuildBound bounds a rebuild once begun.
const rebuildBound = 30 * time.Second

// Run freezes voucherID, waits until the writer has consumed what was
// published before, rebuilds the voucher's Redis state from MySQL and
// unfreezes it. Safe to run twice and while the sale is live. On a failure
// before the rebuild the sale is unfrozen as it was; on one during it, the
// sale stays frozen until a reconcile completes (a rebuilt part beside one
// not rebuilt would sell wrong).
func (r *Reconciler) Run(ctx context.Context, voucherID int64) (rep Report, err error) {
	rep.VoucherID = voucherID
	var fence int64
	if r.Locks != nil {
		l, err := r.lock(ctx, voucherID)
		if err != nil {
			return rep, err
		}
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = l.Release(rctx) // else it expires within its TTL
		}()
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		// A lost lock (Redis away past its TTL) ends the reconcile, unfrozen.
		defer context.AfterFunc(l.Context(), cancel)()
		fence = l.Fence
	}
	// The writer catches up twice: first while the sale still sells, then
	// with the part that may have lost writes frozen, which makes MySQL's
	// truth complete for it; only then is the rest of the sale frozen, for
	// the reads and the rebuild. The rest lost nothing: the reservations of
	// the orders it took meanwhile are all in Redis, and the plan counts
	// them. So a sale in buckets stops selling in its other buckets only
	// for the rebuild itself. A part that sells nothing already (a failed
	// over master's: the gate pauses it) is frozen at once and the writer
	// waited for once: the first wait, a cycle of the writer's, would only
	// keep it paused longer.
	start := time.Now()
	if stopped, err := r.Sale.Stopped(ctx, voucherID); err != nil || !stopped {
		if err := r.waitForWriter(ctx); err != nil {
			return rep, err
		}
	}
	if err := r.Sale.FreezeSuspect(ctx, voucherID, fence); err != nil {
		return rep, fmt.Errorf("reconcile voucher %d: freeze: %w", voucherID, err)
	}
	rebuilding := false
	defer func() {
		switch {
		case err == nil || errors.Is(err, sale.ErrFenced):
			// Done, or a fenced reconcile, which leaves the freeze to the
			// newer one.
			return
		case rebuilding:
			// Part of the sale may be rebuilt: it stays frozen until a
			// reconcile completes (the guard runs it again).
			r.Logger.Warn("reconcile stopped during the rebuild: the sale stays paused until a reconcile completes", "voucher", voucherID, "err", err)
			return
		}
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if uerr := r.Sale.Unfreeze(uctx, voucherID, fence); uerr != nil && !errors.Is(uerr, sale.ErrFenced) {
			r.Logger.Error("reconcile failed and the sale is still frozen: run it again", "voucher", voucherID, "err", uerr)
		}
	}()
	frozen := time.Now()
	if err := r.waitForWriter(ctx); err != nil {
		return rep, err
	}
	rep.Waited, rep.FrozenWait = time.Since(start), time.Since(frozen)
	if r.BeforeFreezeAll != nil {
		r.BeforeFreezeAll()
	}
	if err := r.Sale.Freeze(ctx, voucherID, fence); err != nil {
		return rep, fmt.Errorf("reconcile voucher %d: freeze: %w", voucherID, err)
	}
	pending, err := r.Sale.Pending(ctx, voucherID)
	if err != nil {
		return rep, fmt.Errorf("reconcile voucher %d: %w", voucherID, err)
	}
	ids := make([]int64, len(pending))
	for i, e := range pending {
		ids[i] = e.OrderID
	}
	truth, ok, err := r.Records.SaleTruth(ctx, voucherID, ids)
	if err != nil {
		return rep, fmt.Errorf("reconcile voucher %d: %w", voucherID, err)
	}
	if !ok {
		return rep, ErrNoSuchVoucher
	}
	rep.Plan = sale.Make(truth, pending)
	if r.IDs != nil {
		top := truth.MaxOrderID
		for _, e := range pending {
			top = max(top, e.OrderID)
		}
		if top > 0 {
			if err := r.IDs.Above(ctx, top, idMargin); err != nil {
				return rep, fmt.Errorf("reconcile voucher %d: %w", voucherID, err)
			}
		}
	}
	rebuilding = true
	// A rebuild under way is finished, not abandoned, when the caller
	// stops (a graceful shutdown): it takes moments, and one cut part way
	// leaves the sale paused until another reconcile.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rebuildBound)
	defer cancel()
	if err := r.Sale.Rebuild(rctx, voucherID, rep.Plan, truth.Begin, truth.End, fence); err != nil {
		return rep, fmt.Errorf("reconcile voucher %d: %w", voucherID, err)
	}
	r.Logger.Info("voucher reconciled from MySQL", "voucher", voucherID, "stock", rep.Plan.Stock, "buyers", len(rep.Plan.Buyers),
		"settled_reservations_dropped", len(rep.Plan.Settled), "unsettled", rep.Plan.Unsettled, "oversold", rep.Plan.Oversold,
		"waited", rep.Waited, "frozen_wait", rep.FrozenWait)
	return rep, nil
}

// lock takes voucherID's reconcile lock with a fencing token above every
// one its sale has seen. On one master the counter and the fence it is
// checked against share the voucher's slot and go back together when the
// master loses writes; a sale in buckets keeps fences on other masters
// too, which the counter can fall below: every new token would then be
// refused as stale. Holding the lock, a token at or below the sale's can
// only come from such a counter, so it is raised above the sale's and the
// lock taken again.
func (r *Reconciler) lock(ctx context.Context, voucherID int64) (*lock.Lock, error) {
	opt := lock.Options{TTL: 10 * time.Second, Watchdog: true, RetryMin: 50 * time.Millisecond, RetryMax: time.Second, RetryFor: r.Wait}
	for retook := false; ; retook = true {
		l, err := r.Locks.Acquire(ctx, LockName(voucherID), opt)
		if err != nil {
			return nil, fmt.Errorf("reconcile voucher %d: another reconcile of it holds its lock: %w", voucherID, err)
		}
		seen, err := r.Sale.SeenFence(ctx, voucherID)
		if err == nil && seen < l.Fence {
			return l, nil
		}
		if err == nil && !retook {
			r.Logger.Warn("the reconcile lock's fencing counter is below what the sale has seen (its master lost writes): raised", "voucher", voucherID,
				"token", l.Fence, "seen", seen)
			// Raised while the lock is held, so no other holder's token is
			// handed out meanwhile.
			err = r.Locks.RaiseFence(ctx, LockName(voucherID), seen)
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = l.Release(rctx)
		cancel()
		switch {
		case err != nil:
			return nil, fmt.Errorf("reconcile voucher %d: %w", voucherID, err)
		case retook:
			return nil, fmt.Errorf("reconcile voucher %d: its lock's token %d is not above the %d its sale has seen after raising the counter", voucherID, l.Fence, seen)
		}
	}
}

// waitForWriter waits until the writer's group has consumed the orders
// topic up to its end as of now.
func (r *Reconciler) waitForWriter(ctx context.Context) error {
	ends, err := r.Backlog.Ends(ctx)
	if err != nil {
		return fmt.Errorf("reconcile: orders topic: %w", err)
	}
	deadline := time.Now().Add(r.Wait)
	for {
		reached, err := r.Backlog.Reached(ctx, ends)
		if err != nil {
			return fmt.Errorf("reconcile: writer progress: %w", err)
		}
		if reached {
			return nil
		}
		if time.Now().After(deadline) {
			return ErrWriterBehind
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.Poll):
		}
	}
}

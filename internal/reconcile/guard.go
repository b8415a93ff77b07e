package reconcile

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/sale"
)

// Guard turns a violated invariant — Redis lost writes: a failover to a
// lagging replica, a restore, a power loss — into a reconcile of the
// voucher: counted, logged, and run in the background, at most one at a
// time per voucher.
type Guard struct {
	Reconciler *Reconciler
	// Timeout bounds one reconcile, its wait for the writer included.
	Timeout time.Duration
	// RetryMin is the wait before a failed reconcile runs again; it
	// doubles up to RetryMax, while the waits add up to RetryFor at most
	// (the waits, not the clock: how many tries a sale gets does not
	// depend on how long a loaded machine takes for each). A reconcile fails mostly
	// on a server's passing state (a master rejoining the cluster answers
	// CLUSTERDOWN for a moment): seconds, not the periodic check's next
	// round, put the sale back. Past RetryFor it is left to the periodic
	// check's next finding, or an operator.
	RetryMin, RetryMax, RetryFor time.Duration

	ctx        context.Context // ends at Close: reconciles under way give up, unfrozen
	stop       context.CancelFunc
	violations *prometheus.CounterVec
	reconciles *prometheus.CounterVec
	mu         sync.Mutex
	running    map[int64]bool
	wg         sync.WaitGroup
}

// NewGuard registers the guard's metrics on reg.
func NewGuard(r *Reconciler, timeout time.Duration, reg prometheus.Registerer) *Guard {
	g := &Guard{Reconciler: r, Timeout: timeout, RetryMin: 500 * time.Millisecond, RetryMax: 10 * time.Second, RetryFor: 2 * time.Minute, running: map[int64]bool{},
		violations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_invariant_violations_total",
			Help: "Times Redis was found not to hold what MySQL has (Redis lost writes), by check."}, []string{"check"}),
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_reconciles_total",
			Help: "Reconciles started by a violated invariant, by final result (failed: given up after their retries)."}, []string{"result"}),
	}
	reg.MustRegister(g.violations, g.reconciles)
	// Every series exists from the start at 0, so that an alert on
	// increase() sees the first violation (a series born at 1 shows none).
	for _, check := range []string{sale.CheckVoucherMissing, sale.CheckStockAboveMySQL, sale.CheckBuyersLost, sale.CheckEpochChanged, sale.CheckLayoutOutdated, sale.CheckFrozenStale} {
		g.violations.WithLabelValues(check)
	}
	g.reconciles.WithLabelValues("done")
	g.reconciles.WithLabelValues("failed")
	g.ctx, g.stop = context.WithCancel(context.Background())
	return g
}

// Violated records that voucherID broke check and reconciles it unless a
// reconcile of it is already running. detail goes to the log.
func (g *Guard) Violated(voucherID int64, check string, detail ...any) {
	g.violations.WithLabelValues(check).Inc()
	attrs := append([]any{"voucher", voucherID, "check", check}, detail...)
	if check == sale.CheckFrozenStale {
		g.Reconciler.Logger.Warn("a reconcile left the sale frozen (its process stopped part way): reconciling the voucher from MySQL", attrs...)
	} else if check == sale.CheckEpochChanged {
		// Every restart does this; whether writes were lost, the reconcile
		// finds out.
		g.Reconciler.Logger.Warn("Redis restarted, was restored or failed over since this sale was built: it may have lost writes; "+
			"reconciling the voucher from MySQL", attrs...)
	} else {
		g.Reconciler.Logger.Error("Redis does not hold what MySQL has: it lost writes; reconciling the voucher from MySQL", attrs...)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running[voucherID] {
		return
	}
	g.running[voucherID] = true
	g.wg.Go(func() {
		defer func() {
			g.mu.Lock()
			delete(g.running, voucherID)
			g.mu.Unlock()
		}()
		g.reconcile(voucherID)
	})
}

// reconcile runs the voucher's reconcile until it is done, cannot be done
// by this guard (no such voucher in MySQL; a newer reconcile of it ran,
// which does it), its waits have taken RetryFor, or the guard is closed.
func (g *Guard) reconcile(voucherID int64) {
	log := g.Reconciler.Logger
	var waited time.Duration
	for wait := g.RetryMin; ; wait = min(2*wait, g.RetryMax) {
		ctx, cancel := context.WithTimeout(g.ctx, g.Timeout)
		_, err := g.Reconciler.Run(ctx, voucherID)
		cancel()
		switch {
		case err == nil:
			g.reconciles.WithLabelValues("done").Inc()
			return
		case g.ctx.Err() != nil:
			// A stop, not a failure: the next start's check finds the same
			// violation again (a sale left frozen part rebuilt, as stale).
			log.Info("reconcile stopped by the shutdown; the next start redoes it", "voucher", voucherID, "err", err)
			return
		case errors.Is(err, sale.ErrFenced):
			log.Info("a newer reconcile of the voucher has run; it does the work", "voucher", voucherID)
			return
		case errors.Is(err, ErrNoSuchVoucher):
			g.reconciles.WithLabelValues("failed").Inc()
			log.Error("reconcile after a violated invariant failed: the voucher is not in MySQL", "voucher", voucherID, "err", err)
			return
		case waited+wait > g.RetryFor:
			g.reconciles.WithLabelValues("failed").Inc()
			log.Error("reconcile after a violated invariant kept failing; giving up: run seckillctl reconcile", "voucher", voucherID,
				"tried_for", g.RetryFor, "err", err)
			return
		}
		log.Warn("reconcile after a violated invariant failed; trying again", "voucher", voucherID, "in", wait, "err", err)
		select {
		case <-g.ctx.Done():
			log.Info("reconcile stopped by the shutdown; the next start redoes it", "voucher", voucherID)
			return
		case <-time.After(wait):
		}
		waited += wait
	}
}

// Close stops the reconciles under way (each unfreezes its voucher as it
// was) and waits for them.
func (g *Guard) Close() error {
	g.stop()
	g.wg.Wait()
	return nil
}

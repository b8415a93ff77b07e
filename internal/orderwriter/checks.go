package orderwriter

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/sale"
)

// SaleSizer reads a voucher's sale in Redis: whether it is there, its
// stock, how many buyers it records, the replication id it was built
// under, and the replication id of its server now; and lists a sale among
// the active vouchers, reporting whether it was missing.
type SaleSizer interface {
	Size(ctx context.Context, voucherID int64) (sale.Size, error)
	List(ctx context.Context, voucherID int64) (bool, error)
}

// SaleChecks compare, every Interval (and at once when asked), each
// voucher on sale or yet to start in MySQL with its sale in Redis: the sale
// is there, built under Redis's present replication id, its stock is not
// above MySQL's, and it records at least as many buyers as MySQL has
// orders. It sees what the per-batch check cannot: a sale whose keys
// vanished, or that the gate pauses, takes no orders, so no batch ever
// checks it.
//
// MySQL is read before Redis: every order MySQL holds was accepted, and
// its unit taken and its buyer recorded in Redis, before that. Only a
// restock whose Redis step falls between the two reads can look like a
// violation; the reconcile it starts is then harmless. A new sale is
// committed to MySQL before it is warmed in Redis, so a sale found
// missing is read again, with its MySQL row, after MissingRecheck before
// it is reported.
type SaleChecks struct {
	DB       *sql.DB
	Sale     SaleSizer
	Guard    Violations
	Interval time.Duration
	Logger   *slog.Logger
	// MissingRecheck is the wait before a sale found missing is read
	// again (0: a second): longer than a creation usually takes from its
	// commit to its warm, short enough that a sale Redis lost is back
	// soon. A warm later than that is reported, and its reconcile is
	// harmless.
	MissingRecheck time.Duration
	// Errors, when set, counts the vouchers whose check could not be made.
	Errors prometheus.Counter

	once   sync.Once
	asked  chan struct{}
	rounds sync.WaitGroup
}

// Violations takes what a check finds: reconcile.Guard reconciles, a
// report (seckillctl check) prints.
type Violations interface {
	Violated(voucherID int64, check string, detail ...any)
}

// Run checks at once, then every Interval and whenever Now is called,
// until ctx ends. A check that fails (Redis still loading its data after a
// restart, MySQL away) is logged and tried again a second later: it may be
// the one a new replication id asked for.
func (c *SaleChecks) Run(ctx context.Context) error {
	defer c.rounds.Wait()
	for {
		wait := c.Interval
		if err := c.round(ctx); err != nil && ctx.Err() == nil {
			c.Logger.Warn("sale checks failed; trying again in a second", "err", err)
			wait = min(wait, time.Second)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		case <-c.now():
			t.Stop()
		}
	}
}

// round is one Check, abandoned for a new one at once when Now is called
// during it: the round under way may be waiting on the master that failed
// over (its reads went there until the client learnt of the promotion),
// while the promoted master's sales, paused at the gate, wait for this
// check to reconcile them. A Redis read does not end when its context is
// cancelled, only at its read timeout (go-redis), so the abandoned round
// is not waited for: its context is cancelled, it ends at its next call,
// and Run waits for it only when it returns.
func (c *SaleChecks) round(ctx context.Context) error {
	for {
		rctx, cancel := context.WithCancel(ctx)
		result := make(chan error, 1)
		c.rounds.Go(func() {
			_, err := c.Check(rctx)
			result <- err
		})
		select {
		case err := <-result:
			cancel()
			return err
		case <-c.now():
			cancel()
		case <-ctx.Done():
			cancel()
			return ctx.Err()
		}
	}
}

// Now asks Run for a check at once: Redis's replication id changed.
func (c *SaleChecks) Now(context.Context) {
	select {
	case c.now() <- struct{}{}:
	default: // one is asked for already
	}
}

func (c *SaleChecks) now() chan struct{} {
	c.once.Do(func() { c.asked = make(chan struct{}, 1) })
	return c.asked
}

// Check compares every voucher on sale once and returns how many it
// compared.
func (c *SaleChecks) Check(ctx context.Context) (int, error) {
	sales, err := c.onSale(ctx, nil)
	if err != nil {
		return 0, err
	}
	// Each voucher on its own: one that cannot be read (a key no code
	// expects) must not switch the checks off for the others.
	var errs []error
	fail := func(voucher int64, err error) {
		errs = append(errs, err)
		if ctx.Err() != nil {
			return // the round was given up: not the voucher's fault
		}
		c.Logger.Warn("a voucher's sale check failed; the others are checked", "voucher", voucher, "err", err)
		if c.Errors != nil {
			c.Errors.Inc()
		}
	}
	var missing []int64
	for _, s := range sales {
		gone, err := c.checkOne(ctx, s)
		if err != nil {
			fail(s.voucher, err)
		} else if gone {
			missing = append(missing, s.voucher)
		}
	}
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	left := 0
	if len(missing) > 0 {
		if left, err = c.recheckMissing(ctx, missing, fail); err != nil {
			return 0, err
		}
	}
	if len(errs) > 0 && len(errs) == len(sales) {
		// Redis as a whole (still loading its data after a restart): the
		// round is worth trying again soon.
		return 0, fmt.Errorf("every sale check failed: %w", errors.Join(errs...))
	}
	return len(sales) - len(errs) - left, nil
}

// recheckMissing waits MissingRecheck, then compares again the vouchers
// whose sale was missing, from a new read of MySQL too (a voucher restocked,
// ended or deleted meanwhile), and reports those still missing. It returns
// how many are no longer on sale, so were not compared.
func (c *SaleChecks) recheckMissing(ctx context.Context, vouchers []int64, fail func(int64, error)) (left int, err error) {
	t := time.NewTimer(cmp.Or(c.MissingRecheck, time.Second))
	select {
	case <-ctx.Done():
		t.Stop()
		return 0, ctx.Err()
	case <-t.C:
	}
	sales, err := c.onSale(ctx, vouchers)
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	if err != nil {
		for _, v := range vouchers {
			fail(v, err)
		}
		return 0, nil
	}
	for _, s := range sales {
		gone, err := c.checkOne(ctx, s)
		if err != nil {
			fail(s.voucher, err)
		} else if gone {
			c.Guard.Violated(s.voucher, sale.CheckVoucherMissing)
		}
	}
	if ctx.Err() != nil {
		// Cancelled while comparing (seckillctl check's Ctrl-C): not a
		// result to report as "no violation".
		return 0, ctx.Err()
	}
	return len(vouchers) - len(sales), nil
}

// onSaleRow is a voucher on sale or yet to start, as MySQL has it.
type onSaleRow struct{ voucher, stock, orders int64 }

// onSale reads the vouchers on sale or yet to start with their stock and
// order count: every one, or those of vouchers only.
func (c *SaleChecks) onSale(ctx context.Context, vouchers []int64) ([]onSaleRow, error) {
	query := `SELECT sv.voucher_id, sv.stock,
		(SELECT COUNT(*) FROM tb_voucher_order o WHERE o.voucher_id = sv.voucher_id)
		FROM tb_seckill_voucher sv WHERE sv.end_time > NOW()`
	args := make([]any, len(vouchers))
	if len(vouchers) > 0 {
		for i, v := range vouchers {
			args[i] = v
		}
		query += " AND sv.voucher_id IN (?" + strings.Repeat(", ?", len(vouchers)-1) + ")"
	}
	rows, err := c.DB.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("vouchers on sale: %w", err)
	}
	defer rows.Close()
	var sales []onSaleRow
	for rows.Next() {
		var s onSaleRow
		if err := rows.Scan(&s.voucher, &s.stock, &s.orders); err != nil {
			return nil, fmt.Errorf("vouchers on sale: %w", err)
		}
		sales = append(sales, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("vouchers on sale: %w", err)
	}
	return sales, nil
}

// checkOne compares one voucher's sale with MySQL's figures and reports
// what it breaks, but for a missing sale: that one it returns, for
// recheckMissing.
func (c *SaleChecks) checkOne(ctx context.Context, s onSaleRow) (missing bool, err error) {
	r, err := c.Sale.Size(ctx, s.voucher)
	if err != nil {
		return false, err
	}
	if ctx.Err() != nil {
		// A round given up for a newer one: what it read may predate a
		// failover (a frozen master's answer as it woke).
		return false, ctx.Err()
	}
	check, detail := r.Violation(s.stock, s.orders)
	if check == sale.CheckVoucherMissing {
		return true, nil
	}
	if check != "" {
		c.Guard.Violated(s.voucher, check, detail...)
	}
	if r.Outdated {
		return false, nil // its reconcile lists it
	}
	// The set of active vouchers is one key: on Redis Cluster, on another
	// master than the sale, whose lossy failover can forget the sale while
	// its keys stay. The relay and the order lookups find sales by it.
	listedAgain, err := c.Sale.List(ctx, s.voucher)
	if err != nil {
		return false, err
	}
	if listedAgain {
		c.Logger.Warn("a sale on sale was missing from the active vouchers (lost with a Redis failover?): listed again", "voucher", s.voucher)
	}
	return false, nil
}

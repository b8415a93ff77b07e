package orderwriter

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
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
// missing is read again after MissingRecheck before it is reported.
type SaleChecks struct {
	DB       *sql.DB
	Sale     SaleSizer
	Guard    Violations
	Interval time.Duration
	Logger   *slog.Logger
	// MissingRecheck is the wait before a sale found missing is read
	// again (0: a second): longer than a creation takes from its commit
	// to its warm, short enough that a sale Redis lost is back soon.
	MissingRecheck time.Duration
	// Errors, when set, counts the vouchers whose check could not be made.
	Errors prometheus.Counter

	once  sync.Once
	asked chan struct{}
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
	for {
		wait := c.Interval
		if _, err := c.Check(ctx); err != nil && ctx.Err() == nil {
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
	rows, err := c.DB.QueryContext(ctx, `SELECT sv.voucher_id, sv.stock,
		(SELECT COUNT(*) FROM tb_voucher_order o WHERE o.voucher_id = sv.voucher_id)
		FROM tb_seckill_voucher sv WHERE sv.end_time > NOW()`)
	if err != nil {
		return 0, fmt.Errorf("vouchers on sale: %w", err)
	}
	type sale struct{ voucher, stock, orders int64 }
	var sales []sale
	for rows.Next() {
		var s sale
		if err := rows.Scan(&s.voucher, &s.stock, &s.orders); err != nil {
			rows.Close()
			return 0, fmt.Errorf("vouchers on sale: %w", err)
		}
		sales = append(sales, s)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return 0, fmt.Errorf("vouchers on sale: %w", err)
	}
	// Each voucher on its own: one that cannot be read (a key no code
	// expects) must not switch the checks off for the others.
	var failed []error
	fail := func(voucher int64, err error) {
		failed = append(failed, err)
		c.Logger.Warn("a voucher's sale check failed; the others are checked", "voucher", voucher, "err", err)
		if c.Errors != nil {
			c.Errors.Inc()
		}
	}
	var missing []sale
	for _, s := range sales {
		gone, err := c.checkOne(ctx, s.voucher, s.stock, s.orders, false)
		if err != nil {
			fail(s.voucher, err)
		} else if gone {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		wait := c.MissingRecheck
		if wait == 0 {
			wait = time.Second
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
		for _, s := range missing {
			if _, err := c.checkOne(ctx, s.voucher, s.stock, s.orders, true); err != nil {
				fail(s.voucher, err)
			}
		}
	}
	if len(failed) > 0 && len(failed) == len(sales) {
		// Redis as a whole (still loading its data after a restart): the
		// round is worth trying again soon.
		return 0, fmt.Errorf("every sale check failed: %w", errors.Join(failed...))
	}
	return len(sales) - len(failed), nil
}

// checkOne compares one voucher's sale with MySQL's figures and reports
// what it breaks, but for a missing sale before the recheck: then it
// reports nothing and says the sale is missing.
func (c *SaleChecks) checkOne(ctx context.Context, voucher, stock, orders int64, recheck bool) (missing bool, err error) {
	r, err := c.Sale.Size(ctx, voucher)
	if err != nil {
		return false, err
	}
	check, detail := r.Violation(stock, orders)
	if check == sale.CheckVoucherMissing && !recheck {
		return true, nil
	}
	if check != "" {
		c.Guard.Violated(voucher, check, detail...)
	}
	if !r.Exists || r.Outdated {
		return false, nil // its reconcile lists it
	}
	// The set of active vouchers is one key: on Redis Cluster, on another
	// master than the sale, whose lossy failover can forget the sale while
	// its keys stay. The relay and the order lookups find sales by it.
	listedAgain, err := c.Sale.List(ctx, voucher)
	if err != nil {
		return false, err
	}
	if listedAgain {
		c.Logger.Warn("a sale on sale was missing from the active vouchers (lost with a Redis failover?): listed again", "voucher", voucher)
	}
	return false, nil
}

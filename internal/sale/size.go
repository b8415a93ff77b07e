package sale

import "time"

// The invariants a guard watches: what Redis must hold of what MySQL has.
const (
	// CheckVoucherMissing: a voucher with new orders has no sale in Redis.
	CheckVoucherMissing = "voucher_missing"
	// CheckStockAboveMySQL: Redis's stock is above MySQL's, which it never
	// is (units leave Redis first and come back to MySQL first).
	CheckStockAboveMySQL = "stock_above_mysql"
	// CheckBuyersLost: a user MySQL just confirmed is not among Redis's
	// buyers, so could buy again.
	CheckBuyersLost = "buyers_lost"
	// CheckEpochChanged: the sale was built under another replication id
	// than the one Redis has now (a restart, a restore, a failover), so it
	// may miss acknowledged writes; the gate pauses it.
	CheckEpochChanged = "epoch_changed"
	// CheckLayoutOutdated: the sale's keys have the layout of an earlier
	// release (its buyers a set); the reconcile rewrites them in today's.
	CheckLayoutOutdated = "layout_outdated"
	// CheckFrozenStale: the sale (a bucket of it) has been frozen longer
	// than any reconcile takes: the reconcile that froze it stopped part
	// way (its process died) and left it so, as a reconcile that cannot
	// finish must; another one finishes it.
	CheckFrozenStale = "frozen_stale"
)

// StaleFreeze is how long a freeze may last before the checks take it for
// one a reconcile left behind: above the longest a live reconcile keeps a
// sale frozen (its wait for the writer, a minute in the order-writer, and
// the rebuild's moments).
const StaleFreeze = 2 * time.Minute

// Size is a voucher's sale in Redis as the periodic check reads it.
type Size struct {
	Exists bool
	Stock  int64
	Buyers int64
	Epoch  string // the replication id it was built under; "" if unknown
	// RedisNow is the replication id of the server that holds the sale
	// (on a cluster, the master of its slot), read with it.
	RedisNow string
	// Outdated: a key of the sale has the type an earlier release wrote.
	Outdated bool
	// FrozenFor is how long the sale (its longest frozen bucket) has been
	// frozen; 0 when it is not.
	FrozenFor time.Duration
}

// Violation is the first invariant the sale s breaks against MySQL's
// stock and order count for its voucher, with what to log of it; "" when
// it breaks none. Order matters: a sale that is missing, outdated or built
// under another replication id says nothing true of its stock or buyers.
func (s Size) Violation(mysqlStock, mysqlOrders int64) (check string, detail []any) {
	switch {
	case !s.Exists:
		return CheckVoucherMissing, nil
	case s.Outdated:
		return CheckLayoutOutdated, nil
	case s.Epoch != "" && s.Epoch != s.RedisNow:
		return CheckEpochChanged, []any{"built_under", s.Epoch, "redis_now", s.RedisNow}
	case s.FrozenFor > StaleFreeze:
		return CheckFrozenStale, []any{"frozen_for", s.FrozenFor}
	case s.Stock > mysqlStock:
		return CheckStockAboveMySQL, []any{"redis_stock", s.Stock, "mysql_stock", mysqlStock}
	case s.Buyers < mysqlOrders:
		return CheckBuyersLost, []any{"redis_buyers", s.Buyers, "mysql_orders", mysqlOrders}
	}
	return "", nil
}

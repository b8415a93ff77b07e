// Package orderdb is the orders in MySQL: settling batches of accepted
// orders idempotently, with MySQL as the final arbiter of the stock, and
// finding a settled order.
package orderdb

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/order"
)

// Outcome is what one batch did.
type Outcome struct {
	Inserted int
	// New are the orders this batch inserted, and Stock each voucher's
	// stock in MySQL after it (read under the row lock): what the writer
	// checks Redis against.
	New    []order.Event
	Stock  map[int64]int64
	Failed map[string]int // by reason
	// Settled is each order this batch settled, as its owner reads it:
	// confirmed, or failed with the reason.
	Settled []order.Status
	Already int // settled by an earlier delivery
	// Collided are orders whose id another order (another user or
	// voucher) already holds: not redeliveries, and not settled here. The
	// id generator repeats an id only if Redis lost its last writes in a
	// crash; the caller must park these where an operator sees them.
	Collided []order.Event
}

type userVoucher struct{ user, voucher int64 }

// errDuplicateKey is ER_DUP_ENTRY, on MySQL and MariaDB alike.
const errDuplicateKey = 1062

// Apply settles a batch of order events in one transaction: each new
// order is inserted and takes one unit of MySQL's stock, or is recorded in
// tb_voucher_order_failure with its reason; an order seen before (a
// redelivery) changes nothing. Writers of the same voucher serialize on its
// tb_seckill_voucher row, locked in voucher order so they cannot deadlock.
//
// Most batches are all new orders of vouchers with stock to spare: those go
// in with one INSERT and one lookup of the failure table. A batch that does not fit, or whose
// INSERT meets an existing order (a redelivery, a second order of a user),
// is rolled back and settled row by row.
func Apply(ctx context.Context, db *sql.DB, events []order.Event) (Outcome, error) {
	events, collided := dedupe(events)
	out := Outcome{Failed: map[string]int{}}
	var err error
	if len(events) > 0 {
		out, err = apply(ctx, db, events, true)
		if errors.Is(err, errNeedsCareful) {
			out, err = apply(ctx, db, events, false)
		}
	}
	out.Collided = append(out.Collided, collided...)
	return out, err
}

// errNeedsCareful sends a batch from the optimistic path to the careful one.
var errNeedsCareful = errors.New("order batch needs row-by-row settling")

func apply(ctx context.Context, db *sql.DB, events []order.Event, optimistic bool) (Outcome, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return Outcome{}, fmt.Errorf("begin order batch: %w", err)
	}
	defer tx.Rollback()

	stock, err := lockStock(ctx, tx, events)
	if err != nil {
		return Outcome{}, err
	}
	var seen known
	if optimistic {
		if !fits(events, stock) {
			return Outcome{}, errNeedsCareful
		}
		// A failed order lives in the other table, where the INSERT's
		// duplicate key cannot see it: without this, one redelivered after
		// a restock would be inserted, and take a unit Redis never sold.
		if failed, err := anyFailed(ctx, tx, events); err != nil || failed {
			return Outcome{}, cmp.Or(err, errNeedsCareful)
		}
	} else if seen, err = lookUp(ctx, tx, events); err != nil {
		return Outcome{}, err
	}
	b := classify(events, stock, seen)
	if err := insert(ctx, tx, b); err != nil {
		var me *mysql.MySQLError
		if optimistic && errors.As(err, &me) && me.Number == errDuplicateKey {
			return Outcome{}, errNeedsCareful
		}
		return Outcome{}, err
	}
	if err := tx.Commit(); err != nil {
		return Outcome{}, fmt.Errorf("commit order batch: %w", err)
	}
	b.out.Stock = make(map[int64]int64, len(stock))
	for v, n := range stock {
		if n >= 0 {
			b.out.Stock[v] = n - b.taken[v]
		}
	}
	return b.out, nil
}

// lockStock locks the batch's voucher rows, in voucher order so that
// writers cannot deadlock, and reads their stock: -1 for a voucher with no
// row.
func lockStock(ctx context.Context, tx *sql.Tx, events []order.Event) (map[int64]int64, error) {
	var vids []int64
	for _, e := range events {
		if !slices.Contains(vids, e.VoucherID) {
			vids = append(vids, e.VoucherID)
		}
	}
	slices.Sort(vids)
	stock := make(map[int64]int64, len(vids))
	for _, v := range vids {
		var s int64
		err := tx.QueryRowContext(ctx, "SELECT stock FROM tb_seckill_voucher WHERE voucher_id = ? FOR UPDATE", v).Scan(&s)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			stock[v] = -1
		case err != nil:
			return nil, fmt.Errorf("lock voucher %d: %w", v, err)
		default:
			stock[v] = s
		}
	}
	return stock, nil
}

// fits reports whether every voucher has stock for all its events: the
// optimistic path's condition.
func fits(events []order.Event, stock map[int64]int64) bool {
	need := map[int64]int64{}
	for _, e := range events {
		need[e.VoucherID]++
	}
	for v, n := range need {
		if stock[v] < n {
			return false
		}
	}
	return true
}

// known is what MySQL already holds of a batch: the orders settled before
// (by id, with their user and voucher) and the users holding an order.
type known struct {
	settled map[int64]userVoucher
	holders map[userVoucher]bool
}

func lookUp(ctx context.Context, tx *sql.Tx, events []order.Event) (known, error) {
	settled, err := settledOrders(ctx, tx, events)
	if err != nil {
		return known{}, err
	}
	holders, err := holdersOf(ctx, tx, events)
	if err != nil {
		return known{}, err
	}
	return known{settled: settled, holders: holders}, nil
}

// settlement is a classified batch: the rows to insert, the units each
// voucher gives, and the outcome.
type settlement struct {
	orders, failures []any // INSERT arguments, row after row
	taken            map[int64]int64
	out              Outcome
}

// classify decides each event: a redelivery or an id collision (settled
// before), a failure with its reason, or a new order taking a unit.
func classify(events []order.Event, stock map[int64]int64, seen known) settlement {
	b := settlement{taken: map[int64]int64{}, out: Outcome{Failed: map[string]int{}}}
	holders := seen.holders
	if holders == nil {
		holders = map[userVoucher]bool{}
	}
	for _, e := range events {
		uv := userVoucher{e.UserID, e.VoucherID}
		if owner, ok := seen.settled[e.OrderID]; ok {
			if owner == uv {
				b.out.Already++
			} else {
				b.out.Collided = append(b.out.Collided, e)
			}
			continue
		}
		reason := ""
		switch {
		case stock[e.VoucherID] < 0:
			reason = order.ReasonUnknownVoucher
		case holders[uv]:
			reason = order.ReasonDuplicateUser
		case stock[e.VoucherID]-b.taken[e.VoucherID] <= 0:
			reason = order.ReasonSoldOut
		}
		// Whole seconds, as the TIMESTAMP columns keep them: MariaDB
		// truncates a fraction, MySQL rounds it; this way both hold, and
		// lookups read, the same time.
		at := time.UnixMilli(e.AcceptedAt).UTC().Truncate(time.Second)
		st := order.Status{ID: e.OrderID, UserID: e.UserID, VoucherID: e.VoucherID, Status: order.StatusConfirmed, CreateTime: at}
		if reason != "" {
			b.failures = append(b.failures, e.OrderID, e.UserID, e.VoucherID, reason, at)
			b.out.Failed[reason]++
			st.Status, st.Reason = order.StatusFailed, reason
			b.out.Settled = append(b.out.Settled, st)
			continue
		}
		b.out.Settled = append(b.out.Settled, st)
		b.orders = append(b.orders, e.OrderID, e.UserID, e.VoucherID, at)
		holders[uv] = true
		b.taken[e.VoucherID]++
		b.out.Inserted++
		b.out.New = append(b.out.New, e)
	}
	return b
}

// insert writes the orders and failures and takes the units.
func insert(ctx context.Context, tx *sql.Tx, b settlement) error {
	if err := insertRows(ctx, tx, "INSERT INTO tb_voucher_order (id, user_id, voucher_id, create_time) VALUES ", 4, b.orders); err != nil {
		return fmt.Errorf("insert orders: %w", err)
	}
	if err := insertRows(ctx, tx, "INSERT INTO tb_voucher_order_failure (order_id, user_id, voucher_id, reason, order_time) VALUES ", 5, b.failures); err != nil {
		return fmt.Errorf("insert order failures: %w", err)
	}
	for v, n := range b.taken {
		res, err := tx.ExecContext(ctx, "UPDATE tb_seckill_voucher SET stock = stock - ? WHERE voucher_id = ? AND stock >= ?", n, v, n)
		if err != nil {
			return fmt.Errorf("take %d units of voucher %d: %w", n, v, err)
		}
		if rows, _ := res.RowsAffected(); rows != 1 {
			return fmt.Errorf("take %d units of voucher %d: stock changed under the row lock", n, v)
		}
	}
	return nil
}

// dedupe keeps the first event of each order id, in acceptance order, so
// that within a batch the earlier buyer gets the last unit. A later event
// with the same id but another user or voucher is no copy: it is returned
// as collided.
func dedupe(events []order.Event) (unique, collided []order.Event) {
	events = slices.Clone(events)
	slices.SortStableFunc(events, func(a, b order.Event) int { return cmp.Compare(a.AcceptedAt, b.AcceptedAt) })
	first := make(map[int64]userVoucher, len(events))
	unique = make([]order.Event, 0, len(events))
	for _, e := range events {
		uv := userVoucher{e.UserID, e.VoucherID}
		owner, seen := first[e.OrderID]
		switch {
		case !seen:
			first[e.OrderID] = uv
			unique = append(unique, e)
		case owner != uv:
			collided = append(collided, e)
		}
	}
	return unique, collided
}

// settledOrders are the batch's orders already in either table, with the
// user and voucher they were settled for.
func settledOrders(ctx context.Context, tx *sql.Tx, events []order.Event) (map[int64]userVoucher, error) {
	ids := make([]any, len(events))
	for i, e := range events {
		ids[i] = e.OrderID
	}
	in := placeholders(len(ids), 1)
	q := "SELECT id, user_id, voucher_id FROM tb_voucher_order WHERE id IN " + in +
		" UNION ALL SELECT order_id, user_id, voucher_id FROM tb_voucher_order_failure WHERE order_id IN " + in
	rows, err := tx.QueryContext(ctx, q, append(ids, ids...)...)
	if err != nil {
		return nil, fmt.Errorf("find settled orders: %w", err)
	}
	defer rows.Close()
	settled := map[int64]userVoucher{}
	for rows.Next() {
		var id int64
		var uv userVoucher
		if err := rows.Scan(&id, &uv.user, &uv.voucher); err != nil {
			return nil, fmt.Errorf("find settled orders: %w", err)
		}
		settled[id] = uv
	}
	return settled, rows.Err()
}

// anyFailed reports whether any order of the batch was settled as failed.
func anyFailed(ctx context.Context, tx *sql.Tx, events []order.Event) (bool, error) {
	ids := make([]any, len(events))
	for i, e := range events {
		ids[i] = e.OrderID
	}
	var n int
	err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM tb_voucher_order_failure WHERE order_id IN "+placeholders(len(ids), 1), ids...).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("find failed orders: %w", err)
	}
	return n > 0, nil
}

// holdersOf are the (user, voucher) pairs of the batch that already have
// an order row. One query per voucher, "voucher_id = ? AND user_id IN
// (...)", so both servers range-scan uk_user_voucher: a row-constructor IN
// is not always planned as an index lookup.
func holdersOf(ctx context.Context, tx *sql.Tx, events []order.Event) (map[userVoucher]bool, error) {
	users := map[int64][]any{}
	for _, e := range events {
		users[e.VoucherID] = append(users[e.VoucherID], e.UserID)
	}
	holders := map[userVoucher]bool{}
	for voucher, ids := range users {
		q := "SELECT user_id FROM tb_voucher_order WHERE voucher_id = ? AND user_id IN " + placeholders(len(ids), 1)
		rows, err := tx.QueryContext(ctx, q, append([]any{voucher}, ids...)...)
		if err != nil {
			return nil, fmt.Errorf("find order holders: %w", err)
		}
		for rows.Next() {
			var u int64
			if err := rows.Scan(&u); err != nil {
				rows.Close()
				return nil, fmt.Errorf("find order holders: %w", err)
			}
			holders[userVoucher{u, voucher}] = true
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("find order holders: %w", err)
		}
	}
	return holders, nil
}

func insertRows(ctx context.Context, tx *sql.Tx, prefix string, width int, args []any) error {
	if len(args) == 0 {
		return nil
	}
	n := len(args) / width
	row := "(" + strings.TrimSuffix(strings.Repeat("?,", width), ",") + ")"
	q := prefix + strings.TrimSuffix(strings.Repeat(row+",", n), ",")
	_, err := tx.ExecContext(ctx, q, args...)
	return err
}

// placeholders is "(?,?,...)" of n items, each a tuple of width when
// width > 1.
func placeholders(n, width int) string {
	item := "?"
	if width > 1 {
		item = "(" + strings.TrimSuffix(strings.Repeat("?,", width), ",") + ")"
	}
	return "(" + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + ")"
}

// Package voucher is the vouchers of the course (tb_voucher, and
// tb_seckill_voucher for flash-sale ones) and their warm copy in Redis.
package voucher

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/seckill/seckill/internal/apperr"
)

// Voucher is the course's Voucher as its client reads it. Stock and the
// window exist only for flash-sale vouchers (type 1).
type Voucher struct {
	ID          int64      `json:"id"`
	ShopID      int64      `json:"shopId"`
	Title       string     `json:"title"`
	SubTitle    string     `json:"subTitle,omitempty"`
	Rules       string     `json:"rules,omitempty"`
	PayValue    int64      `json:"payValue"`
	ActualValue int64      `json:"actualValue"`
	Type        int        `json:"type"`
	Status      int        `json:"status"`
	Stock       *int64     `json:"stock,omitempty"`
	BeginTime   *time.Time `json:"beginTime,omitempty"`
	EndTime     *time.Time `json:"endTime,omitempty"`
}

// The voucher types of the course.
const (
	TypeOrdinary = 0
	TypeSeckill  = 1
)

// The range of a TIMESTAMP column, on both MySQL and MariaDB.
var (
	minTime = time.Date(1970, 1, 2, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(2038, 1, 18, 0, 0, 0, 0, time.UTC)
)

// The outcomes callers branch on.
var (
	// ErrInvalid is a voucher or a change that cannot be made; the
	// message says why.
	ErrInvalid = apperr.New(apperr.Invalid, "invalid voucher")
	// ErrNotFound is a flash-sale voucher id with no row.
	ErrNotFound = apperr.New(apperr.NotFound, "no such flash-sale voucher")
	// ErrNotEnoughStock refuses a change that would take more units than
	// remain unsold.
	ErrNotEnoughStock = apperr.New(apperr.Conflict, "cannot remove more units than remain unsold")
	// ErrNotWarmed means the voucher has no sale in Redis.
	ErrNotWarmed = apperr.New(apperr.Conflict, "the voucher's sale is not in Redis")
)

// Validate checks what the database would not.
func (v Voucher) Validate() error {
	bad := func(why string) error { return ErrInvalid.With("%s", why) }
	switch {
	case v.ShopID <= 0:
		return bad("shopId must be a positive id")
	case v.Title == "" || len(v.Title) > 255:
		return bad("title must have 1 to 255 characters")
	case len(v.SubTitle) > 255 || len(v.Rules) > 1024:
		return bad("subTitle or rules too long")
	case v.PayValue < 0 || v.ActualValue < 0:
		return bad("payValue and actualValue must not be negative")
	}
	if v.Type != TypeSeckill {
		return nil
	}
	switch {
	case v.Stock == nil || *v.Stock < 0 || *v.Stock > 100_000_000:
		return bad("a flash-sale voucher needs a stock from 0 to 100000000")
	case v.BeginTime == nil || v.EndTime == nil:
		return bad("a flash-sale voucher needs beginTime and endTime")
	case !v.EndTime.After(*v.BeginTime):
		return bad("endTime must be after beginTime")
	case v.BeginTime.Before(minTime) || v.EndTime.After(maxTime):
		return bad("beginTime and endTime must lie between 1970-01-02 and 2038-01-18 (a TIMESTAMP column)")
	}
	return nil
}

// Sale is a flash-sale voucher's state where the gate decides: warmed on
// creation, adjusted by an admin's change.
type Sale interface {
	// Warm puts a new voucher's sale in place: its stock and window.
	Warm(ctx context.Context, voucherID, stock int64, begin, end time.Time) error
	// Adjust changes the stock by delta and, when not zero, the window;
	// it returns the stock after, ErrNotEnoughStock or ErrNotWarmed.
	Adjust(ctx context.Context, voucherID, delta int64, begin, end time.Time) (int64, error)
}

// Vouchers is the voucher tables and the flash sale's state in the gate.
type Vouchers struct {
	DB   *sql.DB
	Sale Sale
}

// Create inserts v (tb_voucher, and tb_seckill_voucher for a flash-sale
// voucher, in one transaction) and warms its sale in Redis before
// returning, so the sale can start at once. It returns the new id.
func (vs *Vouchers) Create(ctx context.Context, v Voucher) (int64, error) {
	if err := v.Validate(); err != nil {
		return 0, err
	}
	tx, err := vs.DB.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("create voucher: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO tb_voucher (shop_id, title, sub_title, rules, pay_value, actual_value, type, status)
		VALUES (?, ?, ?, ?, ?, ?, ?, 1)`, v.ShopID, v.Title, v.SubTitle, v.Rules, v.PayValue, v.ActualValue, v.Type)
	if err != nil {
		return 0, fmt.Errorf("insert voucher: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("insert voucher: %w", err)
	}
	if v.Type == TypeSeckill {
		if _, err := tx.ExecContext(ctx, "INSERT INTO tb_seckill_voucher (voucher_id, stock, begin_time, end_time) VALUES (?, ?, ?, ?)",
			id, *v.Stock, v.BeginTime.UTC(), v.EndTime.UTC()); err != nil {
			return 0, fmt.Errorf("insert seckill voucher: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("create voucher: %w", err)
	}
	if v.Type == TypeSeckill {
		if err := vs.Sale.Warm(ctx, id, *v.Stock, *v.BeginTime, *v.EndTime); err != nil {
			return id, err
		}
	}
	return id, nil
}

// List is a shop's vouchers, flash-sale ones with their stock and window.
func (vs *Vouchers) List(ctx context.Context, shopID int64) ([]Voucher, error) {
	rows, err := vs.DB.QueryContext(ctx, `SELECT v.id, v.shop_id, v.title, COALESCE(v.sub_title, ''), COALESCE(v.rules, ''),
		v.pay_value, v.actual_value, v.type, v.status, sv.stock, sv.begin_time, sv.end_time
		FROM tb_voucher v LEFT JOIN tb_seckill_voucher sv ON sv.voucher_id = v.id
		WHERE v.shop_id = ? ORDER BY v.id`, shopID)
	if err != nil {
		return nil, fmt.Errorf("list vouchers of shop %d: %w", shopID, err)
	}
	defer rows.Close()
	list := []Voucher{}
	for rows.Next() {
		var v Voucher
		var stock sql.NullInt64
		var begin, end sql.NullTime
		if err := rows.Scan(&v.ID, &v.ShopID, &v.Title, &v.SubTitle, &v.Rules, &v.PayValue, &v.ActualValue,
			&v.Type, &v.Status, &stock, &begin, &end); err != nil {
			return nil, fmt.Errorf("list vouchers of shop %d: %w", shopID, err)
		}
		if stock.Valid {
			v.Stock, v.BeginTime, v.EndTime = &stock.Int64, &begin.Time, &end.Time
		}
		list = append(list, v)
	}
	return list, rows.Err()
}

// Change is an admin's change to a flash-sale voucher: units added (or
// removed, when negative) and a new window; nil keeps a bound.
type Change struct {
	AddStock  int64      `json:"addStock"`
	BeginTime *time.Time `json:"beginTime"`
	EndTime   *time.Time `json:"endTime"`
}

// ChangeSale applies c to Redis first and MySQL second. Redis first,
// because its stock is the lower of the two while orders are on their way
// to MySQL: if Redis can give up the units, MySQL can too. If MySQL then
// fails, the Redis change is undone. The gate sees the new stock and window
// at once; an API instance that saw the voucher sold out keeps answering
// so for at most its sold-out TTL.
func (vs *Vouchers) ChangeSale(ctx context.Context, id int64, c Change) (stock int64, err error) {
	var begin, end time.Time
	if err := vs.DB.QueryRowContext(ctx, "SELECT begin_time, end_time FROM tb_seckill_voucher WHERE voucher_id = ?", id).Scan(&begin, &end); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0, ErrNotFound
		}
		return 0, fmt.Errorf("read voucher %d: %w", id, err)
	}
	oldBegin, oldEnd := begin, end
	var newBegin, newEnd time.Time
	if c.BeginTime != nil {
		newBegin, begin = *c.BeginTime, *c.BeginTime
	}
	if c.EndTime != nil {
		newEnd, end = *c.EndTime, *c.EndTime
	}
	if !end.After(begin) {
		return 0, ErrInvalid.With("endTime must be after beginTime")
	}
	if begin.Before(minTime) || end.After(maxTime) {
		return 0, ErrInvalid.With("beginTime and endTime must lie between 1970-01-02 and 2038-01-18")
	}
	stock, err = vs.Sale.Adjust(ctx, id, c.AddStock, newBegin, newEnd)
	if err != nil {
		return stock, err
	}
	res, err := vs.DB.ExecContext(ctx, `UPDATE tb_seckill_voucher SET stock = stock + ?,
		begin_time = COALESCE(?, begin_time), end_time = COALESCE(?, end_time)
		WHERE voucher_id = ? AND stock + ? >= 0`, c.AddStock, nullTime(newBegin), nullTime(newEnd), id, c.AddStock)
	if err == nil {
		if n, _ := res.RowsAffected(); n != 1 {
			err = fmt.Errorf("voucher %d: MySQL refused the change", id)
		}
	}
	if err != nil {
		if _, undoErr := vs.Sale.Adjust(context.WithoutCancel(ctx), id, -c.AddStock, oldBegin, oldEnd); undoErr != nil {
			return 0, fmt.Errorf("change voucher %d in MySQL: %w; undoing it in Redis failed too, warm it again: %w", id, err, undoErr)
		}
		return 0, fmt.Errorf("change voucher %d in MySQL: %w", id, err)
	}
	return stock, nil
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}

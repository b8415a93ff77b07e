package orderdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/seckill/seckill/internal/order"
)

var _ order.SettledFinder = (*Orders)(nil)

// Orders finds settled orders in MySQL.
type Orders struct{ DB *sql.DB }

// FindSettled is order orderID as MySQL settled it: a tb_voucher_order
// row (confirmed) or a tb_voucher_order_failure row (failed, with its
// reason).
func (o *Orders) FindSettled(ctx context.Context, orderID int64) (order.Status, bool, error) {
	s := order.Status{ID: orderID, Status: order.StatusConfirmed}
	err := o.DB.QueryRowContext(ctx, "SELECT user_id, voucher_id, create_time FROM tb_voucher_order WHERE id = ?", orderID).
		Scan(&s.UserID, &s.VoucherID, &s.CreateTime)
	if err == nil {
		return s, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return s, false, fmt.Errorf("look up order %d: %w", orderID, err)
	}
	s.Status = order.StatusFailed
	err = o.DB.QueryRowContext(ctx, "SELECT user_id, voucher_id, reason, order_time FROM tb_voucher_order_failure WHERE order_id = ?", orderID).
		Scan(&s.UserID, &s.VoucherID, &s.Reason, &s.CreateTime)
	if err == nil {
		return s, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return s, false, fmt.Errorf("look up failed order %d: %w", orderID, err)
	}
	return order.Status{}, false, nil
}

// FindSettledOf is userID's order for voucherID as MySQL settled it: the
// order row (there is at most one, by uk_user_voucher), else the latest
// failure.
func (o *Orders) FindSettledOf(ctx context.Context, userID, voucherID int64) (order.Status, bool, error) {
	s := order.Status{UserID: userID, VoucherID: voucherID, Status: order.StatusConfirmed}
	err := o.DB.QueryRowContext(ctx, "SELECT id, create_time FROM tb_voucher_order WHERE user_id = ? AND voucher_id = ?", userID, voucherID).
		Scan(&s.ID, &s.CreateTime)
	if err == nil {
		return s, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return s, false, fmt.Errorf("look up the order of user %d for voucher %d: %w", userID, voucherID, err)
	}
	s.Status = order.StatusFailed
	err = o.DB.QueryRowContext(ctx, `SELECT order_id, reason, order_time FROM tb_voucher_order_failure
		WHERE user_id = ? AND voucher_id = ? ORDER BY order_time DESC, order_id DESC LIMIT 1`, userID, voucherID).
		Scan(&s.ID, &s.Reason, &s.CreateTime)
	if err == nil {
		return s, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return s, false, fmt.Errorf("look up the failed order of user %d for voucher %d: %w", userID, voucherID, err)
	}
	return order.Status{}, false, nil
}

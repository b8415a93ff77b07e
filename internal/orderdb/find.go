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

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
type Orders struct {
	DB *sql.DB
	// AfterFirstTruthRead, when set, is called between SaleTruth's
	// reads: a test's seam.
	AfterFirstTruthRead func()
}

// FindSettled is order orderID as MySQL settled it: a tb_voucher_order
// row (confirmed) or a tb_voucher_order_failure row (failed, with its
// reason), in one statement.
func (o *Orders) FindSettled(ctx context.Context, orderID int64) (order.Status, bool, error) {
	s := order.Status{ID: orderID}
	err := o.DB.QueryRowContext(ctx, `SELECT user_id, voucher_id, '' AS reason, create_time, 0 AS failed FROM tb_voucher_order WHERE id = ?
		UNION ALL SELECT user_id, voucher_id, reason, order_time, 1 FROM tb_voucher_order_failure WHERE order_id = ?
		ORDER BY failed LIMIT 1`, orderID, orderID).
		Scan(&s.UserID, &s.VoucherID, &s.Reason, &s.CreateTime, new(int))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return order.Status{}, false, nil
	case err != nil:
		return order.Status{}, false, fmt.Errorf("look up order %d: %w", orderID, err)
	}
	s.Status = order.StatusConfirmed
	if s.Reason != "" {
		s.Status = order.StatusFailed
	}
	return s, true, nil
}

// FindSettledOf is userID's order for voucherID as MySQL settled it: the
// order row (there is at most one, by uk_user_voucher), else the latest
// failure, in one statement.
func (o *Orders) FindSettledOf(ctx context.Context, userID, voucherID int64) (order.Status, bool, error) {
	s := order.Status{UserID: userID, VoucherID: voucherID}
	err := o.DB.QueryRowContext(ctx, `SELECT id, '' AS reason, create_time AS at, 0 AS failed FROM tb_voucher_order WHERE user_id = ? AND voucher_id = ?
		UNION ALL (SELECT order_id, reason, order_time, 1 FROM tb_voucher_order_failure
			WHERE user_id = ? AND voucher_id = ? ORDER BY order_time DESC, order_id DESC LIMIT 1)
		ORDER BY failed LIMIT 1`, userID, voucherID, userID, voucherID).
		Scan(&s.ID, &s.Reason, &s.CreateTime, new(int))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return order.Status{}, false, nil
	case err != nil:
		return order.Status{}, false, fmt.Errorf("look up the order of user %d for voucher %d: %w", userID, voucherID, err)
	}
	s.Status = order.StatusConfirmed
	if s.Reason != "" {
		s.Status = order.StatusFailed
	}
	return s, true, nil
}

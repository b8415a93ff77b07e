package order

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/seckill/seckill/internal/seckill"
)

// The states of an accepted order.
const (
	StatusPending   = "pending"   // accepted, not yet in MySQL
	StatusConfirmed = "confirmed" // a tb_voucher_order row
	StatusFailed    = "failed"    // refused by MySQL, with a reason
)

// Status is an order as its owner sees it.
type Status struct {
	ID         int64     `json:"id,string"`
	VoucherID  int64     `json:"voucherId"`
	Status     string    `json:"status"`
	Reason     string    `json:"reason,omitempty"`
	CreateTime time.Time `json:"createTime"`
}

// Lookup finds userID's order orderID: in MySQL, else among the pending
// reservations. Someone else's order is as unknown as a missing one.
func Lookup(ctx context.Context, db *sql.DB, store *seckill.Store, orderID, userID int64) (Status, bool, error) {
	s := Status{ID: orderID}
	var owner int64
	err := db.QueryRowContext(ctx, "SELECT user_id, voucher_id, create_time FROM tb_voucher_order WHERE id = ?", orderID).
		Scan(&owner, &s.VoucherID, &s.CreateTime)
	if err == nil {
		s.Status = StatusConfirmed
		return s, owner == userID, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return s, false, fmt.Errorf("look up order %d: %w", orderID, err)
	}
	err = db.QueryRowContext(ctx, "SELECT user_id, voucher_id, reason, order_time FROM tb_voucher_order_failure WHERE order_id = ?", orderID).
		Scan(&owner, &s.VoucherID, &s.Reason, &s.CreateTime)
	if err == nil {
		s.Status = StatusFailed
		return s, owner == userID, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return s, false, fmt.Errorf("look up failed order %d: %w", orderID, err)
	}
	r, ok, err := store.FindReservation(ctx, orderID)
	if err != nil || !ok {
		return s, false, err
	}
	s.Status, s.VoucherID, s.CreateTime = StatusPending, r.VoucherID, r.AcceptedAt.UTC()
	return s, r.UserID == userID, nil
}

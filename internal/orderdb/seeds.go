package orderdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Seeds keeps the draws' seeds with their sales (tb_seckill_voucher).
type Seeds struct{ DB *sql.DB }

// Seed keeps fresh as voucherID's draw seed unless one is kept already,
// and returns the one kept: the first drawer's, whichever asks.
func (s Seeds) Seed(ctx context.Context, voucherID int64, fresh string) (string, error) {
	if _, err := s.DB.ExecContext(ctx, "UPDATE tb_seckill_voucher SET draw_seed = ? WHERE voucher_id = ? AND draw_seed IS NULL",
		fresh, voucherID); err != nil {
		return "", fmt.Errorf("keep the draw seed of voucher %d: %w", voucherID, err)
	}
	var seed sql.NullString
	err := s.DB.QueryRowContext(ctx, "SELECT draw_seed FROM tb_seckill_voucher WHERE voucher_id = ?", voucherID).Scan(&seed)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("the draw seed of voucher %d: no tb_seckill_voucher row", voucherID)
	}
	if err != nil {
		return "", fmt.Errorf("the draw seed of voucher %d: %w", voucherID, err)
	}
	return seed.String, nil
}

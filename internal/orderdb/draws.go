package orderdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/seckill/seckill/internal/sale"
)

// DrawRecords keeps what a draw is made from with its sale: the seed
// (tb_seckill_voucher.draw_seed) and the entrants (tb_draw_entrant, their
// count in draw_entrants).
type DrawRecords struct{ DB *sql.DB }

// Seed keeps fresh as voucherID's draw seed unless one is kept already,
// and returns the one kept: the first drawer's, whichever asks.
func (r DrawRecords) Seed(ctx context.Context, voucherID int64, fresh string) (string, error) {
	if _, err := r.DB.ExecContext(ctx, "UPDATE tb_seckill_voucher SET draw_seed = ? WHERE voucher_id = ? AND draw_seed IS NULL",
		fresh, voucherID); err != nil {
		return "", fmt.Errorf("keep the draw seed of voucher %d: %w", voucherID, err)
	}
	var seed sql.NullString
	err := r.DB.QueryRowContext(ctx, "SELECT draw_seed FROM tb_seckill_voucher WHERE voucher_id = ?", voucherID).Scan(&seed)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", fmt.Errorf("the draw seed of voucher %d: no tb_seckill_voucher row", voucherID)
	case err != nil:
		return "", fmt.Errorf("the draw seed of voucher %d: %w", voucherID, err)
	case !seed.Valid:
		return "", fmt.Errorf("the draw seed of voucher %d: none kept", voucherID)
	}
	return seed.String, nil
}

// Entrants are voucherID's draw entrants of record; kept is false until
// KeepEntrants has kept them. The count and the rows are read in one
// snapshot, so a keeping that commits between the two reads is whole in
// both or in neither.
func (r DrawRecords) Entrants(ctx context.Context, voucherID int64) (es []sale.Entrant, kept bool, err error) {
	tx, err := r.DB.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, false, wrapEntrants(voucherID, err)
	}
	defer tx.Rollback()
	var count sql.NullInt64
	err = tx.QueryRowContext(ctx, "SELECT draw_entrants FROM tb_seckill_voucher WHERE voucher_id = ?", voucherID).Scan(&count)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, fmt.Errorf("the draw entrants of voucher %d: no tb_seckill_voucher row", voucherID)
	}
	if err != nil || !count.Valid {
		return nil, false, wrapEntrants(voucherID, err)
	}
	rows, err := tx.QueryContext(ctx, "SELECT user_id, order_id FROM tb_draw_entrant WHERE voucher_id = ?", voucherID)
	if err != nil {
		return nil, false, wrapEntrants(voucherID, err)
	}
	defer rows.Close()
	es = make([]sale.Entrant, 0, count.Int64)
	for rows.Next() {
		var e sale.Entrant
		if err := rows.Scan(&e.UserID, &e.OrderID); err != nil {
			return nil, false, wrapEntrants(voucherID, err)
		}
		es = append(es, e)
	}
	if err := rows.Err(); err != nil {
		return nil, false, wrapEntrants(voucherID, err)
	}
	if int64(len(es)) != count.Int64 {
		return nil, false, fmt.Errorf("the draw entrants of voucher %d: %d rows, %d recorded", voucherID, len(es), count.Int64)
	}
	return es, true, nil
}

func wrapEntrants(voucherID int64, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("the draw entrants of voucher %d: %w", voucherID, err)
}

// entrantRows is how many entrants one INSERT carries.
const entrantRows = 1000

// KeepEntrants keeps es as voucherID's entrants of record, in one
// transaction with their count, unless some are kept already (another
// drawer's): the caller reads them back with Entrants either way.
func (r DrawRecords) KeepEntrants(ctx context.Context, voucherID int64, es []sale.Entrant) error {
	tx, err := r.DB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("keep the draw entrants of voucher %d: %w", voucherID, err)
	}
	defer tx.Rollback()
	var count sql.NullInt64
	// The row's lock makes a second drawer wait for the first's commit,
	// then find the count set.
	if err := tx.QueryRowContext(ctx, "SELECT draw_entrants FROM tb_seckill_voucher WHERE voucher_id = ? FOR UPDATE", voucherID).Scan(&count); err != nil {
		return fmt.Errorf("keep the draw entrants of voucher %d: %w", voucherID, err)
	}
	if count.Valid {
		return nil
	}
	for start := 0; start < len(es); start += entrantRows {
		part := es[start:min(len(es), start+entrantRows)]
		args := make([]any, 0, 3*len(part))
		for _, e := range part {
			args = append(args, voucherID, e.UserID, e.OrderID)
		}
		q := "INSERT INTO tb_draw_entrant (voucher_id, user_id, order_id) VALUES " + strings.Repeat("(?, ?, ?), ", len(part)-1) + "(?, ?, ?)"
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("keep the draw entrants of voucher %d: %w", voucherID, err)
		}
	}
	if _, err := tx.ExecContext(ctx, "UPDATE tb_seckill_voucher SET draw_entrants = ? WHERE voucher_id = ?", len(es), voucherID); err != nil {
		return fmt.Errorf("keep the draw entrants of voucher %d: %w", voucherID, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("keep the draw entrants of voucher %d: %w", voucherID, err)
	}
	return nil
}

package orderdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/seckill/seckill/internal/sale"
)

// SaleTruth is MySQL's record of a flash-sale voucher: its stock and
// window, who holds an order, and which of the pending order ids MySQL has
// settled (in either table). Every read is of one snapshot (a read-only
// REPEATABLE READ transaction: InnoDB takes it at the first read), so a
// batch the writer commits meanwhile is wholly in the truth or wholly out:
// never its holder without its unit, or its unit without its holder.
func (o *Orders) SaleTruth(ctx context.Context, voucherID int64, pending []int64) (sale.Truth, bool, error) {
	t := sale.Truth{Holders: map[int64]int64{}, Settled: map[int64]bool{}}
	tx, err := o.DB.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return t, false, fmt.Errorf("read voucher %d: begin a snapshot: %w", voucherID, err)
	}
	defer tx.Rollback()
	var window int64
	err = tx.QueryRowContext(ctx, "SELECT stock, begin_time, end_time, stock_buckets, admission_window FROM tb_seckill_voucher WHERE voucher_id = ?", voucherID).
		Scan(&t.Stock, &t.Begin, &t.End, &t.Buckets, &window)
	if errors.Is(err, sql.ErrNoRows) {
		return t, false, nil
	}
	if err != nil {
		return t, false, fmt.Errorf("read voucher %d: %w", voucherID, err)
	}
	t.Draw = time.Duration(window) * time.Second
	if o.AfterFirstTruthRead != nil {
		o.AfterFirstTruthRead()
	}
	if err := tx.QueryRowContext(ctx, `SELECT GREATEST(COALESCE((SELECT MAX(id) FROM tb_voucher_order), 0),
		COALESCE((SELECT MAX(order_id) FROM tb_voucher_order_failure), 0))`).Scan(&t.MaxOrderID); err != nil {
		return t, false, fmt.Errorf("largest order id: %w", err)
	}
	rows, err := tx.QueryContext(ctx, "SELECT user_id, id FROM tb_voucher_order WHERE voucher_id = ?", voucherID)
	if err != nil {
		return t, false, fmt.Errorf("order holders of voucher %d: %w", voucherID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var u, id int64
		if err := rows.Scan(&u, &id); err != nil {
			return t, false, fmt.Errorf("order holders of voucher %d: %w", voucherID, err)
		}
		t.Holders[u] = id
	}
	if err := rows.Err(); err != nil {
		return t, false, fmt.Errorf("order holders of voucher %d: %w", voucherID, err)
	}
	rows.Close()
	const chunk = 1000
	for start := 0; start < len(pending); start += chunk {
		ids := pending[start:min(start+chunk, len(pending))]
		args := make([]any, 0, 2*len(ids))
		for _, id := range ids {
			args = append(args, id)
		}
		args = append(args, args...)
		in := placeholders(len(ids), 1)
		settled, err := tx.QueryContext(ctx, "SELECT id FROM tb_voucher_order WHERE id IN "+in+
			" UNION ALL SELECT order_id FROM tb_voucher_order_failure WHERE order_id IN "+in, args...)
		if err != nil {
			return t, false, fmt.Errorf("settled orders of voucher %d: %w", voucherID, err)
		}
		for settled.Next() {
			var id int64
			if err := settled.Scan(&id); err != nil {
				settled.Close()
				return t, false, fmt.Errorf("settled orders of voucher %d: %w", voucherID, err)
			}
			t.Settled[id] = true
		}
		err = settled.Err()
		settled.Close()
		if err != nil {
			return t, false, fmt.Errorf("settled orders of voucher %d: %w", voucherID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return t, false, fmt.Errorf("read voucher %d: end the snapshot: %w", voucherID, err)
	}
	return t, true, nil
}

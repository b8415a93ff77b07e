package gate

import (
	"context"
	"strconv"

	"github.com/seckill/seckill/internal/salestate"
)

// GateCalls is how many gate script calls the store has made.
func (s *Store) GateCalls() int64 { return s.tries.calls.Load() }

// TryBatch runs the gate script once for one batch of attempts, {user id,
// order id} each, on a voucher of one bucket: its four numbers per attempt.
func (s *Store) TryBatch(ctx context.Context, voucherID int64, attempts ...[2]int64) ([]int64, error) {
	batch := make([]*attempt, len(attempts))
	for i, a := range attempts {
		batch[i] = &attempt{user: strconv.FormatInt(a[0], 10), order: strconv.FormatInt(a[1], 10)}
	}
	return runBatch(ctx, s.gate, s.Bucket(salestate.LayoutOf(voucherID, 1), 0).List(), 1, batch)
}

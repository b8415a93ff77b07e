package gate

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"
)

// SetBeforeRebuildScript lets a test act just before the last step of a
// bucket's rebuild, or stop the rebuild there with an error.
func SetBeforeRebuildScript(f func(bucket int) error) (restore func()) {
	beforeRebuildScript = f
	return func() { beforeRebuildScript = func(int) error { return nil } }
}

// SetAfterFirstTake lets a test act between the two steps of the first
// transfer only (stop its mover with an error, rebuild a bucket); done
// reports whether that transfer has come.
func SetAfterFirstTake(f func() error) (done func() bool, restore func()) {
	var once atomic.Bool
	afterTake = func() error {
		if once.CompareAndSwap(false, true) {
			return f()
		}
		return nil
	}
	return once.Load, func() { afterTake = func() error { return nil } }
}

// SetAfterAdjustStep lets a test act after each bucket's step of a change
// of a sale in several.
func SetAfterAdjustStep(f func(bucket int)) (restore func()) {
	afterAdjustStep = f
	return func() { afterAdjustStep = func(int) {} }
}

// SetLayoutClock sets the clock by which the store's remembered layouts
// age.
func (s *Store) SetLayoutClock(clock func() time.Time) { s.layouts.clock = clock }

// GateCalls is how many gate script calls the store has made.
func (s *Store) GateCalls() int64 { return s.tries.calls.Load() }

// TryBatch runs the gate script once for one batch of attempts, {user id,
// order id} each, on a voucher of one bucket: its four numbers per attempt.
func (s *Store) TryBatch(ctx context.Context, voucherID int64, attempts ...[2]int64) ([]int64, error) {
	batch := make([]*attempt, len(attempts))
	for i, a := range attempts {
		batch[i] = &attempt{user: strconv.FormatInt(a[0], 10), order: strconv.FormatInt(a[1], 10)}
	}
	return runBatch(ctx, s.gate, LayoutOf(voucherID, 1).bucketKeys(s.prefix, 0).list(), 1, batch)
}

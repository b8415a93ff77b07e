package gate

import (
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

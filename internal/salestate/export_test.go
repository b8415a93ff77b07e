package salestate

import "time"

// SetLayoutClock sets the clock by which the store's remembered layouts
// age.
func (s *Store) SetLayoutClock(clock func() time.Time) { s.layouts.clock = clock }

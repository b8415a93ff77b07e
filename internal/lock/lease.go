package lock

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Lease runs a piece of work in one place at a time: every process runs
// one, and whichever holds the lock does the work, every Interval, while
// the others try to take the lock every Interval. The lock's watchdog
// extends it while its holder lives; a holder that dies or stalls past
// TTL loses it, and another takes over within TTL plus an Interval.
type Lease struct {
	Locks    *Client
	Name     string // the lock's name
	TTL      time.Duration
	Interval time.Duration
	Logger   *slog.Logger
	// What the lease is for, in the log: "relay lease".
	What string
}

// Run calls work every Interval while it holds the lease, with a context
// that ends when the lease is lost or ctx ends, and releases the lease as
// it returns (when ctx ends). A failed work, or a Redis that cannot be
// asked for the lease, is logged and tried again at the next interval.
func (l *Lease) Run(ctx context.Context, work func(ctx context.Context) error) error {
	t := time.NewTicker(l.Interval)
	defer t.Stop()
	var held *Lock
	defer func() {
		if held != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			_ = held.Release(rctx)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if held != nil && held.Context().Err() != nil {
			l.Logger.Warn(l.What+" lost; another process may take over", "fence", held.Fence, "cause", context.Cause(held.Context()))
			held = nil
		}
		if held == nil {
			got, err := l.Locks.Acquire(ctx, l.Name, Options{TTL: l.TTL, Watchdog: true})
			switch {
			case errors.Is(err, ErrNotObtained):
				continue
			case err != nil:
				l.Logger.Warn(l.What+": cannot ask Redis; retrying at the next interval", "err", err)
				continue
			}
			held = got
			l.Logger.Info(l.What+" taken: this process does the work", "fence", got.Fence)
		}
		wctx, cancel := context.WithCancel(held.Context())
		stop := context.AfterFunc(ctx, cancel)
		err := work(wctx)
		stop()
		cancel()
		if err != nil && wctx.Err() == nil {
			l.Logger.Warn(l.What+": the work failed; retrying at the next interval", "err", err)
		}
	}
}

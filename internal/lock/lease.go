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
	return l.RunFenced(ctx, func(ctx context.Context, _ int64) error { return work(ctx) })
}

// RunFenced is Run for a work that writes a fenced resource: it is given
// the lease's fencing token, and a work that fails with ErrStale (the
// resource has seen a newer token) gives the lease up, to take it again
// under a new token at the next interval.
func (l *Lease) RunFenced(ctx context.Context, work func(ctx context.Context, fence int64) error) error {
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
		err := work(wctx, held.Fence)
		stop()
		cancel()
		if errors.Is(err, ErrStale) {
			l.Logger.Warn(l.What+": a newer holder's token was seen; taking the lease again", "fence", held.Fence, "err", err)
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = held.Release(rctx)
			rcancel()
			held = nil
			continue
		}
		if err != nil && wctx.Err() == nil {
			l.Logger.Warn(l.What+": the work failed; retrying at the next interval", "err", err)
		}
	}
}

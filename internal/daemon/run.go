package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/health"
)

// Worker is a long-running loop of a daemon (a Kafka consumer, the binlog
// follower). Run returns when ctx ends, after finishing or abandoning its
// in-flight work cleanly; an error return stops the whole daemon.
type Worker struct {
	Name string
	Run  func(ctx context.Context) error
}

// Daemon runs a background program: its admin endpoints, its dependency
// monitor and its workers, until a signal, then shuts them down in order.
type Daemon struct {
	Logger          *slog.Logger
	Monitor         *health.Monitor
	Registry        *prometheus.Registry
	AdminAddr       string
	ShutdownTimeout time.Duration
}

// Run blocks until ctx ends (SIGTERM) or a worker fails. Shutdown order:
// stop the workers (they commit or abandon their batch), stop the admin
// server, stop the monitor, then the closers (Kafka writers, MySQL, Redis).
// All of it is bounded by ShutdownTimeout.
func (d *Daemon) Run(ctx context.Context, workers []Worker, closers ...Step) error {
	admin, err := ListenAdmin(d.AdminAddr, d.Monitor, d.Registry)
	if err != nil {
		return err
	}
	adminErr := make(chan error, 1)
	go func() { adminErr <- admin.Serve() }()
	d.Logger.Info("admin endpoints listening", "addr", "http://"+admin.Addr(), "paths", "/healthz /readyz /metrics")

	monitorCtx, stopMonitor := context.WithCancel(context.Background())
	monitorDone := make(chan struct{})
	go func() { defer close(monitorDone); d.Monitor.Run(monitorCtx) }()

	workCtx, stopWork := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	workerErr := make(chan error, len(workers))
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Run(workCtx); err != nil && !errors.Is(err, context.Canceled) {
				workerErr <- fmt.Errorf("worker %s: %w", w.Name, err)
			}
		}()
	}
	workersDone := make(chan struct{})
	go func() { wg.Wait(); close(workersDone) }()

	var cause error
	select {
	case <-ctx.Done():
		d.Logger.Info("shutting down", "timeout", d.ShutdownTimeout)
	case cause = <-workerErr:
		d.Logger.Error("stopping after a worker failed", "err", cause)
	case cause = <-adminErr:
		d.Logger.Error("stopping after the admin server failed", "err", cause)
	}

	steps := append([]Step{
		{Name: "workers", Do: func(ctx context.Context) error {
			stopWork()
			select {
			case <-workersDone:
				return nil
			case <-ctx.Done():
				return fmt.Errorf("workers still running: %w", ctx.Err())
			}
		}},
		{Name: "admin server", Do: admin.Shutdown},
		{Name: "dependency monitor", Do: func(ctx context.Context) error {
			stopMonitor()
			select {
			case <-monitorDone:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}},
	}, closers...)
	return errors.Join(cause, Shutdown(d.Logger, d.ShutdownTimeout, steps...))
}

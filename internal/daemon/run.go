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

// Worker is a long-running loop of a program (a Kafka consumer, the binlog
// follower, the HTTP server). Run returns when ctx ends, after finishing or
// abandoning its in-flight work cleanly; an error return stops the whole
// program.
type Worker struct {
	Name string
	Run  func(ctx context.Context) error
}

// Daemon runs a program's admin endpoints, its dependency monitor and its
// workers from Start until Stop, which shuts them down in order.
type Daemon struct {
	Logger   *slog.Logger
	Monitor  *health.Monitor
	Registry *prometheus.Registry
	// AdminAddr is where /healthz, /readyz, /metrics and pprof listen;
	// empty for none.
	AdminAddr string
	// Pprof serves /debug/pprof/ on the admin listener: off unless asked
	// for (SECKILL_PPROF), since a profile costs the program CPU and shows
	// its memory to whoever reaches the port.
	Pprof           bool
	ShutdownTimeout time.Duration
	Workers         []Worker
	// Closers run after the workers, the admin server and the monitor
	// have stopped: Kafka writers, MySQL, Redis.
	Closers []Step

	admin       *AdminServer
	stopMonitor context.CancelFunc
	monitorDone chan struct{}
	stopWork    context.CancelFunc
	workersDone chan struct{}
	failed      chan error // the first worker or admin failure
	done        chan struct{}
	failOnce    sync.Once
}

// Start binds the admin address (a taken port fails the start) and starts
// the monitor and the workers.
func (d *Daemon) Start() error {
	d.failed, d.done = make(chan error, 1), make(chan struct{})
	if d.AdminAddr != "" {
		admin, err := ListenAdmin(d.AdminAddr, d.Monitor, d.Registry, d.Pprof)
		if err != nil {
			return err
		}
		d.admin = admin
		go func() {
			if err := admin.Serve(); err != nil {
				d.fail(err)
			}
		}()
		paths := "/healthz /readyz /metrics"
		if d.Pprof {
			paths += " /debug/pprof/"
		}
		d.Logger.Info("admin endpoints listening", "addr", "http://"+admin.Addr(), "paths", paths)
	}

	var monitorCtx context.Context
	monitorCtx, d.stopMonitor = context.WithCancel(context.Background())
	d.monitorDone = make(chan struct{})
	go func() { defer close(d.monitorDone); d.Monitor.Run(monitorCtx) }()

	var workCtx context.Context
	workCtx, d.stopWork = context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, w := range d.Workers {
		wg.Go(func() {
			if err := w.Run(workCtx); err != nil && !errors.Is(err, context.Canceled) {
				d.fail(fmt.Errorf("worker %s: %w", w.Name, err))
			}
		})
	}
	d.workersDone = make(chan struct{})
	go func() { wg.Wait(); close(d.workersDone) }()
	return nil
}

func (d *Daemon) fail(err error) {
	d.failOnce.Do(func() {
		d.failed <- err
		close(d.done)
	})
}

// Done is closed when a worker or the admin server failed: the program
// should stop.
func (d *Daemon) Done() <-chan struct{} { return d.done }

// BoundAdminAddr is the bound admin address, "" when there is none.
func (d *Daemon) BoundAdminAddr() string {
	if d.admin == nil {
		return ""
	}
	return d.admin.Addr()
}

// Stop shuts down in order: the workers (they commit or abandon their
// batch), the admin server, the monitor, then the closers; all of it
// within ShutdownTimeout. It returns the failure that stopped the program,
// if any, with the shutdown's own errors.
func (d *Daemon) Stop() error {
	var cause error
	select {
	case cause = <-d.failed:
		d.Logger.Error("stopping after a failure", "err", cause)
	default:
		d.Logger.Info("shutting down", "timeout", d.ShutdownTimeout)
	}
	steps := []Step{{Name: "workers", Do: func(ctx context.Context) error {
		d.stopWork()
		select {
		case <-d.workersDone:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("workers still running: %w", ctx.Err())
		}
	}}}
	if d.admin != nil {
		steps = append(steps, Step{Name: "admin server", Do: d.admin.Shutdown})
	}
	steps = append(steps, Step{Name: "dependency monitor", Do: func(ctx context.Context) error {
		d.stopMonitor()
		select {
		case <-d.monitorDone:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}})
	return errors.Join(cause, Shutdown(d.Logger, d.ShutdownTimeout, append(steps, d.Closers...)...))
}

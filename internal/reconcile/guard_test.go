package reconcile_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/testsupport"
)

// logged keeps every record a logger wrote, for the tests that assert what
// an operator reads.
type logged struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *logged) Enabled(context.Context, slog.Level) bool { return true }
func (l *logged) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logged) WithGroup(string) slog.Handler            { return l }
func (l *logged) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r)
	return nil
}

// at are the messages logged at level.
func (l *logged) at(level slog.Level) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.records {
		if r.Level == level {
			out = append(out, r.Message)
		}
	}
	return out
}

// watchedBacklog counts the reconcile's reads of the writer's progress.
type watchedBacklog struct {
	reconcile.Backlog
	reads atomic.Int64
}

func (w *watchedBacklog) Reached(ctx context.Context, ends map[int]int64) (bool, error) {
	w.reads.Add(1)
	return w.Backlog.Reached(ctx, ends)
}

// A graceful stop that cancels a reconcile is no operator's task: the next
// start's check finds the same violation and reconciles again. It is said
// at INFO; ERROR is kept for a reconcile that failed on its own.
func TestGuardStoppedByTheShutdownLogsNoError(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	const v = 60
	g.onSale(t, v, 5, 5)
	pub := broker.NewOrderPublisher(broker.NewProducer(g.k.Brokers, g.topic, 0), 5*time.Second)
	defer pub.Close()
	// An event the writer never consumes: the reconcile waits for it.
	if err := pub.Publish(ctx, order.Event{OrderID: 1, UserID: 1, VoucherID: v, AcceptedAt: time.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	log := &logged{}
	backlog := &watchedBacklog{Backlog: g.rec.Backlog}
	g.rec.Backlog, g.rec.Logger, g.rec.Wait = backlog, slog.New(log), time.Minute
	guard := reconcile.NewGuard(g.rec, 2*time.Minute, prometheus.NewRegistry())
	guard.Violated(v, sale.CheckEpochChanged)
	testsupport.Wait(t, 20*time.Second, "the reconcile waiting for the writer", func() bool { return backlog.reads.Load() > 0 })
	if err := guard.Close(); err != nil {
		t.Fatal(err)
	}
	if errs := log.at(slog.LevelError); len(errs) > 0 {
		t.Fatalf("a reconcile the shutdown stopped logged at ERROR: %q", errs)
	}
	infos := strings.Join(log.at(slog.LevelInfo), "\n")
	if !strings.Contains(infos, "stopped by the shutdown; the next start redoes it") {
		t.Fatalf("INFO records %q; want the stop said there", infos)
	}
	if d, err := g.store.Gate.Try(ctx, v, 2, 2); err != nil || d.Err != nil {
		t.Fatalf("the sale after the stopped reconcile: %v %v; want it selling as it was", d.Err, err)
	}
}

// flakySale fails its first freeze as a master rejoining the cluster does.
type flakySale struct {
	reconcile.Sale
	fails atomic.Int64
}

func (f *flakySale) FreezeSuspect(ctx context.Context, v, fence int64) error {
	if f.fails.Add(1) == 1 {
		return errors.New("CLUSTERDOWN The cluster is down")
	}
	return f.Sale.FreezeSuspect(ctx, v, fence)
}

// A reconcile that failed on a passing state is run again within seconds,
// not left to the periodic check's next round or to an operator.
func TestGuardRetriesAFailedReconcile(t *testing.T) {
	g := newRig(t)
	const v = 61
	g.onSale(t, v, 7, 9) // Redis above MySQL: what the reconcile repairs
	log := &logged{}
	g.rec.Sale, g.rec.Logger = &flakySale{Sale: g.store.Repair}, slog.New(log)
	guard := reconcile.NewGuard(g.rec, time.Minute, prometheus.NewRegistry())
	guard.RetryMin = 100 * time.Millisecond
	defer guard.Close()
	guard.Violated(v, sale.CheckStockAboveMySQL)
	testsupport.Wait(t, 10*time.Second, "the sale rebuilt from MySQL", func() bool { return g.stock(t, v) == 7 })
	if warns := log.at(slog.LevelWarn); len(warns) < 1 || !strings.Contains(warns[0], "trying again") {
		t.Fatalf("WARN records %q; want the failure said, with the retry", warns)
	}
}

// A shutdown during the wait before a retry ends it at once, said at INFO.
func TestGuardCloseDuringTheRetryWait(t *testing.T) {
	g := newRig(t)
	const v = 62
	g.onSale(t, v, 7, 9)
	log := &logged{}
	g.rec.Sale, g.rec.Logger = &flakySale{Sale: g.store.Repair}, slog.New(log)
	guard := reconcile.NewGuard(g.rec, time.Minute, prometheus.NewRegistry())
	guard.RetryMin, guard.RetryFor = time.Hour, 2*time.Hour
	guard.Violated(v, sale.CheckStockAboveMySQL)
	testsupport.Wait(t, 10*time.Second, "the first failure", func() bool { return len(log.at(slog.LevelWarn)) == 1 })
	closed := make(chan struct{})
	go func() { _ = guard.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for the retry's hour")
	}
	if !strings.Contains(strings.Join(log.at(slog.LevelInfo), "\n"), "stopped by the shutdown") {
		t.Fatalf("INFO records %q; want the stop said", log.at(slog.LevelInfo))
	}
}

// A reconcile that keeps failing is given up once its waits took
// RetryFor, said at ERROR with what to do, and counted once as failed.
// Each try here takes longer than RetryFor, as on a loaded machine: the
// tries still come, since the waits are counted and not the clock (with a
// deadline on the clock, a loaded CI run gave up after the first try).
func TestGuardGivesUpAfterRetryFor(t *testing.T) {
	g := newRig(t)
	const v = 63
	g.onSale(t, v, 7, 9)
	log := &logged{}
	g.rec.Sale, g.rec.Logger = &failingSale{Sale: g.store.Repair, takes: 250 * time.Millisecond}, slog.New(log)
	guard := reconcile.NewGuard(g.rec, time.Minute, prometheus.NewRegistry())
	guard.RetryMin, guard.RetryFor = 10*time.Millisecond, 200*time.Millisecond
	defer guard.Close()
	guard.Violated(v, sale.CheckStockAboveMySQL)
	testsupport.Wait(t, 10*time.Second, "the guard giving up", func() bool {
		errs := log.at(slog.LevelError)
		return len(errs) == 2 && strings.Contains(errs[1], "giving up: run seckillctl reconcile")
	})
	// Waits of 10, 20, 40 and 80 ms; the next, 160, would pass 200.
	if warns := len(log.at(slog.LevelWarn)); warns != 4 {
		t.Fatalf("%d retries said, want 4 before giving up", warns)
	}
}

// failingSale cannot be frozen: the reconcile never gets anywhere, each
// try after takes.
type failingSale struct {
	reconcile.Sale
	takes time.Duration
}

func (f failingSale) FreezeSuspect(context.Context, int64, int64) error {
	time.Sleep(f.takes) // the test is about a dependency that answers slowly
	return errors.New("injected: CLUSTERDOWN for good")
}

package orderwriter_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/orderwriter"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
)

// A sale is committed to MySQL before it is warmed in Redis, so a check
// can read it in between. Taken for a sale Redis lost, it was logged as
// lost writes, counted as a violated invariant and reconciled while its
// creator warmed it. The check reads a missing sale again, with its MySQL
// row, MissingRecheck later, before it reports it: a sale warmed meanwhile
// (here with a restock made meanwhile, MySQL first as a restock does), or
// ended meanwhile, is not reported; one still missing is.
func TestSaleCheckDoesNotReportASaleBeingWarmed(t *testing.T) {
	r, m := testsupport.MustRedis(t), testsupport.MustMySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store := saletest.New(r.Client, r.Prefix)
	const warming, lost, ending = 70, 71, 73
	for _, v := range []int64{warming, lost, ending} {
		m.MustSeedVoucher(t, v, 5)
	}
	sizer := &changedAfterTheirFirstRead{SaleSizer: store.Repair, change: map[int64]func(context.Context) error{
		warming: func(ctx context.Context) error {
			if _, err := m.DB.ExecContext(ctx, "UPDATE tb_seckill_voucher SET stock = 8 WHERE voucher_id = ?", warming); err != nil {
				return err
			}
			return store.Gate.Warm(ctx, warming, 8, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
		},
		ending: func(ctx context.Context) error {
			_, err := m.DB.ExecContext(ctx, "UPDATE tb_seckill_voucher SET end_time = NOW() - INTERVAL 1 SECOND WHERE voucher_id = ?", ending)
			return err
		},
	}}
	found := &violations{}
	const recheck = 200 * time.Millisecond
	checks := &orderwriter.SaleChecks{DB: m.DB, Sale: sizer, Guard: found, Logger: slog.New(slog.DiscardHandler),
		MissingRecheck: recheck}

	n, err := checks.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reads := sizer.reads[warming]
	if len(reads) != 2 {
		t.Fatalf("the warming sale was read %d times, want twice (missing, then warmed)", len(reads))
	}
	if gap := reads[1].Sub(reads[0]); gap < recheck {
		t.Fatalf("the warming sale was read again %v after it was found missing, want at least %v", gap, recheck)
	}
	if want := []string{"71 " + sale.CheckVoucherMissing}; !slices.Equal(found.list(), want) || n != 2 {
		t.Fatalf("the check compared %d sales and reported %v; want 2 (the one that ended is not compared) and %v", n, found.list(), want)
	}
}

// A check stopped while it waits to read a missing sale again reports
// nothing and returns the context's error itself, not a failed check.
func TestSaleCheckStoppedDuringItsRecheck(t *testing.T) {
	r, m := testsupport.MustRedis(t), testsupport.MustMySQL(t)
	m.MustSeedVoucher(t, 72, 5)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := saletest.New(r.Client, r.Prefix)
	sizer := &changedAfterTheirFirstRead{SaleSizer: store.Repair, change: map[int64]func(context.Context) error{
		72: func(context.Context) error { cancel(); return nil },
	}}
	found := &violations{}
	checks := &orderwriter.SaleChecks{DB: m.DB, Sale: sizer, Guard: found, Logger: slog.New(slog.DiscardHandler),
		MissingRecheck: time.Hour}
	_, err := checks.Check(ctx)
	if err != context.Canceled || len(found.list()) > 0 {
		t.Fatalf("a check stopped in its recheck: %v, reported %v; want context.Canceled itself and nothing", err, found.list())
	}
}

// changedAfterTheirFirstRead are sales that something changes (their
// creator warms one, an admin ends another) right after the check's first
// read of them, and before its second.
type changedAfterTheirFirstRead struct {
	orderwriter.SaleSizer
	change map[int64]func(context.Context) error
	reads  map[int64][]time.Time
}

func (s *changedAfterTheirFirstRead) Size(ctx context.Context, voucherID int64) (sale.Size, error) {
	change, ok := s.change[voucherID]
	if !ok {
		return s.SaleSizer.Size(ctx, voucherID)
	}
	if s.reads == nil {
		s.reads = map[int64][]time.Time{}
	}
	s.reads[voucherID] = append(s.reads[voucherID], time.Now())
	size, err := s.SaleSizer.Size(ctx, voucherID)
	if err == nil && len(s.reads[voucherID]) == 1 {
		if err := change(context.WithoutCancel(ctx)); err != nil {
			return sale.Size{}, err
		}
	}
	return size, err
}

type violations struct {
	mu    sync.Mutex
	found []string
}

func (v *violations) Violated(voucherID int64, check string, _ ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.found = append(v.found, fmt.Sprintf("%d %s", voucherID, check))
}

func (v *violations) list() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Sorted(slices.Values(v.found))
}

// A check round waiting on a master that stopped answering (its reads go
// there until the client learns of the promotion) held up the round a new
// replication id asks for (Now): the failed master's sales stayed paused
// until the stuck read timed out (measured: 0.5 s past the new id, the
// read 4.1 s in all). Now starts a round at once, without waiting for the
// stuck one, whose read does not end with its context.
func TestANewReplicationIDCutsAStuckCheck(t *testing.T) {
	r, m := testsupport.MustRedis(t), testsupport.MustMySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store := saletest.New(r.Client, r.Prefix)
	const voucher = 80
	m.MustSeedVoucher(t, voucher, 5)
	if err := store.Gate.Warm(ctx, voucher, 5, time.Now().Add(-time.Minute), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	sizer := &stuckOnce{SaleSizer: store.Repair, stuck: make(chan struct{}), release: make(chan struct{}), reads: make(chan struct{}, 10)}
	checks := &orderwriter.SaleChecks{DB: m.DB, Sale: sizer, Guard: &violations{}, Interval: time.Hour, Logger: slog.New(slog.DiscardHandler)}
	done := make(chan error, 1)
	go func() { done <- checks.Run(ctx) }()
	select {
	case <-sizer.stuck:
	case <-ctx.Done():
		t.Fatal("the first check round never read the sale")
	}
	checks.Now(ctx)
	select {
	case <-sizer.reads:
	case <-time.After(10 * time.Second):
		t.Fatal("a check asked for by a new replication id waited for the round stuck on the failed master")
	}
	cancel()
	close(sizer.release)
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// stuckOnce's first read waits until released, whatever its context says,
// as go-redis's read of a frozen master waits for its read timeout; the
// next ones answer.
type stuckOnce struct {
	orderwriter.SaleSizer
	once    sync.Once
	stuck   chan struct{}
	release chan struct{}
	reads   chan struct{}
}

func (s *stuckOnce) Size(ctx context.Context, voucherID int64) (sale.Size, error) {
	first := false
	s.once.Do(func() { first = true })
	if first {
		close(s.stuck)
		<-s.release
		return sale.Size{}, errors.New("read timeout")
	}
	select {
	case s.reads <- struct{}{}:
	case <-ctx.Done():
		return sale.Size{}, ctx.Err()
	}
	return s.SaleSizer.Size(ctx, voucherID)
}

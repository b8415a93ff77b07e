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

	"github.com/seckill/seckill/internal/gate"
	"github.com/seckill/seckill/internal/orderwriter"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/testsupport"
)

// A sale is committed to MySQL before it is warmed in Redis, so a check
// can read it in between. Taken for a sale Redis lost, it was logged as
// lost writes, counted as a violated invariant and reconciled while its
// creator warmed it. The check reads a missing sale again, MissingRecheck
// later, before it reports it; one that is still missing then is reported.
func TestSaleCheckDoesNotReportASaleBeingWarmed(t *testing.T) {
	r, m := testsupport.MustRedis(t), testsupport.MustMySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store := gate.NewStore(r.Client, r.Prefix)
	const warming, lost = 70, 71
	m.MustSeedVoucher(t, warming, 5)
	m.MustSeedVoucher(t, lost, 5)
	sizer := &warmedAfterItsFirstRead{SaleSizer: store, voucher: warming, warmed: make(chan error, 1),
		warm: func(ctx context.Context) error {
			return store.Warm(ctx, warming, 5, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
		}}
	found := &violations{}
	const recheck = 200 * time.Millisecond
	checks := &orderwriter.SaleChecks{DB: m.DB, Sale: sizer, Guard: found, Logger: slog.New(slog.DiscardHandler),
		MissingRecheck: recheck}

	n, err := checks.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sizer.reads) != 2 {
		t.Fatalf("the warming sale was read %d times, want twice (missing, then warmed)", len(sizer.reads))
	}
	if gap := sizer.reads[1].Sub(sizer.reads[0]); gap < recheck {
		t.Fatalf("the warming sale was read again %v after it was found missing, want at least %v", gap, recheck)
	}
	if want := []string{"71 " + sale.CheckVoucherMissing}; !slices.Equal(found.list(), want) || n != 2 {
		t.Fatalf("the check compared %d sales and reported %v; want 2 and %v", n, found.list(), want)
	}
}

// A check stopped while it waits to read a missing sale again reports
// nothing and says why it stopped.
func TestSaleCheckStoppedDuringItsRecheck(t *testing.T) {
	r, m := testsupport.MustRedis(t), testsupport.MustMySQL(t)
	m.MustSeedVoucher(t, 72, 5)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sizer := &cancelOnRead{SaleSizer: gate.NewStore(r.Client, r.Prefix), cancel: cancel}
	found := &violations{}
	checks := &orderwriter.SaleChecks{DB: m.DB, Sale: sizer, Guard: found, Logger: slog.New(slog.DiscardHandler),
		MissingRecheck: time.Hour}
	_, err := checks.Check(ctx)
	if !errors.Is(err, context.Canceled) || len(found.list()) > 0 {
		t.Fatalf("a check stopped in its recheck: %v, reported %v; want context.Canceled and nothing", err, found.list())
	}
}

// warmedAfterItsFirstRead is a sale whose creator warms it after the
// check's first read of it found it missing, and before the second.
type warmedAfterItsFirstRead struct {
	orderwriter.SaleSizer
	voucher int64
	warm    func(context.Context) error
	warmed  chan error
	reads   []time.Time
}

func (s *warmedAfterItsFirstRead) Size(ctx context.Context, voucherID int64) (sale.Size, error) {
	if voucherID != s.voucher {
		return s.SaleSizer.Size(ctx, voucherID)
	}
	s.reads = append(s.reads, time.Now())
	if len(s.reads) == 1 {
		size, err := s.SaleSizer.Size(ctx, voucherID)
		if err == nil && !size.Exists {
			go func() { s.warmed <- s.warm(context.WithoutCancel(ctx)) }()
		}
		return size, err
	}
	if len(s.reads) == 2 {
		if err := <-s.warmed; err != nil {
			return sale.Size{}, err
		}
	}
	return s.SaleSizer.Size(ctx, voucherID)
}

// cancelOnRead stops the check's context at its first read of a sale.
type cancelOnRead struct {
	orderwriter.SaleSizer
	cancel context.CancelFunc
}

func (s *cancelOnRead) Size(ctx context.Context, voucherID int64) (sale.Size, error) {
	defer s.cancel()
	return s.SaleSizer.Size(ctx, voucherID)
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

package orderwriter_test

import (
	"context"
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
// creator warmed it. The check reads a missing sale again before it
// reports it; one that is still missing then is reported.
func TestSaleCheckDoesNotReportASaleBeingWarmed(t *testing.T) {
	r, m := testsupport.MustRedis(t), testsupport.MustMySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store := gate.NewStore(r.Client, r.Prefix)
	const warming, lost = 70, 71
	m.MustSeedVoucher(t, warming, 5)
	m.MustSeedVoucher(t, lost, 5)
	sizer := &warmedAfterItsFirstRead{SaleSizer: store, voucher: warming, warm: func(ctx context.Context) error {
		return store.Warm(ctx, warming, 5, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	}}
	found := &violations{}
	checks := &orderwriter.SaleChecks{DB: m.DB, Sale: sizer, Guard: found, Logger: slog.New(slog.DiscardHandler),
		MissingRecheck: 10 * time.Millisecond}

	n, err := checks.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !sizer.warmed {
		t.Fatal("the check never read the warming sale as missing: the test proves nothing")
	}
	if want := []string{"71 " + sale.CheckVoucherMissing}; !slices.Equal(found.list(), want) || n != 2 {
		t.Fatalf("the check compared %d sales and reported %v; want 2 and %v", n, found.list(), want)
	}
}

// warmedAfterItsFirstRead is a sale whose creator's warm lands right
// after the check's first read of it.
type warmedAfterItsFirstRead struct {
	orderwriter.SaleSizer
	voucher int64
	warm    func(context.Context) error
	warmed  bool
}

func (s *warmedAfterItsFirstRead) Size(ctx context.Context, voucherID int64) (sale.Size, error) {
	size, err := s.SaleSizer.Size(ctx, voucherID)
	if err == nil && voucherID == s.voucher && !size.Exists && !s.warmed {
		s.warmed = true
		if err := s.warm(ctx); err != nil {
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

package outbox_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
)

// A retired sale brought back — by a stock change that moves its window,
// or by a reconcile — is live again in every key: nothing keeps the
// retirement's expiry. Before, the settled records kept it, so mid-sale a
// failed buyer's order was no longer found in Redis (404 at the API).
func TestRevivedSaleKeepsEveryKey(t *testing.T) {
	for _, tc := range []struct {
		name   string
		revive func(ctx context.Context, s *saletest.Sales, voucher int64, end time.Time) error
	}{
		{"stock change", func(ctx context.Context, s *saletest.Sales, voucher int64, end time.Time) error {
			_, err := s.Gate.Adjust(ctx, voucher, 1, time.Time{}, end)
			return err
		}},
		{"reconcile", func(ctx context.Context, s *saletest.Sales, voucher int64, end time.Time) error {
			return s.Repair.Rebuild(ctx, voucher, sale.Plan{Stock: 5, Buyers: map[int64]int64{2: 102}}, time.Now().Add(-3*time.Hour), end, 0)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testsupport.MustRedis(t)
			store := saletest.New(r.Client, r.Prefix)
			ctx := t.Context()
			voucher := 1 + rand.Int64N(1<<40)
			if err := store.Gate.Warm(ctx, voucher, 5, time.Now().Add(-3*time.Hour), time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			if d, err := store.Gate.Try(ctx, voucher, 2, 102); err != nil || d.Err != nil {
				t.Fatalf("the buyer: %+v %v", d, err)
			}
			failed := order.Status{ID: 102, UserID: 2, VoucherID: voucher, Status: order.StatusFailed, Reason: order.ReasonSoldOut,
				CreateTime: time.Now().Truncate(time.Second).UTC()}
			if err := store.Records.RecordSettled(ctx, []order.Status{failed}); err != nil {
				t.Fatal(err)
			}
			if err := store.Confirm(ctx, []order.Event{{OrderID: 102, UserID: 2, VoucherID: voucher}}); err != nil {
				t.Fatal(err)
			}
			// The sale ended; retired with a short keep.
			if _, err := store.Gate.Adjust(ctx, voucher, 0, time.Time{}, time.Now().Add(-time.Hour)); err != nil {
				t.Fatal(err)
			}
			if retired, err := store.Outbox.Retire(ctx, voucher, 300*time.Millisecond); err != nil || !retired {
				t.Fatalf("retire: %v %v", retired, err)
			}
			if err := tc.revive(ctx, store, voucher, time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			k := store.KeysOf(voucher)
			for name, key := range map[string]string{"voucher": k.Voucher, "buyers": k.Buyers, "settled": k.Settled} {
				if ttl := r.Client.PTTL(ctx, key).Val(); ttl != -1 {
					t.Errorf("%s of the revived sale expires in %v", name, ttl)
				}
			}
			time.Sleep(400 * time.Millisecond) // past the retirement's keep
			lookup := &order.Lookup{Sales: store.Records, Settled: saletest.NoMySQL{TB: t}}
			if s, err := lookup.FindOf(ctx, 2, voucher); err != nil || s != failed {
				t.Fatalf("the failed buyer's order after the retirement's keep: %+v %v, want %+v", s, err, failed)
			}
		})
	}
}

package salerecords_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/saletest"
)

// While a sale's state is in Redis, it answers lookups of every order it
// took: pending from the reservation, settled (confirmed or failed, with
// the reason) from the writer's record; a user it knows nothing of has no
// order; a failed buyer's order is still found by the voucher.
func TestSaleRecordsAnswerLookups(t *testing.T) {
	r, store, voucher := saletest.Warmed(t, 5)
	ctx := context.Background()
	lookup := &order.Lookup{Sales: store.Records, Settled: saletest.NoMySQL{TB: t}}
	at := time.Now().Truncate(time.Second).UTC()
	for user, id := range map[int64]int64{1: 101, 2: 102, 3: 103} {
		if d, err := store.Gate.Try(ctx, voucher, user, id); err != nil || d.Err != nil {
			t.Fatalf("user %d: %+v %v", user, d, err)
		}
	}
	if s, err := lookup.Find(ctx, 101, 1); err != nil || s.Status != order.StatusPending {
		t.Fatalf("pending order: %+v %v", s, err)
	}

	settled := []order.Status{
		{ID: 101, UserID: 1, VoucherID: voucher, Status: order.StatusConfirmed, CreateTime: at},
		{ID: 102, UserID: 2, VoucherID: voucher, Status: order.StatusFailed, Reason: order.ReasonSoldOut, CreateTime: at},
	}
	if err := store.Records.RecordSettled(ctx, settled); err != nil {
		t.Fatal(err)
	}
	events := []order.Event{{OrderID: 101, UserID: 1, VoucherID: voucher}, {OrderID: 102, UserID: 2, VoucherID: voucher}}
	if err := store.Confirm(ctx, events); err != nil {
		t.Fatal(err)
	}
	// A reconcile dropped user 2 from the buyers: the failed order is still
	// found by the voucher.
	if err := r.Client.HDel(ctx, store.KeysOf(voucher).Buyers, "2").Err(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		user, orderID int64
		want          order.Status // zero: ErrNotFound
		byVoucherToo  bool
	}{
		{"Confirmed", 1, 101, settled[0], true},
		{"Failed", 2, 102, settled[1], true},
		{"Pending", 3, 103, order.Status{ID: 103, UserID: 3, VoucherID: voucher, Status: order.StatusPending}, true},
		{"SomeoneElses", 2, 101, order.Status{}, false},
		{"NoOrder", 4, 0, order.Status{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(how string, s order.Status, err error) {
				t.Helper()
				if tc.want == (order.Status{}) {
					if err != order.ErrNotFound {
						t.Fatalf("%s: %+v %v, want ErrNotFound", how, s, err)
					}
					return
				}
				if tc.want.Status == order.StatusPending {
					s.CreateTime = time.Time{}
				}
				if err != nil || s != tc.want {
					t.Fatalf("%s: %+v %v, want %+v", how, s, err, tc.want)
				}
			}
			if tc.orderID != 0 {
				s, err := lookup.Find(ctx, tc.orderID, tc.user)
				check("by id", s, err)
			}
			if tc.byVoucherToo {
				s, err := lookup.FindOf(ctx, tc.user, voucher)
				check("by voucher", s, err)
			}
		})
	}

	// A sale whose state is gone records nothing: no key without expiry.
	gone := voucher + 1
	if err := store.Records.RecordSettled(ctx, []order.Status{{ID: 9, UserID: 1, VoucherID: gone, Status: order.StatusConfirmed, CreateTime: at}}); err != nil {
		t.Fatal(err)
	}
	if n := r.Client.Exists(ctx, store.KeysOf(gone).Settled).Val(); n != 0 {
		t.Fatal("a sale not in Redis got a record of settled orders")
	}
}

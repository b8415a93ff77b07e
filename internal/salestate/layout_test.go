package salestate_test

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
)

// An API instance remembers a sale's layout; the sale is made anew under
// the same id with one bucket. Its old buckets gone, the instance reads the
// directory again at its next attempt a second on (it had answered "no
// such voucher" for as long as it ran); its old buckets still there (an
// ended sale's keys wait for their expiry), it sells the new sale once the
// layout it remembers is older than the layout's time to live.
func TestARememberedLayoutFollowsTheSaleMadeAnew(t *testing.T) {
	r := testsupport.MustRedis(t)
	ctx := context.Background()
	api, admin := saletest.New(r.Client, r.Prefix), saletest.New(r.Client, r.Prefix)
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	api.SetLayoutClock(func() time.Time { return time.Unix(0, now.Load()) })
	begin, end := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	for i, oldGone := range []bool{true, false} {
		voucher := 1 + rand.Int64N(1<<40)
		if err := admin.Gate.WarmBuckets(ctx, voucher, 30, 3, begin, end); err != nil {
			t.Fatal(err)
		}
		if d, err := api.Gate.Try(ctx, voucher, 1, 1); err != nil || d.Err != nil {
			t.Fatalf("the first sale: %+v %v", d, err)
		}
		if oldGone {
			for b := range 3 {
				k := salestate.BucketKeys(r.Prefix, voucher, 3, b)
				r.Client.Del(ctx, k.Voucher, k.Buyers, k.Pending, k.PendingAt)
			}
		}
		if err := admin.Gate.WarmBuckets(ctx, voucher, 5, 1, begin, end); err != nil {
			t.Fatal(err)
		}
		if oldGone {
			// A lost bucket makes the gate read the directory at most once
			// a second.
			now.Add(int64(1100 * time.Millisecond))
		} else {
			now.Add(int64(11 * time.Second))
		}
		user := int64(100 + i)
		d, err := api.Gate.Try(ctx, voucher, user, 2)
		if err != nil || d.Err != nil {
			t.Fatalf("old buckets gone %v: the sale made anew: %+v %v, want accepted", oldGone, d, err)
		}
		if s := r.Client.HGet(ctx, salestate.BucketKeys(r.Prefix, voucher, 1, 0).Voucher, salestate.FieldStock).Val(); s != "4" {
			t.Fatalf("old buckets gone %v: the new sale holds %s units, want 4: the unit came from the old sale", oldGone, s)
		}
	}
}

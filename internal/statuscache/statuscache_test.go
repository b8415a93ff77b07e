package statuscache_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/orderdb"
	"github.com/seckill/seckill/internal/statuscache"
	"github.com/seckill/seckill/internal/testsupport"
)

// countedFinder counts the lookups that reach MySQL.
type countedFinder struct {
	order.SettledFinder
	reads atomic.Int64
}

func (c *countedFinder) FindSettled(ctx context.Context, id int64) (order.Status, bool, error) {
	c.reads.Add(1)
	return c.SettledFinder.FindSettled(ctx, id)
}

func (c *countedFinder) FindSettledOf(ctx context.Context, user, voucher int64) (order.Status, bool, error) {
	c.reads.Add(1)
	return c.SettledFinder.FindSettledOf(ctx, user, voucher)
}

// An order MySQL settled is read from MySQL once per TTL, by id and by
// its buyer, and comes back from the cache as MySQL gave it; an order id
// MySQL does not have is asked every time (it may be on its way).
func TestSettledOrdersAreReadOncePerTTL(t *testing.T) {
	r, m := testsupport.MustRedis(t), testsupport.MustMySQL(t)
	ctx := context.Background()
	m.MustSeedVoucher(t, 7, 5)
	if _, err := orderdb.Apply(ctx, m.DB, []order.Event{{OrderID: 71, UserID: 3, VoucherID: 7, AcceptedAt: time.Now().UnixMilli()}}); err != nil {
		t.Fatal(err)
	}
	mysql := &countedFinder{SettledFinder: &orderdb.Orders{DB: m.DB}}
	cache := statuscache.New(r.Client, r.Prefix, time.Minute, mysql)
	var first order.Status
	for i := range 3 {
		st, ok, err := cache.FindSettled(ctx, 71)
		if err != nil || !ok || st.Status != order.StatusConfirmed || st.UserID != 3 || st.VoucherID != 7 {
			t.Fatalf("lookup %d of order 71: %+v %v %v", i, st, ok, err)
		}
		if i == 0 {
			first = st
		} else if st != first {
			t.Fatalf("lookup %d from the cache: %+v, MySQL gave %+v", i, st, first)
		}
		if st, ok, err := cache.FindSettledOf(ctx, 3, 7); err != nil || !ok || st.ID != 71 {
			t.Fatalf("lookup %d of user 3's order: %+v %v %v", i, st, ok, err)
		}
		if _, ok, err := cache.FindSettled(ctx, 72); err != nil || ok {
			t.Fatalf("lookup %d of an order MySQL does not have: %v %v", i, ok, err)
		}
	}
	if n := mysql.reads.Load(); n != 2+3 {
		t.Fatalf("%d lookups reached MySQL, want 5: the order and the buyer's once, the unknown order each time", n)
	}
}

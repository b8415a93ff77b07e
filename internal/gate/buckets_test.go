package gate_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/gate"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
)

// auditBuckets checks what the sale's buckets hold after every unit sold:
// no stock, no transfer, each buyer once, in the home bucket, with the
// order the gate gave, and a reservation per order.
func auditBuckets(t *testing.T, r *testsupport.Redis, voucher int64, n int, c *saletest.Crowd) {
	t.Helper()
	ctx := context.Background()
	buyers := 0
	for b := range n {
		k := salestate.BucketKeys(r.Prefix, voucher, n, b)
		if s, err := r.Client.HGet(ctx, k.Voucher, salestate.FieldStock).Int(); err != nil || s != 0 {
			t.Errorf("bucket %d: stock %d (%v), want 0", b, s, err)
		}
		if x := r.Client.HLen(ctx, k.Transfers).Val(); x != 0 {
			t.Errorf("bucket %d: %d transfers still recorded", b, x)
		}
		all, err := r.Client.HGetAll(ctx, k.Buyers).Result()
		if err != nil {
			t.Fatal(err)
		}
		for u, o := range all {
			uid, _ := strconv.ParseInt(u, 10, 64)
			if salestate.Home(uid, n) != b {
				t.Errorf("user %d is a buyer in bucket %d, home %d", uid, b, salestate.Home(uid, n))
			}
			if strconv.FormatInt(c.Accepted[uid], 10) != o {
				t.Errorf("user %d: bucket %d records order %s, the gate gave %d", uid, b, o, c.Accepted[uid])
			}
		}
		if p := r.Client.HLen(ctx, k.Pending).Val(); p != int64(len(all)) {
			t.Errorf("bucket %d: %d reservations for %d buyers", b, p, len(all))
		}
		buyers += len(all)
	}
	if buyers != len(c.Accepted) {
		t.Errorf("the buckets record %d buyers, the gate accepted %d", buyers, len(c.Accepted))
	}
}

// One voucher in 3 buckets (on 3 masters of the cluster): 3,000 buyers on
// 2,000 units get exactly 2,000 orders, nobody twice, every unit sold, and
// no "sold out" while a unit remained.
func TestHotSaleAcrossBuckets(t *testing.T) {
	const n, stock, buyers = 3, 2000, 3000
	r, store, voucher := saletest.HotSale(t, stock, n)
	users := make([]int64, buyers)
	for i := range users {
		users[i] = 1 + rand.Int64N(1<<40)
	}
	c := saletest.Buy(t, store, voucher, users, 48)
	if len(c.Accepted) != stock {
		t.Fatalf("%d accepted, want every one of the %d units sold", len(c.Accepted), stock)
	}
	if len(c.SoldOutAt) != buyers-stock {
		t.Errorf("%d buyers heard sold out, want %d", len(c.SoldOutAt), buyers-stock)
	}
	if e := c.Early(); e > 0 {
		t.Errorf("%d buyers heard sold out before the last unit was sold", e)
	}
	auditBuckets(t, r, voucher, n, c)
	t.Logf("%d attempts answered \"moving stock\"", c.Moving.Load())
}

// Buyers who all live in one bucket still buy every unit: the stock of the
// other buckets moves to theirs.
func TestStockMovesToTheBuyersBucket(t *testing.T) {
	const n, stock, buyers = 3, 900, 1200
	r, store, voucher := saletest.HotSale(t, stock, n)
	var users []int64
	for u := int64(1); len(users) < buyers; u++ {
		if salestate.Home(u, n) == 0 {
			users = append(users, u)
		}
	}
	c := saletest.Buy(t, store, voucher, users, 32)
	if len(c.Accepted) != stock {
		t.Fatalf("%d accepted, want all %d units sold to one bucket's buyers", len(c.Accepted), stock)
	}
	if e := c.Early(); e > 0 {
		t.Errorf("%d buyers heard sold out before the last unit was sold", e)
	}
	auditBuckets(t, r, voucher, n, c)
	got, err := r.Client.HGet(context.Background(), salestate.BucketKeys(r.Prefix, voucher, n, 0).Voucher, salestate.FieldReceived).Int()
	if err != nil || got != stock-stock/n {
		t.Errorf("bucket 0 received %d units (%v), want the %d of the others", got, err, stock-stock/n)
	}
}

// A mover that dies between taking units and depositing them leaves them in
// no bucket: the sale sells everything else, answers "moving stock" rather
// than "sold out" for them, and once the sweep finishes the transfer sells
// them too.
func TestTransferLeftHalfWayIsFinished(t *testing.T) {
	const n, stock = 3, 30
	r, store, voucher := saletest.HotSale(t, stock, n)
	died := afterFirstTake(store.Gate, func() error { return errors.New("the mover died") })
	var users []int64
	for u := int64(1); len(users) < 40; u++ {
		if salestate.Home(u, n) == 0 {
			users = append(users, u)
		}
	}
	ctx := context.Background()
	oid := rand.Int64N(1 << 50)
	sold, left := 0, users
	for len(left) > 0 {
		oid++
		d, err := store.Gate.Try(ctx, voucher, left[0], oid)
		if err != nil {
			if !died() {
				t.Fatal(err)
			}
			continue
		}
		if errors.Is(d.Err, order.ErrMovingStock) {
			break
		}
		if errors.Is(d.Err, order.ErrSoldOut) {
			t.Fatalf("sold out after %d of %d units with a transfer in flight", sold, stock)
		}
		if d.Err != nil {
			t.Fatal(d.Err)
		}
		sold++
		left = left[1:]
	}
	if !died() {
		t.Fatal("no transfer was cut")
	}
	var inFlight int64
	for b := range n {
		inFlight += r.Client.HLen(ctx, salestate.BucketKeys(r.Prefix, voucher, n, b).Transfers).Val()
	}
	if inFlight != 1 {
		t.Fatalf("%d transfers recorded, want the one cut", inFlight)
	}
	if sold >= stock {
		t.Fatalf("%d sold with a transfer cut: the units in flight were sold twice", sold)
	}
	// Not yet old enough for the sweep: left as it is.
	if done, err := store.Gate.FinishTransfers(ctx, voucher, time.Now().Add(-time.Minute)); err != nil || done != 0 {
		t.Fatalf("a sweep finished %d young transfers (%v)", done, err)
	}
	if done, err := store.Gate.FinishTransfers(ctx, voucher, time.Now().Add(time.Minute)); err != nil || done != 1 {
		t.Fatalf("the sweep finished %d transfers (%v), want 1", done, err)
	}
	c := saletest.Buy(t, store, voucher, left, 4)
	if sold+len(c.Accepted) != stock {
		t.Fatalf("%d sold before the sweep and %d after, want %d", sold, len(c.Accepted), stock)
	}
}

// afterFirstTake has f act between the two steps of s's first transfer
// only (stop its mover with an error, rebuild a bucket); done reports
// whether that transfer has come.
func afterFirstTake(s *gate.Store, f func() error) (done func() bool) {
	var once atomic.Bool
	s.AfterTake = func() error {
		if once.CompareAndSwap(false, true) {
			return f()
		}
		return nil
	}
	return once.Load
}

// A transfer whose take came before a rebuild and whose deposit after is
// void: the rebuild's stock, read from MySQL, already counts its units.
func TestDepositAfterARebuildIsVoid(t *testing.T) {
	const n = 3
	r, store, voucher := saletest.HotSale(t, 30, n)
	ctx := context.Background()
	rebuilt := afterFirstTake(store.Gate, func() error {
		return store.Repair.Rebuild(ctx, voucher, sale.Plan{Stock: 7, Buckets: n}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), 0)
	})
	// Bucket 1's users take its 10 units, and the next one moves units in:
	// the rebuild runs between that move's two steps.
	c := saletest.Buy(t, store, voucher, saletest.HomedIn(n, 1, 11), 1)
	if !rebuilt() {
		t.Fatal("no transfer was made")
	}
	more := saletest.Buy(t, store, voucher, saletest.HomedIn(n, 2, 40)[20:], 4)
	if got := len(c.Accepted) + len(more.Accepted); got != 10+7 {
		t.Fatalf("%d sold: 10 before the rebuild and %d after, want 7 after", got, got-10)
	}
	for b := range n {
		if s := r.Client.HGet(ctx, salestate.BucketKeys(r.Prefix, voucher, n, b).Voucher, salestate.FieldStock).Val(); s != "0" {
			t.Errorf("bucket %d has %s units left after the sale said sold out", b, s)
		}
	}
}

// A stock change of a sale in buckets: units added land in bucket 0 whole,
// units removed come from the buckets that have the most, a removal of more
// than remains changes nothing, and a new window reaches every bucket.
func TestStockChangeOfASaleInBuckets(t *testing.T) {
	const n = 3
	r, store, vid := saletest.HotSale(t, 30, n)
	ctx := context.Background()
	stocks := func() []int64 {
		var s []int64
		for b := range n {
			v, _ := r.Client.HGet(ctx, salestate.BucketKeys(r.Prefix, vid, n, b).Voucher, salestate.FieldStock).Int64()
			s = append(s, v)
		}
		return s
	}
	end := time.Now().Add(2 * time.Hour).Truncate(time.Millisecond)
	if after, err := store.Gate.Adjust(ctx, vid, 12, time.Time{}, end); err != nil || after != 42 || !slices.Equal(stocks(), []int64{22, 10, 10}) {
		t.Fatalf("+12: %d %v, buckets %v; want 42 with bucket 0 at 22", after, err, stocks())
	}
	for b := range n {
		got, _ := r.Client.HGet(ctx, salestate.BucketKeys(r.Prefix, vid, n, b).Voucher, salestate.FieldEnd).Int64()
		if got != end.UnixMilli() {
			t.Errorf("bucket %d ends at %d, want %d", b, got, end.UnixMilli())
		}
	}
	if after, err := store.Gate.Adjust(ctx, vid, -27, time.Time{}, time.Time{}); err != nil || after != 15 || !slices.Equal(stocks(), []int64{0, 5, 10}) {
		t.Fatalf("-27: %d %v, buckets %v; want 15 left, taken from the fullest buckets", after, err, stocks())
	}
	if left, err := store.Gate.Adjust(ctx, vid, -16, time.Time{}, time.Time{}); !errors.Is(err, sale.ErrNotEnoughStock) || left != 15 ||
		!slices.Equal(stocks(), []int64{0, 5, 10}) {
		t.Fatalf("-16 of 15: %d %v, buckets %v; want ErrNotEnoughStock and nothing changed", left, err, stocks())
	}
}

// A bucket lost with its master answers as a lost sale of one bucket does:
// no such voucher (the order-writer's check rebuilds it), to a process that
// knows the sale's buckets and to one that does not.
func TestLostBucketIsAnUnknownVoucher(t *testing.T) {
	const n = 3
	r, store, voucher := saletest.HotSale(t, 30, n)
	ctx := context.Background()
	user := saletest.HomedIn(n, 2, 1)[0]
	k := salestate.BucketKeys(r.Prefix, voucher, n, 2)
	if err := r.Client.Del(ctx, k.Voucher).Err(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*saletest.Sales{store, saletest.New(r.Client, r.Prefix)} {
		if d, err := s.Gate.Try(ctx, voucher, user, 77); err != nil || !errors.Is(d.Err, order.ErrUnknownVoucher) {
			t.Fatalf("a buyer of the lost bucket: %+v %v, want no such voucher", d, err)
		}
	}
	if d, err := store.Gate.Try(ctx, voucher, saletest.HomedIn(n, 1, 1)[0], 78); err != nil || d.Err != nil {
		t.Fatalf("a buyer of another bucket: %+v %v, want accepted", d, err)
	}
}

// A deposit found void (its receiver rebuilt since the take) gives the
// units back to a donor that was not rebuilt: a reconcile that stopped
// half way, its receiver rebuilt and its donor not, loses no unit, and the
// sale still sells out.
func TestVoidDepositGivesTheUnitsBack(t *testing.T) {
	const n = 3
	r, store, voucher := saletest.HotSale(t, 30, n)
	ctx := context.Background()
	halfWay := afterFirstTake(store.Gate, func() error {
		// What a rebuild of the receiver alone leaves: another generation.
		return r.Client.HSet(ctx, salestate.BucketKeys(r.Prefix, voucher, n, 1).Voucher, salestate.FieldReconciled, "half-way").Err()
	})
	// As many buyers as units: the buckets' generations differ, so no
	// read of them makes "sold out", and the thirty-first would hear
	// "moving stock" to the end.
	c := saletest.Buy(t, store, voucher, saletest.HomedIn(n, 1, 30), 1)
	if !halfWay() {
		t.Fatal("no transfer was made")
	}
	if len(c.Accepted) != 30 {
		t.Fatalf("%d sold, want all 30: the units of the void deposit are lost", len(c.Accepted))
	}
	tot, err := store.Totals(ctx, voucher)
	if err != nil || tot.Stock != 0 || tot.Net != 0 || tot.Transfers != 0 {
		t.Fatalf("after the sale: %+v %v, want nothing left", tot, err)
	}
}

package gate_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/internal/gate"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
)

// hotSale is a sale of one voucher in n buckets on the test's Redis (the
// cluster in make test's cluster pass).
func hotSale(t *testing.T, stock int64, n int) (*testsupport.Redis, *saletest.Sales, int64) {
	t.Helper()
	r := testsupport.MustRedis(t)
	store := saletest.New(r.Client, r.Prefix)
	voucher := 1 + rand.Int64N(1<<40)
	if err := store.Gate.WarmBuckets(context.Background(), voucher, stock, n, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	return r, store, voucher
}

// crowd is what a crowd of buyers got from a sale: every buyer tries until
// the gate accepts or refuses for good, and tries again on "moving stock".
type crowd struct {
	mu       sync.Mutex
	accepted map[int64]int64 // user -> order
	// soldOutAt are the moments "sold out" answers came back; lastAccept
	// the latest acceptance, on the same machine's clock.
	soldOutAt  []time.Time
	lastAccept time.Time
	moving     atomic.Int64
}

func buy(t *testing.T, store *saletest.Sales, voucher int64, users []int64, workers int) *crowd {
	t.Helper()
	c := &crowd{accepted: map[int64]int64{}}
	var next atomic.Int64
	var ids atomic.Int64
	ids.Store(rand.Int64N(1 << 50))
	var g errgroup.Group
	for range workers {
		g.Go(func() error {
			for {
				i := next.Add(1) - 1
				if i >= int64(len(users)) {
					return nil
				}
				for tries := 0; ; tries++ {
					oid := ids.Add(1)
					d, err := store.Gate.Try(context.Background(), voucher, users[i], oid)
					if err != nil {
						return err
					}
					if errors.Is(d.Err, order.ErrMovingStock) {
						c.moving.Add(1)
						if tries == 1000 {
							return fmt.Errorf("user %d told units are moving 1,000 times: they never arrive", users[i])
						}
						continue
					}
					c.mu.Lock()
					switch {
					case d.Err == nil:
						if _, twice := c.accepted[users[i]]; twice {
							c.mu.Unlock()
							return errors.New("a user was accepted twice")
						}
						c.accepted[users[i]] = oid
						c.lastAccept = d.AcceptedAt
					case errors.Is(d.Err, order.ErrSoldOut):
						c.soldOutAt = append(c.soldOutAt, time.Now())
					default:
						c.mu.Unlock()
						return d.Err
					}
					c.mu.Unlock()
					break
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	return c
}

// early counts the "sold out" answers that came back before the last unit
// was accepted: each was a lie.
func (c *crowd) early() int {
	n := 0
	for _, at := range c.soldOutAt {
		if at.Before(c.lastAccept.Add(-time.Millisecond)) {
			n++
		}
	}
	return n
}

// auditBuckets checks what the sale's buckets hold after every unit sold:
// no stock, no transfer, each buyer once, in the home bucket, with the
// order the gate gave, and a reservation per order.
func auditBuckets(t *testing.T, r *testsupport.Redis, voucher int64, n int, c *crowd) {
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
			if strconv.FormatInt(c.accepted[uid], 10) != o {
				t.Errorf("user %d: bucket %d records order %s, the gate gave %d", uid, b, o, c.accepted[uid])
			}
		}
		if p := r.Client.HLen(ctx, k.Pending).Val(); p != int64(len(all)) {
			t.Errorf("bucket %d: %d reservations for %d buyers", b, p, len(all))
		}
		buyers += len(all)
	}
	if buyers != len(c.accepted) {
		t.Errorf("the buckets record %d buyers, the gate accepted %d", buyers, len(c.accepted))
	}
}

// One voucher in 3 buckets (on 3 masters of the cluster): 3,000 buyers on
// 2,000 units get exactly 2,000 orders, nobody twice, every unit sold, and
// no "sold out" while a unit remained.
func TestHotSaleAcrossBuckets(t *testing.T) {
	const n, stock, buyers = 3, 2000, 3000
	r, store, voucher := hotSale(t, stock, n)
	users := make([]int64, buyers)
	for i := range users {
		users[i] = 1 + rand.Int64N(1<<40)
	}
	c := buy(t, store, voucher, users, 48)
	if len(c.accepted) != stock {
		t.Fatalf("%d accepted, want every one of the %d units sold", len(c.accepted), stock)
	}
	if len(c.soldOutAt) != buyers-stock {
		t.Errorf("%d buyers heard sold out, want %d", len(c.soldOutAt), buyers-stock)
	}
	if e := c.early(); e > 0 {
		t.Errorf("%d buyers heard sold out before the last unit was sold", e)
	}
	auditBuckets(t, r, voucher, n, c)
	t.Logf("%d attempts answered \"moving stock\"", c.moving.Load())
}

// Buyers who all live in one bucket still buy every unit: the stock of the
// other buckets moves to theirs.
func TestStockMovesToTheBuyersBucket(t *testing.T) {
	const n, stock, buyers = 3, 900, 1200
	r, store, voucher := hotSale(t, stock, n)
	var users []int64
	for u := int64(1); len(users) < buyers; u++ {
		if salestate.Home(u, n) == 0 {
			users = append(users, u)
		}
	}
	c := buy(t, store, voucher, users, 32)
	if len(c.accepted) != stock {
		t.Fatalf("%d accepted, want all %d units sold to one bucket's buyers", len(c.accepted), stock)
	}
	if e := c.early(); e > 0 {
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
	r, store, voucher := hotSale(t, stock, n)
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
	c := buy(t, store, voucher, left, 4)
	if sold+len(c.accepted) != stock {
		t.Fatalf("%d sold before the sweep and %d after, want %d", sold, len(c.accepted), stock)
	}
}

// A rebuild of a sale in buckets puts each buyer in the home bucket, all
// the stock in bucket 0 and none moving: the gate then sells exactly the
// plan's stock, to new buyers only, from whichever bucket they live in.
func TestRebuildPutsEachBuyerInItsHomeBucket(t *testing.T) {
	const n = 3
	r, store, voucher := hotSale(t, 30, n)
	ctx := context.Background()
	buyers := map[int64]int64{}
	for u := int64(1); u <= 9; u++ {
		buyers[u] = 1000 + u
	}
	// Units moved before the rebuild: it starts every bucket afresh.
	if moved := buy(t, store, voucher, homedIn(n, 0, 15), 2); len(moved.accepted) != 15 {
		t.Fatalf("%d of 15 bought before the rebuild", len(moved.accepted))
	}
	plan := sale.Plan{Stock: 12, Buckets: n, Buyers: buyers}
	if err := store.Repair.Rebuild(ctx, voucher, plan, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	for b := range n {
		k := salestate.BucketKeys(r.Prefix, voucher, n, b)
		v := r.Client.HMGet(ctx, k.Voucher, salestate.FieldStock, salestate.FieldGiven, salestate.FieldReceived, salestate.FieldBuckets).Val()
		want := []any{"0", "0", "0", "3"}
		if b == 0 {
			want[0] = "12"
		}
		if !slices.Equal(v, want) {
			t.Errorf("bucket %d: stock, given, received, buckets %v, want %v", b, v, want)
		}
		for u, o := range r.Client.HGetAll(ctx, k.Buyers).Val() {
			uid, _ := strconv.ParseInt(u, 10, 64)
			if salestate.Home(uid, n) != b || strconv.FormatInt(buyers[uid], 10) != o {
				t.Errorf("bucket %d holds buyer %d with order %s", b, uid, o)
			}
		}
		if x := r.Client.HLen(ctx, k.Transfers).Val(); x != 0 {
			t.Errorf("bucket %d: %d transfers left", b, x)
		}
	}
	for u := int64(1); u <= 9; u++ {
		if d, err := store.Gate.Try(ctx, voucher, u, 5000+u); err != nil || !errors.Is(d.Err, order.ErrAlreadyBought) || d.OrderID != buyers[u] {
			t.Fatalf("user %d after the rebuild: %+v %v, want already bought order %d", u, d, err, buyers[u])
		}
	}
	var fresh []int64
	for u := int64(100); u < 140; u++ {
		fresh = append(fresh, u)
	}
	c := buy(t, store, voucher, fresh, 8)
	if len(c.accepted) != 12 {
		t.Fatalf("%d sold after the rebuild, want the plan's 12", len(c.accepted))
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
	r, store, voucher := hotSale(t, 30, n)
	ctx := context.Background()
	rebuilt := afterFirstTake(store.Gate, func() error {
		return store.Repair.Rebuild(ctx, voucher, sale.Plan{Stock: 7, Buckets: n}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), 0)
	})
	// Bucket 1's users take its 10 units, and the next one moves units in:
	// the rebuild runs between that move's two steps.
	c := buy(t, store, voucher, homedIn(n, 1, 11), 1)
	if !rebuilt() {
		t.Fatal("no transfer was made")
	}
	more := buy(t, store, voucher, homedIn(n, 2, 40)[20:], 4)
	if got := len(c.accepted) + len(more.accepted); got != 10+7 {
		t.Fatalf("%d sold: 10 before the rebuild and %d after, want 7 after", got, got-10)
	}
	for b := range n {
		if s := r.Client.HGet(ctx, salestate.BucketKeys(r.Prefix, voucher, n, b).Voucher, salestate.FieldStock).Val(); s != "0" {
			t.Errorf("bucket %d has %s units left after the sale said sold out", b, s)
		}
	}
}

// homedIn is count user ids whose home is bucket b of n.
func homedIn(n, b, count int) []int64 {
	var users []int64
	for u := int64(1 << 30); len(users) < count; u++ {
		if salestate.Home(u, n) == b {
			users = append(users, u)
		}
	}
	return users
}

// A stock change of a sale in buckets: units added land in bucket 0 whole,
// units removed come from the buckets that have the most, a removal of more
// than remains changes nothing, and a new window reaches every bucket.
func TestStockChangeOfASaleInBuckets(t *testing.T) {
	const n = 3
	r, store, vid := hotSale(t, 30, n)
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
	r, store, voucher := hotSale(t, 30, n)
	ctx := context.Background()
	user := homedIn(n, 2, 1)[0]
	k := salestate.BucketKeys(r.Prefix, voucher, n, 2)
	if err := r.Client.Del(ctx, k.Voucher).Err(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*saletest.Sales{store, saletest.New(r.Client, r.Prefix)} {
		if d, err := s.Gate.Try(ctx, voucher, user, 77); err != nil || !errors.Is(d.Err, order.ErrUnknownVoucher) {
			t.Fatalf("a buyer of the lost bucket: %+v %v, want no such voucher", d, err)
		}
	}
	if d, err := store.Gate.Try(ctx, voucher, homedIn(n, 1, 1)[0], 78); err != nil || d.Err != nil {
		t.Fatalf("a buyer of another bucket: %+v %v, want accepted", d, err)
	}
}

// A deposit found void (its receiver rebuilt since the take) gives the
// units back to a donor that was not rebuilt: a reconcile that stopped
// half way, its receiver rebuilt and its donor not, loses no unit, and the
// sale still sells out.
func TestVoidDepositGivesTheUnitsBack(t *testing.T) {
	const n = 3
	r, store, voucher := hotSale(t, 30, n)
	ctx := context.Background()
	halfWay := afterFirstTake(store.Gate, func() error {
		// What a rebuild of the receiver alone leaves: another generation.
		return r.Client.HSet(ctx, salestate.BucketKeys(r.Prefix, voucher, n, 1).Voucher, salestate.FieldReconciled, "half-way").Err()
	})
	// As many buyers as units: the buckets' generations differ, so no
	// read of them makes "sold out", and the thirty-first would hear
	// "moving stock" to the end.
	c := buy(t, store, voucher, homedIn(n, 1, 30), 1)
	if !halfWay() {
		t.Fatal("no transfer was made")
	}
	if len(c.accepted) != 30 {
		t.Fatalf("%d sold, want all 30: the units of the void deposit are lost", len(c.accepted))
	}
	tot, err := store.Totals(ctx, voucher)
	if err != nil || tot.Stock != 0 || tot.Net != 0 || tot.Transfers != 0 {
		t.Fatalf("after the sale: %+v %v, want nothing left", tot, err)
	}
}

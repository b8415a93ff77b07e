package reconcile_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/idgen"
	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/orderdb"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
)

type rig struct {
	r     *testsupport.Redis
	m     *testsupport.MySQL
	k     *testsupport.Kafka
	store *saletest.Sales
	topic string
	ids   *idgen.Generator
	rec   *reconcile.Reconciler
}

func newRig(t *testing.T) *rig {
	g := &rig{r: testsupport.MustRedis(t), m: testsupport.MustMySQL(t), k: testsupport.MustKafka(t)}
	g.store = saletest.New(g.r.Client, g.r.Prefix)
	g.topic = g.k.MustTopic(t, 2)
	g.ids = idgen.New(g.r.Client, g.r.Key("order"), 100).From(0)
	g.rec = &reconcile.Reconciler{Sale: g.store.Repair, Records: &orderdb.Orders{DB: g.m.DB}, IDs: g.ids,
		Backlog: &broker.Progress{Brokers: g.k.Brokers, Group: testsupport.Group(t), Topic: g.topic},
		Wait:    20 * time.Second, Poll: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	return g
}

// onSaleIn is voucher v on sale for the next hour in n stock buckets, with
// stock units in MySQL and in Redis.
func (g *rig) onSaleIn(t *testing.T, v, stock int64, n int) {
	t.Helper()
	g.m.MustSeedVoucherIn(t, v, stock, n)
	if err := g.store.Gate.WarmBuckets(context.Background(), v, stock, n, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
}

// onSale is voucher v on sale for the next hour, with mysqlStock units in
// MySQL and redisStock in Redis.
func (g *rig) onSale(t *testing.T, v, mysqlStock, redisStock int64) {
	t.Helper()
	g.m.MustSeedVoucher(t, v, mysqlStock)
	if err := g.store.Gate.Warm(context.Background(), v, redisStock, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
}

func (g *rig) stock(t *testing.T, v int64) int64 {
	n, err := g.r.Client.HGet(context.Background(), g.store.KeysOf(v).Voucher, "stock").Int64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A voucher whose warm-up failed after its row was committed is unknown to
// the gate; a reconcile warms it from MySQL.
func TestReconcileWarmsAVoucherWhoseWarmUpFailed(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	g.m.MustSeedVoucher(t, 3, 5)
	if d, err := g.store.Gate.Try(ctx, 3, 1, 101); err != nil || !errors.Is(d.Err, order.ErrUnknownVoucher) {
		t.Fatalf("before: %v %v, want unknown", d.Err, err)
	}
	if _, err := g.rec.Run(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if d, err := g.store.Gate.Try(ctx, 3, 1, 101); err != nil || d.Err != nil || d.StockLeft != 4 {
		t.Fatalf("after the reconcile: %+v %v, want accepted with 4 left", d, err)
	}
	if _, err := g.rec.Run(ctx, 424242); !errors.Is(err, reconcile.ErrNoSuchVoucher) {
		t.Fatalf("a voucher MySQL does not have: %v", err)
	}
}

// Redis and MySQL apart (a restock that reached MySQL only, a lost
// confirmation, a lost buyer): the reconcile sets Redis's stock to MySQL's
// less the orders still on their way, its buyers to MySQL's holders and
// the pending orders' users, and drops the reservations MySQL settled.
func TestReconcileRebuildsFromMySQL(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	const v = 4
	g.onSale(t, v, 10, 10)
	var accepted []order.Event
	for u := int64(1); u <= 4; u++ {
		d, err := g.store.Gate.Try(ctx, v, u, 100+u)
		if err != nil || d.Err != nil {
			t.Fatal(d.Err, err)
		}
		accepted = append(accepted, order.Event{OrderID: 100 + u, UserID: u, VoucherID: v, AcceptedAt: d.AcceptedAt.UnixMilli()})
	}
	// Users 1 and 2 settled and confirmed, user 3 settled with its
	// confirmation lost, user 4 still on its way.
	if _, err := orderdb.Apply(ctx, g.m.DB, accepted[:3]); err != nil {
		t.Fatal(err)
	}
	if err := g.store.Confirm(ctx, accepted[:2]); err != nil {
		t.Fatal(err)
	}
	// What a rollback looks like: user 1 forgotten, five units back; and
	// a restock of 5 that reached MySQL only.
	k := g.store.KeysOf(v)
	g.r.Client.HDel(ctx, k.Buyers, "1")
	g.r.Client.HIncrBy(ctx, k.Voucher, "stock", 5)
	if _, err := g.m.DB.Exec("UPDATE tb_seckill_voucher SET stock = stock + 5 WHERE voucher_id = ?", v); err != nil {
		t.Fatal(err)
	}

	rep, err := g.rec.Run(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	// MySQL: 10 + 5 - 3 settled = 12; less user 4's order on its way.
	if got := g.stock(t, v); got != 11 || rep.Plan.Stock != 11 {
		t.Fatalf("Redis stock %d (plan %d), want 11", got, rep.Plan.Stock)
	}
	buyers := g.r.Client.HGetAll(ctx, k.Buyers).Val()
	if len(buyers) != 4 || buyers["1"] != "101" || buyers["4"] != "104" {
		t.Fatalf("buyers %v, want users 1 to 4 with their orders", buyers)
	}
	if pending := g.r.Client.HKeys(ctx, k.Pending).Val(); len(pending) != 1 || pending[0] != "104" {
		t.Fatalf("reservations %v, want only order 104's", pending)
	}
	if d, _ := g.store.Gate.Try(ctx, v, 1, 999); !errors.Is(d.Err, order.ErrAlreadyBought) {
		t.Fatalf("user 1 again after the reconcile: %v, want already bought", d.Err)
	}
	// Twice is the same as once.
	if _, err := g.rec.Run(ctx, v); err != nil || g.stock(t, v) != 11 || g.r.Client.HLen(ctx, k.Buyers).Val() != 4 {
		t.Fatalf("a second reconcile: %v, stock %d", err, g.stock(t, v))
	}
}

// While frozen the gate takes nothing and stock changes wait.
func TestFrozenSaleTakesNothing(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	const v = 5
	if err := g.store.Gate.Warm(ctx, v, 3, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := g.store.Repair.Freeze(ctx, v, 0); err != nil {
		t.Fatal(err)
	}
	if d, err := g.store.Gate.Try(ctx, v, 1, 1); err != nil || !errors.Is(d.Err, order.ErrPaused) {
		t.Fatalf("frozen: %v %v, want paused", d.Err, err)
	}
	if _, err := g.store.Gate.Adjust(ctx, v, 2, time.Time{}, time.Time{}); !errors.Is(err, sale.ErrFrozen) {
		t.Fatalf("a stock change while frozen: %v", err)
	}
	if g.stock(t, v) != 3 {
		t.Fatalf("stock %d while frozen, want 3", g.stock(t, v))
	}
	if err := g.store.Repair.Unfreeze(ctx, v, 0); err != nil {
		t.Fatal(err)
	}
	if d, err := g.store.Gate.Try(ctx, v, 1, 1); err != nil || d.Err != nil {
		t.Fatalf("unfrozen: %v %v", d.Err, err)
	}
}

// With events the writer has not consumed, MySQL's truth is incomplete:
// nothing is rebuilt, and the sale is unfrozen as it was.
func TestReconcileWaitsForTheWriter(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	const v = 6
	g.onSale(t, v, 3, 2)
	pub := broker.NewOrderPublisher(broker.NewProducer(g.k.Brokers, g.topic, 0), 5*time.Second)
	defer pub.Close()
	if err := pub.Publish(ctx, order.Event{OrderID: 1, UserID: 1, VoucherID: v, AcceptedAt: time.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	g.rec.Wait = time.Second
	if _, err := g.rec.Run(ctx, v); !errors.Is(err, reconcile.ErrWriterBehind) {
		t.Fatalf("reconcile with an unconsumed event: %v, want ErrWriterBehind", err)
	}
	if d, err := g.store.Gate.Try(ctx, v, 2, 2); err != nil || d.Err != nil || g.stock(t, v) != 1 {
		t.Fatalf("after a reconcile that gave up: %v %v, stock %d; want the sale as it was", d.Err, err, g.stock(t, v))
	}
}

// Redis that lost writes may have rolled the id counter back below ids
// already in orders: the generator would hand them out again. A reconcile
// raises it above every id MySQL or a reservation holds.
func TestReconcileRaisesTheIDCounter(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	const v = 7
	g.onSale(t, v, 10, 10)
	var used []int64
	for u := int64(1); u <= 3; u++ {
		id, err := g.ids.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		d, err := g.store.Gate.Try(ctx, v, u, id)
		if err != nil || d.Err != nil {
			t.Fatal(d.Err, err)
		}
		used = append(used, id)
		if u < 3 { // the third stays a reservation
			if _, err := orderdb.Apply(ctx, g.m.DB, []order.Event{{OrderID: id, UserID: u, VoucherID: v, AcceptedAt: d.AcceptedAt.UnixMilli()}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The rollback: the day's counter is gone.
	day := "id:" + g.r.Key("order") + ":" + time.Now().UTC().Format("20060102")
	g.r.Client.Del(ctx, day)
	if _, err := g.rec.Run(ctx, v); err != nil {
		t.Fatal(err)
	}
	fresh := idgen.New(g.r.Client, g.r.Key("order"), 100).From(0)
	id, err := fresh.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range used {
		if id&(1<<32-1) <= u&(1<<32-1) {
			t.Fatalf("after the reconcile a new generator's sequence %d is not above the used %d", id&(1<<32-1), u&(1<<32-1))
		}
	}
}

// turns counts reconciles of a voucher between their freeze and their
// rebuild (or unfreeze), and how often two were there at once.
type turns struct {
	reconcile.Sale
	mu              sync.Mutex
	inside, overlap int
}

func (s *turns) Freeze(ctx context.Context, v, fence int64) error {
	s.mu.Lock()
	s.inside++
	if s.inside > 1 {
		s.overlap++
	}
	s.mu.Unlock()
	return s.Sale.Freeze(ctx, v, fence)
}

func (s *turns) leave() {
	s.mu.Lock()
	s.inside--
	s.mu.Unlock()
}

func (s *turns) Rebuild(ctx context.Context, v int64, p sale.Plan, begin, end time.Time, fence int64) error {
	defer s.leave()
	return s.Sale.Rebuild(ctx, v, p, begin, end, fence)
}

func (s *turns) Unfreeze(ctx context.Context, v, fence int64) error {
	defer s.leave()
	return s.Sale.Unfreeze(ctx, v, fence)
}

// Reconciles of one voucher from several processes (two order-writers that
// saw the same failover, seckillctl) take turns: one whose reading of
// MySQL predates the orders taken after another's unfreeze would give
// their units out again. (Without the lock, this test saw 3 overlaps.)
func TestReconcilesOfOneVoucherTakeTurns(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	const v = 8
	g.onSale(t, v, 10, 10)
	sale := &turns{Sale: g.store.Repair}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		rec := *g.rec
		rec.Sale, rec.Locks = sale, lock.New(g.r.Client, g.r.Prefix)
		wg.Go(func() {
			_, err := rec.Run(ctx, v)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if sale.overlap != 0 {
		t.Fatalf("%d times a reconcile froze the voucher while another was rebuilding it", sale.overlap)
	}
	if g.stock(t, v) != 10 {
		t.Fatalf("stock %d after four reconciles, want 10", g.stock(t, v))
	}
}

// hashTag is what Redis Cluster hashes of key: keys with one tag share a
// slot, and so a master and its fate in a failover.
func hashTag(key string) string {
	if _, rest, ok := strings.Cut(key, "{"); ok {
		if tag, _, ok := strings.Cut(rest, "}"); ok && tag != "" {
			return tag
		}
	}
	return key
}

// reconcilesLostWithTheLockMaster runs two reconciles of v, then takes the
// master of the lock's fencing counter back to before them: the counter
// and those of keys that share its slot (a failover that lost their
// writes); keys on other slots keep what the reconciles wrote.
func (g *rig) reconcilesLostWithTheLockMaster(t *testing.T, locks *lock.Client, v int64, keys ...string) {
	t.Helper()
	ctx := t.Context()
	counter := locks.FenceKey(reconcile.LockName(v))
	slot := []string{counter}
	for _, k := range keys {
		if hashTag(k) == hashTag(counter) {
			slot = append(slot, k)
		}
	}
	before := map[string]string{}
	for _, k := range slot {
		if dump, err := g.r.Client.Dump(ctx, k).Result(); err == nil {
			before[k] = dump
		}
	}
	for range 2 {
		if _, err := g.rec.Run(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range slot {
		g.r.Client.Del(ctx, k)
		if dump, ok := before[k]; ok {
			if err := g.r.Client.Restore(ctx, k, 0, dump).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A failover that loses the writes of the master holding the reconcile
// lock's fencing counter takes the counter back. The token and the fence
// it is checked against share the voucher's slot, so they go back
// together and the next reconcile runs. Before, the lock lived in a slot
// of its own: its counter went back alone, below the voucher's stored
// fence, and every reconcile of the sale was refused as stale.
func TestReconcileAfterTheLockMasterLostWrites(t *testing.T) {
	g := newRig(t)
	locks := lock.New(g.r.Client, g.r.Prefix)
	g.rec.Locks = locks
	ctx := t.Context()
	const v = 9101
	g.onSale(t, v, 10, 10)
	g.reconcilesLostWithTheLockMaster(t, locks, v, g.store.KeysOf(v).Voucher)
	if _, err := g.rec.Run(ctx, v); err != nil {
		t.Fatalf("a reconcile after the lock's master lost writes: %v", err)
	}
	if got := g.stock(t, v); got != 10 {
		t.Fatalf("stock %d after the reconcile, want MySQL's 10", got)
	}
}

// A sale in 3 stock buckets that lost writes in one of them (a buyer
// forgotten, units back) is rebuilt from MySQL in all three: each bucket
// gets the buyers whose home it is, MySQL's holders and the orders still on
// their way, and the sale then sells exactly what MySQL has left.
func TestReconcileRebuildsEveryBucket(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	const v, n = 8, 3
	g.onSaleIn(t, v, 30, n)
	var accepted []order.Event
	for u := int64(1); u <= 9; u++ {
		d, err := g.store.Gate.Try(ctx, v, u, 100+u)
		if err != nil || d.Err != nil {
			t.Fatal(d.Err, err)
		}
		accepted = append(accepted, order.Event{OrderID: 100 + u, UserID: u, VoucherID: v, AcceptedAt: d.AcceptedAt.UnixMilli()})
	}
	// Six settled, four of them confirmed; three on their way.
	if _, err := orderdb.Apply(ctx, g.m.DB, accepted[:6]); err != nil {
		t.Fatal(err)
	}
	if err := g.store.Confirm(ctx, accepted[:4]); err != nil {
		t.Fatal(err)
	}
	lost := accepted[0].UserID
	k := salestate.BucketKeys(g.r.Prefix, v, n, salestate.Home(lost, n))
	g.r.Client.HDel(ctx, k.Buyers, "1")
	g.r.Client.HIncrBy(ctx, k.Voucher, salestate.FieldStock, 5)

	rep, err := g.rec.Run(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	// MySQL: 30 - 6 settled = 24; less the 3 orders on their way.
	if rep.Plan.Stock != 21 || rep.Plan.Buckets != n {
		t.Fatalf("plan: stock %d in %d buckets, want 21 in %d", rep.Plan.Stock, rep.Plan.Buckets, n)
	}
	var buyers, pending int64
	for b := range n {
		k := salestate.BucketKeys(g.r.Prefix, v, n, b)
		for u := range g.r.Client.HGetAll(ctx, k.Buyers).Val() {
			uid, _ := strconv.ParseInt(u, 10, 64)
			if salestate.Home(uid, n) != b {
				t.Errorf("buyer %d in bucket %d, home %d", uid, b, salestate.Home(uid, n))
			}
			buyers++
		}
		pending += g.r.Client.HLen(ctx, k.Pending).Val()
	}
	if buyers != 9 || pending != 3 {
		t.Fatalf("%d buyers and %d reservations after the reconcile, want 9 and the 3 on their way", buyers, pending)
	}
	if d, _ := g.store.Gate.Try(ctx, v, lost, 999); !errors.Is(d.Err, order.ErrAlreadyBought) {
		t.Fatalf("the forgotten buyer again: %v, want already bought", d.Err)
	}
	sold := 0
	for u := int64(1000); u < 1060; u++ {
		for {
			d, err := g.store.Gate.Try(ctx, v, u, 10000+u)
			if err != nil {
				t.Fatal(err)
			}
			if errors.Is(d.Err, order.ErrMovingStock) {
				continue
			}
			if d.Err == nil {
				sold++
			}
			break
		}
	}
	if sold != 21 {
		t.Fatalf("%d sold after the reconcile, want MySQL's 21", sold)
	}
}

// One bucket of a sale in three built under another replication id: the
// reconcile freezes that bucket while the writer catches up, and the other
// two sell on meanwhile; the orders they take then are in the rebuilt sale,
// and it sells exactly what MySQL has left.
func TestReconcileFreezesOnlyTheSuspectBucketWhileTheWriterCatchesUp(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	const v, n, stock = 9, 3, 30
	g.onSaleIn(t, v, stock, n)
	const suspect = 1
	k := salestate.BucketKeys(g.r.Prefix, v, n, suspect)
	g.r.Client.HSet(ctx, k.Voucher, "epoch", "0123456789012345678901234567890123456789")
	users := func(b int) []int64 {
		var us []int64
		for u := int64(1); len(us) < 3; u++ {
			if salestate.Home(u, n) == b {
				us = append(us, u)
			}
		}
		return us
	}
	var during []int64
	g.rec.BeforeFreezeAll = func() {
		if d, err := g.store.Gate.Try(ctx, v, users(suspect)[0], 500); err != nil || !errors.Is(d.Err, order.ErrPaused) {
			t.Errorf("a buyer of the suspect bucket during the reconcile: %+v %v, want paused", d, err)
		}
		for _, b := range []int{0, 2} {
			u := users(b)[0]
			if d, err := g.store.Gate.Try(ctx, v, u, 600+u); err != nil || d.Err != nil {
				t.Errorf("a buyer of bucket %d during the reconcile: %+v %v, want accepted", b, d, err)
				continue
			}
			during = append(during, u)
		}
	}
	rep, err := g.rec.Run(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	if len(during) != 2 || rep.Plan.Stock != stock-2 || rep.Plan.Unsettled != 2 {
		t.Fatalf("%d sold while the suspect bucket was frozen; plan: stock %d, %d unsettled; want 2, %d, 2", len(during), rep.Plan.Stock, rep.Plan.Unsettled, stock-2)
	}
	for _, u := range during {
		if d, _ := g.store.Gate.Try(ctx, v, u, 900+u); !errors.Is(d.Err, order.ErrAlreadyBought) {
			t.Fatalf("user %d, who bought during the reconcile, again: %v; want already bought", u, d.Err)
		}
	}
	size, err := g.store.Repair.Size(ctx, v)
	if err != nil || size.Epoch != size.RedisNow || size.Stock != stock-2 {
		t.Fatalf("the sale after the reconcile: %+v %v; want every bucket under its server's id, %d units", size, err, stock-2)
	}
}

// A reconcile of a voucher that neither MySQL nor Redis has (a check that
// raced a deletion, an operator's typo) leaves nothing that lasts. It used
// to leave the voucher's hash holding its fencing token for ever, which
// made the sale look present: the writer then recorded the settled orders
// of that voucher id in Redis, with no expiry (398,000 of them found on a
// bench machine). The fence now expires, and a hash without stock is no
// sale to record orders in.
func TestReconcileOfAnUnknownVoucherLeavesNothing(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	g.rec.Locks = lock.New(g.r.Client, g.r.Prefix)
	const v = 424243
	if _, err := g.rec.Run(ctx, v); !errors.Is(err, reconcile.ErrNoSuchVoucher) {
		t.Fatalf("reconcile of a voucher no store has: %v, want ErrNoSuchVoucher", err)
	}
	k := salestate.KeysFor(g.r.Prefix, v)
	for _, key := range k.List() {
		if ttl := g.r.Client.PTTL(ctx, key).Val(); ttl == -1 {
			t.Fatalf("%s of the unknown voucher left behind for ever: %v", key, g.r.Client.HGetAll(ctx, key).Val())
		}
	}
	failed := order.Status{ID: 1, UserID: 2, VoucherID: v, Status: order.StatusFailed, Reason: order.ReasonUnknownVoucher, CreateTime: time.Now().UTC()}
	if err := g.store.Records.RecordSettled(ctx, []order.Status{failed}); err != nil {
		t.Fatal(err)
	}
	if n := g.r.Client.Exists(ctx, k.Settled).Val(); n != 0 {
		t.Fatal("an order of a voucher with no sale in Redis was recorded there, with no expiry")
	}
}

// Redis lost the directory of a sale in buckets (the master of the
// voucher's own tag failed over right after the warm) while its buckets
// survived with reservations of orders still on their way: a reconcile by a
// process that never met the voucher still finds the buckets, freezes them
// and counts those orders, rather than taking the sale for one bucket.
func TestReconcileFindsTheBucketsWhenTheDirectoryIsLost(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	const v, n, stock = 10, 3, 30
	g.onSaleIn(t, v, stock, n)
	for u := int64(1); u <= 6; u++ {
		if d, err := g.store.Gate.Try(ctx, v, u, 100+u); err != nil || d.Err != nil {
			t.Fatal(d.Err, err)
		}
	}
	if err := g.r.Client.Del(ctx, salestate.KeysFor(g.r.Prefix, v).Voucher).Err(); err != nil {
		t.Fatal(err)
	}
	g.rec.Sale = saletest.New(g.r.Client, g.r.Prefix).Repair
	rep, err := g.rec.Run(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Plan.Unsettled != 6 || rep.Plan.Stock != stock-6 {
		t.Fatalf("plan: %d unsettled, stock %d; want the 6 orders on their way counted, %d left", rep.Plan.Unsettled, rep.Plan.Stock, stock-6)
	}
	size, err := g.store.Repair.Size(ctx, v)
	if err != nil || size.Stock != stock-6 || size.Buyers != 6 {
		t.Fatalf("the sale after the reconcile: %+v %v; want %d units and the 6 buyers", size, err, stock-6)
	}
}

// The same loss on a sale in 3 stock buckets: the counter and the
// directory go back, the buckets on other masters keep the larger fence.
// The next reconcile takes a token above it and runs; every one had been
// refused as stale, the suspect part of the sale left frozen.
func TestReconcileOfABucketedSaleAfterTheLockMasterLostWrites(t *testing.T) {
	g := newRig(t)
	locks := lock.New(g.r.Client, g.r.Prefix)
	g.rec.Locks = locks
	ctx := t.Context()
	const v, n = 9102, 3
	g.onSaleIn(t, v, 30, n)
	g.reconcilesLostWithTheLockMaster(t, locks, v, g.store.KeysOf(v).Voucher, salestate.BucketKeys(g.r.Prefix, v, n, 0).Voucher,
		salestate.BucketKeys(g.r.Prefix, v, n, 1).Voucher, salestate.BucketKeys(g.r.Prefix, v, n, 2).Voucher)
	if _, err := g.rec.Run(ctx, v); err != nil {
		t.Fatalf("a reconcile after the lock's master lost writes: %v", err)
	}
	sold := 0
	for u := int64(1); u <= 40; u++ {
		for tries := 0; ; tries++ {
			d, err := g.store.Gate.Try(ctx, v, u, 1000+u)
			if err != nil {
				t.Fatal(err)
			}
			if errors.Is(d.Err, order.ErrMovingStock) {
				if tries == 1000 {
					t.Fatalf("buyer %d told units are moving 1,000 times", u)
				}
				continue
			}
			if d.Err == nil {
				sold++
			} else if !errors.Is(d.Err, order.ErrSoldOut) {
				t.Fatalf("buyer %d after the reconcile: %v", u, d.Err)
			}
			break
		}
	}
	if sold != 30 {
		t.Fatalf("%d sold after the reconcile, want MySQL's 30", sold)
	}
}

// countingBacklog counts the reconcile's waits for the writer.
type countingBacklog struct {
	reconcile.Backlog
	waits int
}

func (b *countingBacklog) Ends(ctx context.Context) (map[int]int64, error) {
	b.waits++
	return b.Backlog.Ends(ctx)
}

// A sale whose state was built under another replication id than its
// master's (a failover) has stopped selling on its own: the gate pauses
// it. Its reconcile waits for the writer once, frozen, and not first while
// it "sells" too: that wait, a cycle of the writer's, was most of the time
// from a frozen master's promotion to its sales selling again
// (TestChaosClusterMasterFrozen). The healthy buckets of a sale in
// buckets are not frozen then and sell on; a sale reconciled for another
// reason (nothing suspect: the whole sale is frozen) still sells during
// the first wait.
func TestReconcileOfAStoppedSaleWaitsForTheWriterOnce(t *testing.T) {
	for _, c := range []struct {
		name      string
		buckets   int
		stale     []int // buckets built under another replication id
		wantWaits int
	}{
		{"one bucket, failed over", 1, []int{0}, 1},
		{"one bucket, selling", 1, nil, 2},
		{"three buckets, all failed over", 3, []int{0, 1, 2}, 1},
		{"three buckets, one failed over", 3, []int{1}, 1},
		{"three buckets, selling", 3, nil, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newRig(t)
			ctx := context.Background()
			const v = 12
			if c.buckets == 1 {
				g.onSale(t, v, 30, 30)
			} else {
				g.onSaleIn(t, v, 30, c.buckets)
			}
			for _, b := range c.stale {
				k := g.store.KeysOf(v)
				if c.buckets > 1 {
					k = salestate.BucketKeys(g.r.Prefix, v, c.buckets, b)
				}
				g.r.Client.HSet(ctx, k.Voucher, "epoch", "0123456789012345678901234567890123456789")
			}
			backlog := &countingBacklog{Backlog: g.rec.Backlog}
			g.rec.Backlog = backlog
			if _, err := g.rec.Run(ctx, v); err != nil {
				t.Fatal(err)
			}
			if backlog.waits != c.wantWaits {
				t.Fatalf("the reconcile waited for the writer %d times; want %d", backlog.waits, c.wantWaits)
			}
			if size, err := g.store.Repair.Size(ctx, v); err != nil || size.Epoch != size.RedisNow || size.Stock != 30 || size.FrozenFor != 0 {
				t.Fatalf("the sale after the reconcile: %+v %v; want it rebuilt under its server's id, 30 units, not frozen", size, err)
			}
			if d, err := g.store.Gate.Try(ctx, v, 7, 7); err != nil || d.Err != nil {
				t.Fatalf("a buyer after the reconcile: %v %v; want accepted", d.Err, err)
			}
		})
	}
}

// A draw sale that Redis lost is rebuilt as a draw: an attempt in its
// window is an entry, not a first-come order (which would give the stock
// to whoever is fastest after the loss).
func TestReconcileKeepsADrawSalesWindow(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	const v = 31
	g.m.MustSeedVoucher(t, v, 5)
	if _, err := g.m.DB.Exec("UPDATE tb_seckill_voucher SET admission_window = 600 WHERE voucher_id = ?", v); err != nil {
		t.Fatal(err)
	}
	if _, err := g.rec.Run(ctx, v); err != nil {
		t.Fatal(err)
	}
	d, err := g.store.Gate.Try(ctx, v, 1, 101)
	if err != nil || !errors.Is(d.Err, order.ErrEntered) || d.OrderID != 101 {
		t.Fatalf("an attempt in the rebuilt sale's window: %+v %v, want an entry", d, err)
	}
	if g.stock(t, v) != 5 {
		t.Fatalf("the entry took stock: %d left", g.stock(t, v))
	}
}

package orderwriter_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/idgen"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
)

// What a rollback of Redis looks like, injected mid-sale: five confirmed
// buyers forgotten and five units back in the stock. The writer's check
// after its next batch sees Redis's stock above MySQL's, the voucher is
// frozen and rebuilt from MySQL, and none of the five gets a second order.
func TestWriterReconcilesWhenRedisLostWrites(t *testing.T) {
	p := newPipeline(t)
	const voucher, stock = 64, 100
	p.warm(t, voucher, stock)
	p.startWriter(t)
	p.acceptOrders(t, voucher, 20)
	p.waitOrders(t, voucher, 20)
	p.waitConfirmed(t, voucher)

	ctx := context.Background()
	k := p.store.KeysOf(voucher)
	p.r.Client.HDel(ctx, k.Buyers, "1", "2", "3", "4", "5")
	p.r.Client.HIncrBy(ctx, k.Voucher, "stock", 5)

	svc := &order.Service{IDs: idgen.New(p.r.Client, p.r.Key("order"), 100), Gate: p.store.Gate, Publisher: p.pub, Logger: p.logger}
	if _, err := svc.Place(ctx, 21, voucher); err != nil {
		t.Fatal(err)
	}
	p.waitOrders(t, voucher, 21)
	var redisStock, buyers int64
	var frozen bool
	if !testsupport.PollEvery(30*time.Second, 50*time.Millisecond, func() bool {
		redisStock, _ = p.r.Client.HGet(ctx, k.Voucher, "stock").Int64()
		frozen = p.r.Client.HExists(ctx, k.Voucher, "frozen").Val()
		buyers = p.r.Client.HLen(ctx, k.Buyers).Val()
		return redisStock == stock-21 && buyers == 21 && !frozen
	}) {
		t.Fatalf("30 s after the batch: Redis stock %d, %d buyers, frozen %v; want %d, 21, unfrozen", redisStock, buyers, frozen, stock-21)
	}
	for u := int64(1); u <= 5; u++ {
		if _, err := svc.Place(ctx, u, voucher); !errors.Is(err, order.ErrAlreadyBought) {
			t.Fatalf("forgotten buyer %d buying again after the reconcile: %v, want already bought", u, err)
		}
	}
	if got := p.m.MustSaleState(t, voucher); got != (testsupport.SaleState{Orders: 21, Stock: stock - 21}) {
		t.Fatalf("MySQL %+v, want 21 orders and stock %d", got, stock-21)
	}
	metrics := testsupport.Eventually(t, p.admin+"/metrics", 200, 5*time.Second)
	for _, series := range []string{`seckill_invariant_violations_total\{check="stock_above_mysql"\} (\d+)`, `seckill_reconciles_total\{result="done"\} (\d+)`} {
		m := regexp.MustCompile(series).FindStringSubmatch(metrics)
		if m == nil {
			t.Fatalf("no metric %s:\n%s", series, metrics)
		}
		if n, _ := strconv.Atoi(m[1]); n < 1 {
			t.Fatalf("metric %s counted %d, want at least 1", series, n)
		}
	}
}

// A live voucher's keys deleted from Redis (what a restore without them
// looks like): the gate answers "unknown", so no order comes and no batch
// checks it; the periodic check finds it, the voucher is rebuilt from
// MySQL and the sale goes on, its buyers still buyers.
func TestWriterRebuildsAVoucherWhoseKeysVanished(t *testing.T) {
	const voucher, stock = 65, 10
	p := settledSale(t, voucher, stock)
	ctx := context.Background()
	k := p.store.KeysOf(voucher)
	p.r.Client.Del(ctx, k.Voucher, k.Buyers, k.Pending, k.PendingAt)
	svc := &order.Service{IDs: idgen.New(p.r.Client, p.r.Key("order"), 100), Gate: p.store.Gate, Publisher: p.pub, Logger: p.logger}
	placeOnceResumed(t, svc, 4, voucher, order.ErrUnknownVoucher, order.ErrPaused)
	if _, err := svc.Place(ctx, 2, voucher); !errors.Is(err, order.ErrAlreadyBought) {
		t.Fatalf("an earlier buyer after the rebuild: %v, want already bought", err)
	}
	p.waitOrders(t, voucher, 4)
	if redisStock, _ := p.r.Client.HGet(ctx, k.Voucher, "stock").Int64(); redisStock != stock-4 {
		t.Fatalf("Redis stock %d after the rebuild and one more order, want %d", redisStock, stock-4)
	}
}

// A sale stamped with another replication id than Redis's (what a
// restart or a failover leaves) is paused at the gate until the periodic
// check finds it and the writer reconciles it: the units the stale state
// holds too many are not sold.
func TestWriterReconcilesASaleBuiltUnderAnotherReplicationID(t *testing.T) {
	const voucher, stock = 66, 10
	p := settledSale(t, voucher, stock)
	ctx := context.Background()
	k := p.store.KeysOf(voucher)
	// What a replica that missed the three orders looks like, under its
	// old master's id.
	p.r.Client.HSet(ctx, k.Voucher, "epoch", "0123456789012345678901234567890123456789", "stock", stock)
	store := saletest.New(p.r.Client, p.r.Prefix)
	svc := &order.Service{IDs: idgen.New(p.r.Client, p.r.Key("order"), 100), Gate: store.Gate, Publisher: p.pub, Logger: p.logger}
	if refused := placeOnceResumed(t, svc, 4, voucher, order.ErrPaused); refused == 0 {
		t.Fatal("the stale sale sold at once: the gate did not check the replication id")
	}
	p.waitOrders(t, voucher, 4)
	if redisStock, _ := p.r.Client.HGet(ctx, k.Voucher, "stock").Int64(); redisStock != stock-4 {
		t.Fatalf("Redis stock %d after the reconcile and one more order, want %d", redisStock, stock-4)
	}
	size, err := store.Repair.Size(ctx, voucher)
	if err != nil || size.Epoch != size.RedisNow {
		t.Fatalf("the sale after the reconcile: %+v, %v; want stamped with its server's id", size, err)
	}
}

// settledSale runs an order-writer that checks every sale each 200 ms, on
// voucherID warmed with stock units, three of them sold and settled.
func settledSale(t *testing.T, voucherID, stock int64) *pipeline {
	p := newPipeline(t)
	p.warm(t, voucherID, stock)
	p.writerEnv = map[string]string{"SECKILL_SALE_CHECK_INTERVAL": "200ms"}
	p.startWriter(t)
	p.acceptOrders(t, voucherID, 3)
	p.waitOrders(t, voucherID, 3)
	p.waitConfirmed(t, voucherID)
	return p
}

// placeOnceResumed has userID try voucherID until the order is taken, for
// at most 30 s; the answers meanwhile must be among while. It returns how
// many attempts were refused.
func placeOnceResumed(t *testing.T, svc *order.Service, userID, voucherID int64, while ...error) (refused int) {
	t.Helper()
	var err error
	if !testsupport.PollEvery(30*time.Second, 50*time.Millisecond, func() bool {
		if _, err = svc.Place(context.Background(), userID, voucherID); err == nil {
			return true
		}
		if !slices.ContainsFunc(while, func(want error) bool { return errors.Is(err, want) }) {
			t.Fatalf("an attempt while the sale is rebuilt: %v, want one of %v", err, while)
		}
		refused++
		return false
	}) {
		t.Fatalf("the sale still answers %v after 30 s", err)
	}
	return refused
}

// A sale written by the release before (its buyers a set, not a hash of
// user -> order id) neither breaks the checks of the other vouchers nor
// stays: the writer's check finds the old layout and reconciles the
// voucher, which rewrites it from MySQL and the reservations; until then
// the gate answers "paused". A voucher whose check cannot be made (a
// stock that is no number) is logged and counted, and the others are
// still checked: another voucher's lost stock is reconciled.
func TestWriterMigratesASaleOfThePreviousRelease(t *testing.T) {
	const old, other, broken, stock = 67, 68, 69, 10
	p := newPipeline(t)
	p.warm(t, old, stock)
	p.warm(t, other, stock)
	p.warm(t, broken, stock)
	ctx := context.Background()
	ids := p.acceptOrders(t, old, 3)
	k := p.store.KeysOf(old)
	// The previous release's layout: a set of buyers, no epoch stamp.
	p.r.Client.Del(ctx, k.Buyers)
	p.r.Client.SAdd(ctx, k.Buyers, 1, 2, 3)
	p.r.Client.HDel(ctx, k.Voucher, "epoch")
	p.r.Client.HSet(ctx, p.store.KeysOf(broken).Voucher, "stock", "x")
	// The other voucher's sale lost a unit's worth of orders: stock above MySQL's.
	p.acceptOrders(t, other, 2)
	p.writerEnv = map[string]string{"SECKILL_SALE_CHECK_INTERVAL": "200ms"}
	p.startWriter(t)
	p.waitOrders(t, old, 3)
	p.waitOrders(t, other, 2)
	p.r.Client.HSet(ctx, p.store.KeysOf(other).Voucher, "stock", stock)

	svc := &order.Service{IDs: idgen.New(p.r.Client, p.r.Key("order"), 100), Gate: p.store.Gate, Publisher: p.pub, Logger: p.logger}
	placeOnceResumed(t, svc, 4, old, order.ErrPaused)
	testsupport.Wait(t, 30*time.Second, "the other voucher's stock reconciled to MySQL's", func() bool {
		n, _ := p.r.Client.HGet(ctx, p.store.KeysOf(other).Voucher, "stock").Int64()
		return n == stock-2
	})
	if typ := p.r.Client.Type(ctx, k.Buyers).Val(); typ != "hash" {
		t.Fatalf("buyers key is a %s after the migration, want a hash", typ)
	}
	for u, id := range ids {
		if got, _ := p.r.Client.HGet(ctx, k.Buyers, strconv.FormatInt(u, 10)).Int64(); got != id {
			t.Fatalf("buyer %d recorded with order %d, want %d", u, got, id)
		}
	}
	if _, err := svc.Place(ctx, 2, old); !errors.Is(err, order.ErrAlreadyBought) {
		t.Fatalf("an earlier buyer after the migration: %v, want already bought", err)
	}
	p.waitOrders(t, old, 4)
	metrics := testsupport.Eventually(t, p.admin+"/metrics", 200, 5*time.Second)
	if !regexp.MustCompile(`(?m)^seckill_sale_check_errors_total [1-9]`).MatchString(metrics) ||
		!regexp.MustCompile(`(?m)^seckill_invariant_violations_total\{check="layout_outdated"\} [1-9]`).MatchString(metrics) {
		t.Fatalf("metrics do not count the broken voucher's check and the old layout:\n%s", metrics)
	}
}

// On Redis Cluster the set of active vouchers lives on one master and a
// sale on another: a lossy failover of the set's master can forget a sale
// whose keys are intact. The relay and the order lookups find sales by the
// set, so the periodic check lists every sale on sale again.
func TestWriterListsASaleMissingFromTheActiveVouchers(t *testing.T) {
	const voucher, stock = 67, 10
	p := settledSale(t, voucher, stock)
	ctx := context.Background()
	if err := p.r.Client.SRem(ctx, p.store.ActiveVouchers(), voucher).Err(); err != nil {
		t.Fatal(err)
	}
	testsupport.Wait(t, 10*time.Second, "the sale listed among the active vouchers again", func() bool {
		return p.r.Client.SIsMember(ctx, p.store.ActiveVouchers(), voucher).Val()
	})
}

// One bucket of a sale in three stamped with another replication id (its
// master failed over): the gate pauses the users whose home it is, the
// writer's periodic check finds it in the sum of the buckets, and the
// reconcile rebuilds the sale; the units the stale bucket holds too many
// are not sold.
func TestWriterReconcilesABucketBuiltUnderAnotherReplicationID(t *testing.T) {
	const voucher, stock, n = 67, 30, 3
	p := newPipeline(t)
	p.m.MustSeedVoucherIn(t, voucher, stock, n)
	ctx := context.Background()
	if err := p.store.Gate.WarmBuckets(ctx, voucher, stock, n, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	p.writerEnv = map[string]string{"SECKILL_SALE_CHECK_INTERVAL": "200ms"}
	p.startWriter(t)
	p.acceptOrders(t, voucher, 6)
	p.waitOrders(t, voucher, 6)

	const user = 7
	k := salestate.BucketKeys(p.r.Prefix, voucher, n, salestate.Home(user, n))
	p.r.Client.HSet(ctx, k.Voucher, "epoch", "0123456789012345678901234567890123456789")
	p.r.Client.HIncrBy(ctx, k.Voucher, salestate.FieldStock, 2)
	store := saletest.New(p.r.Client, p.r.Prefix)
	svc := &order.Service{IDs: idgen.New(p.r.Client, p.r.Key("order"), 100), Gate: store.Gate, Publisher: p.pub, Logger: p.logger}
	if refused := placeOnceResumed(t, svc, user, voucher, order.ErrPaused); refused == 0 {
		t.Fatal("the stale bucket sold at once: the gate did not check its replication id")
	}
	p.waitOrders(t, voucher, 7)
	testsupport.Wait(t, 10*time.Second, "the sale's net stock is MySQL's", func() bool {
		size, err := store.Repair.Size(ctx, voucher)
		return err == nil && size.Epoch == size.RedisNow && size.Stock == stock-7
	})
}

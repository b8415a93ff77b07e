package gate_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
)

// The gate from Go, as the API calls it: many buyers at once (32 per
// core: 64 on the bench's two cores, the bench's crowd), decided in
// batches. Besides the rate, each reports the CPU per attempt of the
// voucher's master (INFO cpu, every thread, net of its idle rate measured
// just before: the figure that bounds one master; anything else using that
// server counts too) and the attempts per script call.
func BenchmarkGateAccept(b *testing.B) {
	benchGate(b, 1<<40, 0, func(u int64) error { return nil })
}

// Refusals: a sale sold out, and buyers who already bought, asking again.
func BenchmarkGateSoldOut(b *testing.B) {
	benchGate(b, 0, 0, func(int64) error { return order.ErrSoldOut })
}

func BenchmarkGateAlreadyBought(b *testing.B) {
	const buyers = 4096
	benchGate(b, 1<<40, buyers, func(int64) error { return order.ErrAlreadyBought })
}

// benchGate has b.N attempts made on a voucher of stock units, by users
// 1..users over and over (users 0: a new user each), who bought first
// when users > 0; want says the outcome each attempt must get.
func benchGate(b *testing.B, stock int64, users int64, want func(int64) error) {
	r, store, voucher := warmedVoucherOn(b, clients[1].store, stock)
	ctx := context.Background()
	for u := int64(1); u <= users; u++ {
		if d, err := store.Gate.Try(ctx, voucher, u, u); err != nil || d.Err != nil {
			b.Fatalf("buyer %d: %v %v", u, d.Err, err)
		}
	}
	var next atomic.Int64
	master := masterOf(b, r.Client, store.KeysOf(voucher).Voucher)
	idleFrom, idle0 := time.Now(), redisCPU(b, master)
	time.Sleep(time.Second) // the idle CPU is measured over a second
	idleRate := float64(redisCPU(b, master)-idle0) / float64(time.Since(idleFrom))
	cpu0, calls0 := redisCPU(b, master), store.Gate.GateCalls()
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := next.Add(1)
			u := n
			if users > 0 {
				u = 1 + n%users
			}
			d, err := store.Gate.Try(ctx, voucher, u, 1<<41+n)
			if err != nil || d.Err != want(u) {
				b.Errorf("try of user %d: %v %v, want %v", u, d.Err, err, want(u))
				return
			}
		}
	})
	b.StopTimer()
	cpu, calls := redisCPU(b, master)-cpu0, store.Gate.GateCalls()-calls0
	net := float64(cpu) - idleRate*float64(b.Elapsed())
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "attempts/s")
	b.ReportMetric(net/float64(b.N)/float64(time.Microsecond), "redis-µs/attempt")
	b.ReportMetric(float64(b.N)/float64(max(calls, 1)), "attempts/call")
}

// masterOf is the server that holds key: on a cluster, its slot's master.
func masterOf(tb testing.TB, rdb redis.UniversalClient, key string) *redis.Client {
	tb.Helper()
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return rdb.(*redis.Client)
	}
	c, err := cc.MasterForKey(context.Background(), key)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// redisCPU is the CPU time the Redis server has used, every thread.
func redisCPU(tb testing.TB, c *redis.Client) time.Duration {
	tb.Helper()
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var total float64
	for line := range strings.SplitSeq(info, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			s, err := strconv.ParseFloat(v, 64)
			if err != nil {
				tb.Fatal(err)
			}
			total += s
		}
	}
	return time.Duration(total * float64(time.Second))
}

// The Redis bytes an accepted order holds, for sizing a sale's Redis: once
// the gate took it (its buyer, its reservation pending for the writer) and
// once the writer settled it (the reservation gone, the settled record
// kept for order-status lookups until the sale's keep ends). On a Redis of
// its own, so that only these keys count; used_memory includes the
// allocator's rounding, as maxmemory does.
func BenchmarkRedisBytesPerOrder(b *testing.B) {
	r, _ := testsupport.MustPrivateRedis(b)
	store := saletest.New(r.Client, r.Prefix)
	ctx := context.Background()
	const voucher = 1
	if err := store.Gate.Warm(ctx, voucher, int64(b.N), time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		b.Fatal(err)
	}
	before := testsupport.UsedMemory(b, r.Client)
	events := make([]order.Event, 0, b.N)
	for i := range b.N {
		// Ids of today's size (idgen: seconds since 2026 over a 32-bit
		// sequence, 17 digits), users of a site of millions.
		id, uid := int64(30_000_000)<<32+int64(i), int64(5_000_000+i)
		d, err := store.Gate.Try(ctx, voucher, uid, id)
		if err != nil || d.Err != nil {
			b.Fatalf("order %d: %v %v", i, d.Err, err)
		}
		events = append(events, order.Event{OrderID: id, UserID: uid, VoucherID: voucher, AcceptedAt: d.AcceptedAt.UnixMilli()})
	}
	pending := testsupport.UsedMemory(b, r.Client) - before
	// Settled as the writer settles them, a batch at a time.
	for batch := range slices.Chunk(events, 1000) {
		settled := make([]order.Status, len(batch))
		for i, e := range batch {
			settled[i] = order.Status{ID: e.OrderID, UserID: e.UserID, VoucherID: e.VoucherID, Status: order.StatusConfirmed, CreateTime: time.UnixMilli(e.AcceptedAt)}
		}
		if err := store.Records.RecordSettled(ctx, settled); err != nil {
			b.Fatal(err)
		}
		if err := store.Confirm(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	settled := testsupport.UsedMemory(b, r.Client) - before
	b.ReportMetric(float64(pending)/float64(b.N), "bytes/pending-order")
	b.ReportMetric(float64(settled)/float64(b.N), "bytes/settled-order")
}

package gate_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/order"
)

// The gate from Go, as the API calls it: many buyers at once (64, the
// bench's crowd), decided in batches. Besides the rate, each reports the
// Redis server's CPU per attempt (INFO cpu, every thread: the figure that
// bounds one master) and the attempts per script call.
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
		if d, err := store.Try(ctx, voucher, u, u); err != nil || d.Err != nil {
			b.Fatalf("buyer %d: %v %v", u, d.Err, err)
		}
	}
	var next atomic.Int64
	cpu0, calls0 := redisCPU(b, r.Client), store.GateCalls()
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := next.Add(1)
			u := n
			if users > 0 {
				u = 1 + n%users
			}
			d, err := store.Try(ctx, voucher, u, 1<<41+n)
			if err != nil || d.Err != want(u) {
				b.Errorf("try of user %d: %v %v, want %v", u, d.Err, err, want(u))
				return
			}
		}
	})
	b.StopTimer()
	cpu, calls := redisCPU(b, r.Client)-cpu0, store.GateCalls()-calls0
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "attempts/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "redis-µs/attempt")
	b.ReportMetric(float64(b.N)/float64(max(calls, 1)), "attempts/call")
}

// redisCPU is the CPU time the Redis servers behind rdb have used, every
// master's on a cluster.
func redisCPU(tb testing.TB, rdb redis.UniversalClient) time.Duration {
	tb.Helper()
	ctx := context.Background()
	var total atomic.Int64
	read := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "cpu").Result()
		if err != nil {
			return err
		}
		for line := range strings.SplitSeq(info, "\r\n") {
			k, v, _ := strings.Cut(line, ":")
			if k == "used_cpu_sys" || k == "used_cpu_user" {
				s, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return err
				}
				total.Add(int64(s * 1e6))
			}
		}
		return nil
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, read)
	} else {
		err = read(ctx, rdb.(*redis.Client))
	}
	if err != nil {
		tb.Fatal(err)
	}
	return time.Duration(total.Load()) * time.Microsecond
}

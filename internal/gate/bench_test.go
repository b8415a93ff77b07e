package gate_test

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/gate"
	"github.com/seckill/seckill/internal/testsupport"
)

// The gate from Go, as the API calls it: one EVALSHA per order, many
// clients at once, every try accepted (one new user each, stock to spare).
func BenchmarkGateAccept(b *testing.B) {
	r := testsupport.MustRedis(b)
	store := gate.NewStore(r.Client, r.Prefix)
	ctx := context.Background()
	voucher := 1 + rand.Int64N(1<<30)
	if err := store.Warm(ctx, voucher, 1<<40, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		b.Fatal(err)
	}
	var users atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			u := users.Add(1)
			d, err := store.Try(ctx, voucher, u, u)
			if err != nil || d.Err != nil {
				b.Errorf("try of user %d: %v %v, want accepted", u, err, d.Err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "orders/s")
}

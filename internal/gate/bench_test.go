package gate_test

import (
	"context"
	"sync/atomic"
	"testing"
)

// The gate from Go, as the API calls it: one EVALSHA per order, many
// clients at once, every try accepted (one new user each, stock to spare).
func BenchmarkGateAccept(b *testing.B) {
	_, store, voucher := warmedVoucher(b, 1<<40)
	ctx := context.Background()
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

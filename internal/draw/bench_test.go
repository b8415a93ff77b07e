package draw_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/salestate"
)

// BenchmarkDraw100k is the draw of 100,000 entrants, from its seed to the
// sale recorded as drawn: reading the entries, ordering them, and serving
// the winners through the gate and onto the topic. The entries are made
// through the gate beforehand, out of the timing, and the window is then
// closed by moving the sale's opening back in the store (the admin's
// route refuses it for a draw sale); each iteration is a sale of its own.
func BenchmarkDraw100k(b *testing.B) {
	const entrants = 100_000
	for _, stock := range []int64{100, 10_000} {
		b.Run("stock="+strconv.FormatInt(stock, 10), func(b *testing.B) {
			g := newRig(b)
			g.window = time.Hour
			ctx := context.Background()
			for b.Loop() {
				b.StopTimer()
				voucher := g.sale(b, stock)
				var next atomic.Int64
				var wg sync.WaitGroup
				for range 32 {
					wg.Go(func() {
						for u := next.Add(1); u <= entrants; u = next.Add(1) {
							if _, err := g.store.Gate.Try(ctx, voucher, u, 1_000_000+u); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				now, err := g.store.Now(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := g.store.Gate.Adjust(ctx, voucher, 0, now.Add(-g.window), time.Time{}); err != nil {
					b.Fatal(err)
				}
				g.waitDue(b, voucher)
				fence := g.fence(b)
				b.StartTimer()
				began := time.Now()
				if err := g.drawer(0).Draw(ctx, voucher, fence); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(time.Since(began).Seconds(), "s/draw")
				keys := salestate.KeysFor(g.r.Prefix, voucher)
				if n := g.r.Client.HLen(ctx, keys.Entrants).Val(); n != entrants {
					b.Fatalf("%d entrants, want %d", n, entrants)
				}
				if n := g.r.Client.HLen(ctx, keys.Buyers).Val(); n != stock {
					b.Fatalf("%d winners, want %d", n, stock)
				}
			}
		})
	}
}

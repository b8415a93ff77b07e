package idgen_test

import (
	"context"
	"testing"

	"github.com/seckill/seckill/internal/idgen"
	"github.com/seckill/seckill/internal/testsupport"
)

// Ids from leased blocks: one Redis round trip per block of 1000, the rest
// handed out in process.
func BenchmarkNext(b *testing.B) {
	r := testsupport.MustRedis(b)
	gen := idgen.New(r.Client, r.Key("order"), 1000)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := gen.Next(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

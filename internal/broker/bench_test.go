package broker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/testsupport"
)

func BenchmarkDecodeOrder(b *testing.B) {
	msg := broker.OrderMessage(order.Event{OrderID: 1 << 50, UserID: 123456789, VoucherID: 42, AcceptedAt: time.Now().UnixMilli()})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := broker.DecodeOrder(msg.Value); err != nil {
			b.Fatal(err)
		}
	}
}

// Publishing as the api does: one event per call, 64 callers at once, all
// on one sale's partition, acks from every in-sync replica.
func BenchmarkPublishOneSale(b *testing.B) {
	k := testsupport.MustKafka(b)
	topic := k.MustTopic(b, 1)
	w := broker.NewWriter(k.Brokers, topic)
	p := broker.NewOrderPublisher(w, 5*time.Second)
	defer p.Close()
	ctx := context.Background()
	var ids atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := ids.Add(1)
			if err := p.Publish(ctx, order.Event{OrderID: id, UserID: id, VoucherID: 7, AcceptedAt: time.Now().UnixMilli()}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

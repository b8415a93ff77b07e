package broker_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

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
// on one sale's partition, acks from every in-sync replica; by the
// Producer (a produce in flight per partition) without spacing and with
// requests 20 ms apart (the replicated default) and, as the baseline, by a kafka.Writer with the batch
// timers the api used before (5 ms on one replica, 20 ms on three). On the
// brokers of SECKILL_TEST_KAFKA_BROKERS (one broker in make bench's first
// pass, three in the cluster pass); the latencies are each call's.
func BenchmarkPublishOneSale(b *testing.B) {
	k := testsupport.MustKafka(b)
	topic := k.MustTopic(b, 1)
	publishers := []struct {
		name string
		new  func() publisher
	}{
		{"Producer-no-linger", func() publisher { return broker.NewProducer(k.Brokers, topic, 0) }},
		{"Producer-linger-20ms", func() publisher {
			p := broker.NewProducer(k.Brokers, topic, 0)
			p.Linger = 20 * time.Millisecond
			return p
		}},
		{"kafka.Writer-5ms", func() publisher { return writerWaiting(k.Brokers, topic, 5*time.Millisecond) }},
		{"kafka.Writer-20ms", func() publisher { return writerWaiting(k.Brokers, topic, 20*time.Millisecond) }},
	}
	for _, pub := range publishers {
		b.Run(pub.name, func(b *testing.B) {
			w := pub.new()
			defer w.Close()
			ctx := context.Background()
			var ids atomic.Int64
			var mu sync.Mutex
			var took []time.Duration
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var mine []time.Duration
				for pb.Next() {
					id := ids.Add(1)
					start := time.Now()
					if err := w.WriteMessages(ctx, broker.OrderMessage(order.Event{OrderID: id, UserID: id, VoucherID: 7, AcceptedAt: time.Now().UnixMilli()})); err != nil {
						b.Error(err)
						return
					}
					mine = append(mine, time.Since(start))
				}
				mu.Lock()
				took = append(took, mine...)
				mu.Unlock()
			})
			b.StopTimer()
			slices.Sort(took)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			if len(took) > 0 {
				b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
			}
		})
	}
}

type publisher interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
	Close() error
}

func writerWaiting(brokers []string, topic string, wait time.Duration) publisher {
	w := broker.NewWriter(brokers, topic)
	w.BatchTimeout = wait
	return w
}

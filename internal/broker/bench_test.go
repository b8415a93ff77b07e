package broker_test

import (
	"testing"
	"time"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/order"
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

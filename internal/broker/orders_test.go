package broker_test

import (
	"testing"
	"time"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/order"
)

func TestDecodeOrder(t *testing.T) {
	now := time.Now().UnixMilli()
	valid := order.Event{OrderID: 1 << 50, UserID: 7, VoucherID: 42, AcceptedAt: now}
	for _, tc := range []struct {
		name  string
		value string
		want  order.Event // zero when it must be refused
	}{
		{"Valid", string(broker.OrderMessage(valid).Value), valid},
		{"EarliestAcceptance", `{"orderId":"1","userId":1,"voucherId":1,"acceptedAt":1577836800000}`,
			order.Event{OrderID: 1, UserID: 1, VoucherID: 1, AcceptedAt: 1577836800000}},
		{"LatestAcceptance", `{"orderId":"1","userId":1,"voucherId":1,"acceptedAt":2147483647000}`,
			order.Event{OrderID: 1, UserID: 1, VoucherID: 1, AcceptedAt: 2147483647000}},
		{"AcceptedAtOneMillisecond", `{"orderId":"5","userId":1,"voucherId":9,"acceptedAt":1}`, order.Event{}},
		{"AcceptedAtBefore2020", `{"orderId":"5","userId":1,"voucherId":9,"acceptedAt":1577836799999}`, order.Event{}},
		{"AcceptedAtPast2038", `{"orderId":"5","userId":1,"voucherId":9,"acceptedAt":2147483648000}`, order.Event{}},
		{"AcceptedAtNegative", `{"orderId":"5","userId":1,"voucherId":9,"acceptedAt":-1}`, order.Event{}},
		{"MissingOrderID", `{"userId":1,"voucherId":9,"acceptedAt":1700000000000}`, order.Event{}},
		{"ZeroUser", `{"orderId":"5","userId":0,"voucherId":9,"acceptedAt":1700000000000}`, order.Event{}},
		{"NegativeVoucher", `{"orderId":"5","userId":1,"voucherId":-9,"acceptedAt":1700000000000}`, order.Event{}},
		{"OrderIDNotAString", `{"orderId":5,"userId":1,"voucherId":9,"acceptedAt":1700000000000}`, order.Event{}},
		{"OrderIDOverflows", `{"orderId":"9223372036854775808","userId":1,"voucherId":9,"acceptedAt":1700000000000}`, order.Event{}},
		{"NotJSON", `not an order`, order.Event{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := broker.DecodeOrder([]byte(tc.value))
			if tc.want == (order.Event{}) {
				if err == nil {
					t.Fatalf("decoded %+v, want a refusal", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

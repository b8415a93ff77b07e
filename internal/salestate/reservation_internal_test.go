package salestate

import (
	"testing"

	"github.com/seckill/seckill/internal/order"
)

func TestParseReservation(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, tc := range []struct {
		value string
		want  order.Event
		bad   bool
	}{
		{value: "42:1700000000000", want: order.Event{OrderID: 9, UserID: 42, VoucherID: 7, AcceptedAt: 1700000000000}},
		{value: "42:1700000000000:" + tp, want: order.Event{OrderID: 9, UserID: 42, VoucherID: 7, AcceptedAt: 1700000000000, Trace: tp}},
		{value: "42", bad: true},
		{value: "x:1700000000000", bad: true},
		{value: "42:soon:" + tp, bad: true},
		{value: "", bad: true},
	} {
		got, err := ParseReservation(7, 9, tc.value)
		if tc.bad != (err != nil) || !tc.bad && got != tc.want {
			t.Errorf("ParseReservation(%q) = %+v, %v; want %+v (malformed: %v)", tc.value, got, err, tc.want, tc.bad)
		}
	}
}

package sale_test

import (
	"maps"
	"testing"

	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/sale"
)

func ev(orderID, userID, at int64) order.Event {
	return order.Event{OrderID: orderID, UserID: userID, VoucherID: 1, AcceptedAt: at}
}

func TestMake(t *testing.T) {
	tests := []struct {
		name      string
		truth     sale.Truth
		pending   []order.Event
		stock     int64
		buyers    map[int64]int64
		settled   int
		unsettled int
		oversold  int64
	}{
		{name: "NothingPending",
			truth: sale.Truth{Stock: 7, Holders: map[int64]int64{1: 11, 2: 12}},
			stock: 7, buyers: map[int64]int64{1: 11, 2: 12}},
		{name: "UnsettledOrdersKeepTheirUnits",
			truth:   sale.Truth{Stock: 7, Holders: map[int64]int64{1: 11}},
			pending: []order.Event{ev(21, 2, 100), ev(22, 3, 101)},
			stock:   5, buyers: map[int64]int64{1: 11, 2: 21, 3: 22}, unsettled: 2},
		{name: "SettledReservationsAreDropped",
			truth:   sale.Truth{Stock: 6, Holders: map[int64]int64{1: 11, 2: 21}, Settled: map[int64]bool{21: true}},
			pending: []order.Event{ev(21, 2, 100)},
			stock:   6, buyers: map[int64]int64{1: 11, 2: 21}, settled: 1},
		{name: "AFailedOrderIsSettledAndFreesItsBuyer",
			truth:   sale.Truth{Stock: 0, Holders: map[int64]int64{}, Settled: map[int64]bool{31: true}},
			pending: []order.Event{ev(31, 4, 100)},
			stock:   0, buyers: map[int64]int64{}, settled: 1},
		{name: "ASecondOrderOfAHolderTakesNoUnit",
			truth:   sale.Truth{Stock: 3, Holders: map[int64]int64{1: 11}},
			pending: []order.Event{ev(41, 1, 100)},
			stock:   3, buyers: map[int64]int64{1: 11}, unsettled: 1},
		{name: "TwoUnsettledOrdersOfOneUserTakeOneUnitTheEarliest",
			truth:   sale.Truth{Stock: 3, Holders: map[int64]int64{}},
			pending: []order.Event{ev(52, 5, 200), ev(51, 5, 100)},
			stock:   2, buyers: map[int64]int64{5: 51}, unsettled: 2},
		{name: "MoreUnsettledThanMySQLHasAreOversold",
			truth:   sale.Truth{Stock: 1, Holders: map[int64]int64{}},
			pending: []order.Event{ev(61, 6, 100), ev(62, 7, 101), ev(63, 8, 102)},
			stock:   0, buyers: map[int64]int64{6: 61, 7: 62, 8: 63}, unsettled: 3, oversold: 2},
		{name: "RestockAfterALoss",
			// MySQL restocked to 10 with 2 sold; Redis had rolled back.
			truth:   sale.Truth{Stock: 8, Holders: map[int64]int64{1: 11, 2: 12}, Settled: map[int64]bool{12: true}},
			pending: []order.Event{ev(12, 2, 50), ev(13, 3, 60)},
			stock:   7, buyers: map[int64]int64{1: 11, 2: 12, 3: 13}, settled: 1, unsettled: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := sale.Make(tt.truth, tt.pending)
			if p.Stock != tt.stock || !maps.Equal(p.Buyers, tt.buyers) || len(p.Settled) != tt.settled ||
				p.Unsettled != tt.unsettled || p.Oversold != tt.oversold {
				t.Fatalf("plan %+v, want stock %d, buyers %v, %d settled, %d unsettled, %d oversold",
					p, tt.stock, tt.buyers, tt.settled, tt.unsettled, tt.oversold)
			}
		})
	}
}

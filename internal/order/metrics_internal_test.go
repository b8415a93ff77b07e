package order

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Answers handled at once are recorded in any order; the stock gauge ends
// at the latest answer's stock, not the last recorded.
func TestStockGaugeKeepsTheLatestAnswer(t *testing.T) {
	base := time.UnixMilli(1_700_000_000_000)
	for _, tc := range []struct {
		name    string
		answers []stockAt
		want    float64
	}{
		{"in order", []stockAt{{base, 3}, {base.Add(time.Millisecond), 2}, {base.Add(2 * time.Millisecond), 0}}, 0},
		{"the sold-out answer recorded before an earlier sale", []stockAt{{base.Add(2 * time.Millisecond), 0}, {base, 14}}, 0},
		{"two answers of one millisecond", []stockAt{{base, 5}, {base, 6}}, 5},
		{"a restock later", []stockAt{{base, 0}, {base.Add(time.Second), 100}}, 100},
	} {
		m := NewMetrics(prometheus.NewRegistry())
		for _, a := range tc.answers {
			m.stockSeen(7, a.stock, a.at)
		}
		if got := testutil.ToFloat64(m.stock.WithLabelValues("7")); got != tc.want {
			t.Errorf("%s: the gauge reads %v, want %v", tc.name, got, tc.want)
		}
	}
}

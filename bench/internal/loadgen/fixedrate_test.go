package loadgen

import (
	"strings"
	"testing"
	"time"
)

// Net of idle subtracts each process's idle CPU at its rate over the run's
// seconds; a cluster's nodes are one row; the ratio is against the first
// topology.
func TestFixedRateFigures(t *testing.T) {
	one := FixedRateFigures{Label: "one node", Rate: 100, Orders: 1000, RunSeconds: 10, IdleSeconds: 20,
		Names: []string{"api", "redis", "kafka"},
		Idle:  []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 2 * time.Second},
		Used:  []time.Duration{time.Second, 500 * time.Millisecond, 2 * time.Second}}
	cluster := FixedRateFigures{Label: "cluster", Rate: 100, Orders: 1000, RunSeconds: 10, IdleSeconds: 20,
		Names: []string{"api", "redis-17001", "redis-17002", "kafka-1", "kafka-2"},
		Idle:  []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 400 * time.Millisecond, 2 * time.Second, 2 * time.Second},
		Used:  []time.Duration{1500 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second, 2 * time.Second}}
	for _, tt := range []struct {
		f              FixedRateFigures
		kind           string
		idle, raw, net float64
	}{
		// api: 1,000 ms used, 10 ms/s idle × 10 s = 100 ms: 900 ms net per 1,000 orders.
		{one, "api", 10, 1000, 900},
		{one, "redis", 20, 500, 300},
		{one, "kafka", 100, 2000, 1000},
		{one, "total", 130, 3500, 2200},
		{cluster, "redis", 40, 1000, 600},
		{cluster, "kafka", 200, 4000, 2000},
		{cluster, "api", 10, 1500, 1400},
	} {
		idle, raw, net, ok := tt.f.figures(tt.kind)
		if !ok || idle != tt.idle || raw != tt.raw || net != tt.net {
			t.Errorf("%s %s: idle %v raw %v net %v, want %v %v %v", tt.f.Label, tt.kind, idle, raw, net, tt.idle, tt.raw, tt.net)
		}
	}
	table := FixedRateTable([]FixedRateFigures{one, cluster})
	for _, want := range []string{"api ×1.56", "redis ×2.00", "kafka ×2.00", "total ×1.82"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table has no %q:\n%s", want, table)
		}
	}
}

package loadgen

import (
	"testing"
	"time"
)

func TestAuditViolations(t *testing.T) {
	clean := Audit{Accepted: 100, Orders: 100, DistinctUsers: 100, RedisStock: 0, MySQLStock: 0}
	tests := []struct {
		name     string
		change   func(*Audit)
		expected int64
		want     int // violations
	}{
		{"Clean", func(*Audit) {}, 100, 0},
		{"OrderLost", func(a *Audit) { a.Orders, a.DistinctUsers, a.MySQLStock = 99, 99, 1 }, 100, 3},
		{"Oversold", func(a *Audit) { a.Orders, a.DistinctUsers, a.Accepted, a.MySQLStock = 101, 101, 101, -1 }, 100, 2},
		{"UserTwice", func(a *Audit) { a.DistinctUsers = 99 }, 100, 1},
		{"FailedOrder", func(a *Audit) { a.Failures = 1 }, 100, 1},
		{"StockDisagrees", func(a *Audit) { a.RedisStock = 1 }, 100, 1},
		{"StillPending", func(a *Audit) { a.Pending = 3 }, 100, 1},
		{"AcceptedMoreThanStored", func(a *Audit) { a.Accepted = 120 }, 100, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := clean
			tt.change(&a)
			if got := a.violations(tt.expected); len(got) != tt.want {
				t.Fatalf("violations %q, want %d", got, tt.want)
			}
		})
	}
}

func TestQuantileOfHistogramDifference(t *testing.T) {
	before := []bucket{{0.01, 10}, {0.1, 10}, {1, 10}, {1e308, 10}}
	after := []bucket{{0.01, 10}, {0.1, 60}, {1, 110}, {1e308, 110}}
	diff := subtract(after, before)
	if got, want := quantile(diff, 0.5), 100*time.Millisecond; got != want {
		t.Fatalf("p50 %v, want %v (the top of the first non-empty bucket)", got, want)
	}
	if got := quantile(diff, 0.99); got <= 900*time.Millisecond || got > time.Second {
		t.Fatalf("p99 %v, want just under 1s", got)
	}
	if got := quantile(subtract(before, before), 0.99); got != 0 {
		t.Fatalf("p99 of nothing %v, want 0", got)
	}
}

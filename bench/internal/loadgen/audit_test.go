package loadgen

import (
	"testing"
	"time"
)

func TestAuditViolations(t *testing.T) {
	clean := Audit{Expect: Expect{Users: 100, Stock: 100, Accepted: 100}, Orders: 100, DistinctUsers: 100, RedisStock: 0, MySQLStock: 0}
	tests := []struct {
		name   string
		change func(*Audit)
		want   int // violations
	}{
		{"Clean", func(*Audit) {}, 0},
		{"OrderLost", func(a *Audit) { a.Orders, a.DistinctUsers, a.MySQLStock = 99, 99, 1 }, 3},
		{"Oversold", func(a *Audit) { a.Orders, a.DistinctUsers, a.Accepted, a.MySQLStock = 101, 101, 101, -1 }, 2},
		{"UnitLost", func(a *Audit) { a.Stock, a.Users = 101, 101 }, 2},
		{"UserTwice", func(a *Audit) { a.DistinctUsers = 99 }, 1},
		{"FailedOrder", func(a *Audit) { a.Failures = 1 }, 1},
		{"StockDisagrees", func(a *Audit) { a.RedisStock = 1 }, 1},
		{"StillPending", func(a *Audit) { a.Pending = 3 }, 1},
		{"AcceptedMoreThanStored", func(a *Audit) { a.Accepted = 120 }, 1},
		// 10 clients hung up: 4 of them had taken a unit, 6 had not.
		{"HangUps", func(a *Audit) {
			a.Users, a.Stock, a.Unanswered, a.Orders, a.DistinctUsers, a.MySQLStock, a.RedisStock = 110, 110, 10, 104, 104, 6, 6
		}, 0},
		{"HangUpsLostAnAcceptedOrder", func(a *Audit) {
			a.Users, a.Stock, a.Unanswered, a.Orders, a.DistinctUsers, a.MySQLStock, a.RedisStock = 110, 110, 10, 99, 99, 11, 11
		}, 1},
		{"HangUpsOversold", func(a *Audit) {
			a.Users, a.Stock, a.Unanswered, a.Orders, a.DistinctUsers, a.MySQLStock = 110, 110, 10, 111, 111, -1
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := clean
			tt.change(&a)
			if got := a.violations(); len(got) != tt.want {
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

// A warm-up's refusals may have fallen on any voucher: the audit of each
// allows up to all of them, never more than its buyers, and still catches
// a unit lost or sold twice.
func TestSpreadExpect(t *testing.T) {
	tests := []struct {
		name             string
		buyers, refused  int64
		orders           int64
		want             Expect
		violationsWanted int
	}{
		{"NoneRefused", 100, 0, 100, Expect{Users: 100, Stock: 100, Accepted: 100}, 0},
		{"SomeRefusedHere", 100, 7, 95, Expect{Users: 100, Stock: 100, Accepted: 93, Unanswered: 7}, 0},
		{"RefusedElsewhere", 100, 7, 100, Expect{Users: 100, Stock: 100, Accepted: 93, Unanswered: 7}, 0},
		{"MoreRefusedThanBuyers", 100, 250, 0, Expect{Users: 100, Stock: 100, Accepted: 0, Unanswered: 100}, 0},
		{"TooFewOrders", 100, 7, 92, Expect{Users: 100, Stock: 100, Accepted: 93, Unanswered: 7}, 1},
		{"Oversold", 100, 7, 101, Expect{Users: 100, Stock: 100, Accepted: 93, Unanswered: 7}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := spreadExpect(tt.buyers, tt.refused)
			if got != tt.want {
				t.Fatalf("spreadExpect(%d, %d) = %+v, want %+v", tt.buyers, tt.refused, got, tt.want)
			}
			left := got.Stock - tt.orders
			a := Audit{Expect: got, Orders: tt.orders, DistinctUsers: tt.orders, MySQLStock: left, RedisStock: left}
			if v := a.violations(); len(v) != tt.violationsWanted {
				t.Fatalf("violations %q, want %d", v, tt.violationsWanted)
			}
		})
	}
}

func TestWarmupToleratesColdRefusalsOnly(t *testing.T) {
	const notTaken = "503 flash sale temporarily unavailable: your order was not taken, try again shortly"
	tests := []struct {
		name     string
		outcomes map[string]int64
		want     bool
	}{
		{"AllOK", map[string]int64{"ok": 100}, true},
		{"NotTaken", map[string]int64{"ok": 98, notTaken: 2}, true},
		{"ReservedQueueSlow", map[string]int64{"ok": 99, "503 your order is reserved but the order queue is slow: it will be processed; follow it by its id": 1}, true},
		{"ATenth", map[string]int64{"ok": 90, notTaken: 10}, true},
		{"MostlyRefused", map[string]int64{"ok": 89, notTaken: 11}, false},
		{"ServerFault", map[string]int64{"ok": 99, "500 internal error": 1}, false},
		{"TransportError", map[string]int64{"ok": 99, "transport error: connection refused": 1}, false},
		{"SoldOut", map[string]int64{"ok": 99, "200 sold out": 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var requests int64
			for _, n := range tt.outcomes {
				requests += n
			}
			if got := coldRefusals(tt.outcomes, requests-tt.outcomes["ok"], requests); got != tt.want {
				t.Fatalf("coldRefusals(%v) = %v, want %v", tt.outcomes, got, tt.want)
			}
		})
	}
}

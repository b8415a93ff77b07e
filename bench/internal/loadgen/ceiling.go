package loadgen

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"time"
)

// CeilingConfig is a hot voucher's ceiling: one sale in Buckets stock
// buckets, sold at rising open-loop rates, each held for Hold.
type CeilingConfig struct {
	Rates   []int         // orders a second, tried in order
	Hold    time.Duration // how long each rate is held
	Buckets int
	Workers uint64 // the most connections the pacer may open
	MaxP99  time.Duration
}

// CeilingStep is one rate's outcome.
type CeilingStep struct {
	Rate     int
	Achieved float64 // accepted a second
	P50, P99 time.Duration
	Accepted int64
	Held     bool
	Why      string // why not held
}

// Ceiling sells one fresh sale per rate, of as many units as the rate
// sends in Hold, to as many buyers, and stops at the first rate not held:
// 99 % of the orders accepted (the others told to try again while a
// bucket refills), p99 within MaxP99, the audit exact. It prints every
// step and the highest rate held.
func (s *Sale) Ceiling(ctx context.Context, out io.Writer, cfg CeilingConfig) ([]CeilingStep, error) {
	s.Buckets = cfg.Buckets
	defer func() { s.Buckets = 0 }()
	fmt.Fprintf(out, "\none hot voucher in %d bucket(s), open loop, each rate held %v, up to %d connections; held: 99 %% of the orders accepted, p99 ≤ %v, the audit exact\n",
		cfg.Buckets, cfg.Hold, cfg.Workers, cfg.MaxP99)
	var steps []CeilingStep
	// The first rate once more before it, not recorded: brokers fresh from a
	// restart spend their first minute compiling (docs/performance.md).
	for i, rate := range append([]int{cfg.Rates[0]}, cfg.Rates...) {
		warmup := i == 0
		units := rate * int(cfg.Hold/time.Second)
		tokens, err := s.Sessions(ctx, 600_000_000+rand.Int64N(1<<40), units)
		if err != nil {
			return steps, fmt.Errorf("sessions: %w", err)
		}
		voucher, err := s.CreateVoucher(ctx, units)
		if err != nil {
			return steps, err
		}
		lag, err := s.LagBuckets(ctx)
		if err != nil {
			return steps, err
		}
		name := fmt.Sprintf("hot voucher %d/s", rate)
		if warmup {
			name += ", warm-up (not recorded)"
		}
		rep, err := Run(name, Requests(s.API, "/voucher-order/seckill/"+strconv.FormatInt(voucher, 10), tokens),
			Options{Workers: cfg.Workers, Rate: rate})
		if err != nil {
			return steps, err
		}
		end := time.Now()
		fmt.Fprintln(out, rep)
		st := CeilingStep{Rate: rate, Accepted: rep.OK, P50: rep.P50, P99: rep.P99, Achieved: float64(rep.OK) / rep.Duration.Seconds()}
		refused := int64(units) - rep.OK
		a, err := s.AuditSale(ctx, voucher, spreadExpect(int64(units), refused), end, 60*time.Second, lag)
		if err != nil {
			return steps, err
		}
		switch {
		case len(a.Violations) > 0:
			return steps, fmt.Errorf("%s: audit: %v", name, a.Violations)
		case rep.OK*100 < int64(units)*99:
			// A buyer told "units are being moved, try again" (a bucket
			// refilling) is refused, not lost: up to 1 % of them is held.
			st.Why = fmt.Sprintf("%d of %d accepted: %v", rep.OK, units, rep.Outcomes)
		case rep.P99 > cfg.MaxP99:
			st.Why = fmt.Sprintf("p99 %v", rep.P99.Round(time.Millisecond))
		default:
			st.Held = true
		}
		if err := s.EndSale(ctx, voucher); err != nil {
			return steps, err
		}
		if warmup {
			continue
		}
		steps = append(steps, st)
		if !st.Held {
			break
		}
	}
	fmt.Fprintf(out, "\nA hot voucher's ceiling (%s; one partition of the orders topic)\n", time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(out, "%10s %12s %10s %10s  %s\n", "rate", "accepted/s", "p50", "p99", "held")
	best := 0
	for _, st := range steps {
		held := "yes"
		if !st.Held {
			held = "no: " + st.Why
		} else {
			best = st.Rate
		}
		fmt.Fprintf(out, "%10d %12.0f %10v %10v  %s\n", st.Rate, st.Achieved, st.P50.Round(100*time.Microsecond), st.P99.Round(100*time.Microsecond), held)
	}
	if best == 0 {
		fmt.Fprintln(out, "no rate held")
	} else {
		fmt.Fprintf(out, "the highest rate held: %d orders a second, all on one partition of the orders topic\n", best)
	}
	return steps, nil
}

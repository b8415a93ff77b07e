package loadgen

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FixedRateConfig is one topology's run at a fixed open-loop rate, the
// figure the cost of scaling out is judged by: at saturation on two
// shared cores, contention rather than the design sets the CPU per order.
// With Rate 0 it is a closed-loop run instead: Users orders sent by
// Workers clients as fast as the answers come, the figure a topology's
// latency bounds.
type FixedRateConfig struct {
	Label    string
	Rate     int           // orders per second, open loop (vegeta's constant pacer); 0: closed loop
	Duration time.Duration // of the loaded run, open loop
	Users    int           // orders of a closed-loop run
	Idle     time.Duration // CPU sampled with the daemons up and no load
	Vouchers int
	Workers  uint64 // the most concurrent requests the pacer may use
	Procs    Procs
	// Runs collects every topology's figures, one JSON object a line; the
	// table compares them all, ratios against the first.
	Runs string
}

// FixedRateFigures are one topology's.
type FixedRateFigures struct {
	Label          string
	Rate           int    // 0: closed loop
	Clients        uint64 // of a closed loop
	Orders         int64
	RunSeconds     float64
	IdleSeconds    float64
	P50, P99       time.Duration
	LagP50, LagP99 time.Duration
	Names          []string        // the processes, the load generator apart
	Idle, Used     []time.Duration // each process's CPU idle, and loaded
}

// FixedRate measures the idle CPU of every process, sells Rate orders a
// second for Duration over Vouchers vouchers, audits every voucher, and
// prints each topology so far: CPU-ms per 1,000 orders raw and net of idle
// (each process's idle CPU over the run's seconds subtracted), idle CPU
// per second, latency and the accept → MySQL lag.
func (s *Sale) FixedRate(ctx context.Context, out io.Writer, cfg FixedRateConfig) error {
	users := cfg.Rate * int(cfg.Duration/time.Second)
	if cfg.Rate == 0 {
		users = cfg.Users
	}
	tokens, err := s.Sessions(ctx, 400_000_000+rand.Int64N(1<<40), users)
	if err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	vouchers := make([]int64, cfg.Vouchers)
	buyers := make([]int64, cfg.Vouchers)
	for i := range tokens {
		buyers[i%cfg.Vouchers]++
	}
	for i := range vouchers {
		if vouchers[i], err = s.CreateVoucher(ctx, int(buyers[i])); err != nil {
			return err
		}
	}

	f := FixedRateFigures{Label: cfg.Label, Rate: cfg.Rate, Clients: cfg.Workers}
	fmt.Fprintf(out, "\n[%s] idle: %v with the daemons up, no load\n", cfg.Label, cfg.Idle)
	before, err := cfg.Procs.Sample()
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(cfg.Idle):
	}
	after, err := cfg.Procs.Sample()
	if err != nil {
		return err
	}
	idle := cfg.Procs.Diff("idle", 0, before, after)
	f.IdleSeconds = cfg.Idle.Seconds()

	lag, err := s.LagBuckets(ctx)
	if err != nil {
		return err
	}
	reqs := make([]Request, len(tokens))
	for i, tok := range tokens {
		reqs[i] = Requests(s.API, "/voucher-order/seckill/"+strconv.FormatInt(vouchers[i%cfg.Vouchers], 10), []string{tok})[0]
	}
	name := fmt.Sprintf("%s %d/s", cfg.Label, cfg.Rate)
	if cfg.Rate == 0 {
		name = fmt.Sprintf("%s closed loop", cfg.Label)
		fmt.Fprintf(out, "[%s] %d orders by %d clients as fast as they are answered, over %d vouchers, every request accepted\n", cfg.Label, users, cfg.Workers, cfg.Vouchers)
	} else {
		fmt.Fprintf(out, "[%s] %d orders a second for %v over %d vouchers, every request accepted\n", cfg.Label, cfg.Rate, cfg.Duration, cfg.Vouchers)
	}
	rep, used, err := cfg.Procs.Measure(name, func() (Report, error) {
		return Run(name, reqs, Options{Workers: cfg.Workers, Rate: cfg.Rate})
	})
	if err != nil {
		return err
	}
	end := time.Now()
	fmt.Fprintln(out, rep)
	if rep.OK != int64(len(tokens)) {
		return fmt.Errorf("%s: %d of %d requests accepted: %v", name, rep.OK, len(tokens), rep.Outcomes)
	}
	for i, v := range vouchers {
		a, err := s.AuditSale(ctx, v, spreadExpect(buyers[i], 0), end, 60*time.Second, lag)
		if err != nil {
			return err
		}
		if len(a.Violations) > 0 {
			return fmt.Errorf("voucher %d audit: %v", v, a.Violations)
		}
		f.LagP50, f.LagP99 = a.LagP50, a.LagP99
	}
	fmt.Fprintf(out, "audit: the %d vouchers OK\n", cfg.Vouchers)
	// Sold out, the sales end: the next topology's writer, sharing MySQL,
	// would otherwise find them on sale and missing from its Redis, and
	// rebuild them there during its idle sample.
	for _, v := range vouchers {
		if err := s.EndSale(ctx, v); err != nil {
			return err
		}
	}
	f.Orders, f.RunSeconds, f.P50, f.P99 = rep.OK, rep.Duration.Seconds(), rep.P50, rep.P99
	for i, n := range used.Names {
		if n == Self {
			continue
		}
		f.Names = append(f.Names, n)
		f.Idle = append(f.Idle, idle.Used[i])
		f.Used = append(f.Used, used.Used[i])
	}
	runs := []FixedRateFigures{f}
	if cfg.Runs != "" {
		if runs, err = appendRun(cfg.Runs, f); err != nil {
			return err
		}
	}
	fmt.Fprint(out, FixedRateTable(runs))
	return nil
}

// nodeSuffix is what tells nodes of one kind apart: redis-17001, kafka-2.
var nodeSuffix = regexp.MustCompile(`-[0-9]+$`)

// group is the kind of process name: the nodes of a cluster are one row.
func group(name string) string { return nodeSuffix.ReplaceAllString(name, "") }

// figures of one kind of process: idle CPU-ms per second, CPU-ms per
// 1,000 orders raw and net of idle.
func (f FixedRateFigures) figures(kind string) (idlePerSec, raw, net float64, ok bool) {
	var idle, used time.Duration
	for i, n := range f.Names {
		if kind == "total" || group(n) == kind {
			idle, used, ok = idle+f.Idle[i], used+f.Used[i], true
		}
	}
	if !ok || f.Orders == 0 || f.IdleSeconds == 0 {
		return 0, 0, 0, ok
	}
	idlePerSec = float64(idle.Microseconds()) / 1000 / f.IdleSeconds
	usedMs := float64(used.Microseconds()) / 1000
	raw = usedMs / float64(f.Orders) * 1000
	net = (usedMs - idlePerSec*f.RunSeconds) / float64(f.Orders) * 1000
	return idlePerSec, raw, net, true
}

// rate is the orders accepted a second over the loaded run.
func (f FixedRateFigures) rate() float64 {
	if f.RunSeconds == 0 {
		return 0
	}
	return float64(f.Orders) / f.RunSeconds
}

// FixedRateTable prints the topologies side by side, per kind of process
// (a cluster's nodes summed), with each one's ratio to the first.
func FixedRateTable(runs []FixedRateFigures) string {
	if len(runs) == 0 {
		return ""
	}
	var sb strings.Builder
	printf := func(format string, a ...any) { fmt.Fprintf(&sb, format, a...) }
	var kinds []string
	for _, r := range runs {
		for _, n := range r.Names {
			if k := group(n); !slices.Contains(kinds, k) {
				kinds = append(kinds, k)
			}
		}
	}
	kinds = append(kinds, "total")
	printf("\nThe same fixed rate on each topology (one machine, 2 cores; CPU from /proc/<pid>/stat)\n")
	printf("%-20s", "")
	for _, r := range runs {
		load := fmt.Sprintf("%d/s", r.Rate)
		if r.Rate == 0 {
			load = fmt.Sprintf("%d clients", r.Clients)
		}
		printf(" %34s", r.Label+", "+load)
	}
	printf("\n%-20s", "CPU-ms")
	for range runs {
		printf(" %10s %11s %11s", "idle/s", "raw/1k", "net/1k")
	}
	printf("\n")
	for _, k := range kinds {
		printf("%-20s", k)
		for _, r := range runs {
			idle, raw, net, ok := r.figures(k)
			if !ok {
				printf(" %10s %11s %11s", "-", "-", "-")
				continue
			}
			printf(" %10.1f %11.1f %11.1f", idle, raw, net)
		}
		printf("\n")
	}
	row := func(name string, v func(FixedRateFigures) string) {
		printf("%-20s", name)
		for _, r := range runs {
			printf(" %34s", v(r))
		}
		printf("\n")
	}
	row("orders", func(r FixedRateFigures) string { return fmt.Sprintf("%d in %.1fs", r.Orders, r.RunSeconds) })
	row("accepted/s", func(r FixedRateFigures) string { return fmt.Sprintf("%.0f", r.rate()) })
	row("latency p50 / p99", func(r FixedRateFigures) string {
		return fmt.Sprintf("%v / %v", r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond))
	})
	row("accept → MySQL p50/p99", func(r FixedRateFigures) string {
		return fmt.Sprintf("%v / %v", r.LagP50.Round(time.Millisecond), r.LagP99.Round(time.Millisecond))
	})
	if len(runs) > 1 {
		printf("\nagainst %s: accepted/s", runs[0].Label)
		for _, r := range runs[1:] {
			printf(" ×%.2f", r.rate()/runs[0].rate())
		}
		printf("; p50")
		for _, r := range runs[1:] {
			printf(" ×%.2f", float64(r.P50)/float64(runs[0].P50))
		}
		printf("; CPU net of idle:")
		for _, k := range kinds {
			_, _, base, ok := runs[0].figures(k)
			if !ok || base <= 0 {
				continue
			}
			for _, r := range runs[1:] {
				if _, _, net, ok := r.figures(k); ok {
					printf(" %s ×%.2f", k, net/base)
				}
			}
		}
		printf("\n")
	}
	return sb.String()
}

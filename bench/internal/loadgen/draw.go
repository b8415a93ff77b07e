package loadgen

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// DrawBenchConfig is a first-come sale against a draw, in one run.
type DrawBenchConfig struct {
	Users   int
	Workers int
	Procs   Procs
}

// drawPhase is one measured part of a run: its CPU, and what it did.
type drawPhase struct {
	name string
	rep  Report
	cpu  CPU
}

// DrawBench sells cfg.Users units to as many buyers, first-come, then on a
// sale with a draw: every buyer enters in the window (the api and Redis
// only), then the order-writer's drawer serves them all and the writer
// writes their orders. The CPU per 1,000 of each phase, per process,
// against first-come's per 1,000 orders (bought and written), is what a
// draw costs; every buyer wins, so the orders are as many on both sides.
func (s *Sale) DrawBench(ctx context.Context, out io.Writer, cfg DrawBenchConfig) error {
	tokens, err := s.Sessions(ctx, 800_000_000+time.Now().UnixNano()%(1<<40), cfg.Users)
	if err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	var phases []drawPhase
	for _, mode := range []string{"warm-up first-come", "first-come", "warm-up draw", "draw"} {
		measured := !strings.HasPrefix(mode, "warm-up")
		var got []drawPhase
		if strings.HasSuffix(mode, "first-come") {
			got, err = s.firstComeRun(ctx, mode, tokens, cfg)
		} else {
			got, err = s.drawRun(ctx, mode, tokens, cfg)
		}
		if err != nil {
			return err
		}
		if measured {
			phases = append(phases, got...)
		}
	}
	idle, err := cfg.Procs.Idle(ctx, 10*time.Second)
	if err != nil {
		return fmt.Errorf("idle: %w", err)
	}
	net := func(p drawPhase, name string) float64 { return p.cpu.NetPerThousand(idle, p.rep.Duration, name) }
	fmt.Fprintf(out, "\nFirst-come against a draw (%d buyers, as many units: every entrant wins; %d clients; one machine, 2 cores)\n", cfg.Users, cfg.Workers)
	fmt.Fprintf(out, "net of each process's idle (%s), CPU-ms per 1,000 of what the phase did:\n", idle)
	fmt.Fprintf(out, "%-28s %10s %10s", "phase", "per s", "took")
	for _, n := range phases[0].cpu.Names {
		if n != Self {
			fmt.Fprintf(out, " %14s", n)
		}
	}
	fmt.Fprintf(out, " %14s\n", "all")
	for _, p := range phases {
		fmt.Fprintf(out, "%-28s %10.0f %10s", p.name, p.rep.PerSecond, p.rep.Duration.Round(10*time.Millisecond))
		for _, n := range p.cpu.Names {
			if n != Self {
				fmt.Fprintf(out, " %14.1f", net(p, n))
			}
		}
		fmt.Fprintf(out, " %14.1f\n", net(p, "total"))
	}
	fc, entries, drawn := phases[0], phases[1], phases[2]
	if t := net(fc, "total"); t > 0 {
		fmt.Fprintf(out, "a buyer's whole way, draw (entry + its order) over first-come: all processes %+.1f %%\n",
			100*((net(entries, "total")+net(drawn, "total"))/t-1))
	}
	return nil
}

// firstComeRun is cfg.Users buyers on a first-come sale of as many units,
// measured until every order is in MySQL.
func (s *Sale) firstComeRun(ctx context.Context, mode string, tokens []string, cfg DrawBenchConfig) ([]drawPhase, error) {
	voucher, err := s.createSale(ctx, len(tokens), "none")
	if err != nil {
		return nil, err
	}
	rep, cpu, err := cfg.Procs.Measure(mode, func() (Report, error) {
		start := time.Now()
		rep, err := s.buyers(ctx, mode, voucher, tokens, false, cfg.Workers)
		if err != nil {
			return rep, err
		}
		err = s.allWritten(ctx, voucher, rep.OK)
		// The rate stays the buyers'; the time, for the idle taken off,
		// is the whole phase's.
		rep.Duration = time.Since(start)
		return rep, err
	})
	if err != nil {
		return nil, err
	}
	if rep.OK != int64(len(tokens)) {
		return nil, fmt.Errorf("%s: %d orders of %d buyers: %v", mode, rep.OK, len(tokens), rep.Outcomes)
	}
	return []drawPhase{{mode + ": buy and write", rep, cpu}}, nil
}

// drawRun is cfg.Users buyers entering a draw sale of as many units, then
// the draw and the orders written, each measured.
func (s *Sale) drawRun(ctx context.Context, mode string, tokens []string, cfg DrawBenchConfig) ([]drawPhase, error) {
	// The window holds the entries at well under this machine's rate.
	window := time.Duration(len(tokens)/1000+5) * time.Second
	begin := time.Now().UTC().Truncate(time.Second)
	voucher, err := s.createDrawSale(ctx, len(tokens), begin, window)
	if err != nil {
		return nil, err
	}
	entries, ecpu, err := cfg.Procs.Measure(mode+" entries", func() (Report, error) {
		return s.buyers(ctx, mode+" entries", voucher, tokens, false, cfg.Workers)
	})
	if err != nil {
		return nil, err
	}
	if entries.Outcomes["entered"] != int64(len(tokens)) {
		return nil, fmt.Errorf("%s: %d of %d entered in a window of %v: %v", mode, entries.Outcomes["entered"], len(tokens), window, entries.Outcomes)
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(time.Until(begin.Add(window))):
	}
	drawn, dcpu, err := cfg.Procs.Measure(mode+" draw", func() (Report, error) {
		rep := Report{Name: mode + " draw", Outcomes: map[string]int64{}}
		start := time.Now()
		if err := s.allWritten(ctx, voucher, int64(len(tokens))); err != nil {
			return rep, err
		}
		rep.Requests, rep.OK = int64(len(tokens)), int64(len(tokens))
		rep.Duration = time.Since(start)
		rep.PerSecond = float64(rep.OK) / rep.Duration.Seconds()
		return rep, nil
	})
	if err != nil {
		return nil, err
	}
	return []drawPhase{{mode + ": enter", entries, ecpu}, {mode + ": draw and write", drawn, dcpu}}, nil
}

// allWritten waits until MySQL holds n orders of voucher.
func (s *Sale) allWritten(ctx context.Context, voucher, n int64) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var orders int64
		if err := s.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM tb_voucher_order WHERE voucher_id = ?", voucher).Scan(&orders); err != nil {
			return fmt.Errorf("orders of voucher %d: %w", voucher, err)
		}
		if orders >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("voucher %d: %d of %d orders in MySQL after 2 minutes", voucher, orders, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// createDrawSale is a sale of stock with a draw over window from begin.
func (s *Sale) createDrawSale(ctx context.Context, stock int, begin time.Time, window time.Duration) (int64, error) {
	return s.postVoucher(ctx, fmt.Sprintf(`{"shopId":1,"title":"draw %d","payValue":100,"actualValue":1000,"stock":%d,"beginTime":%q,"endTime":%q,"admission":{"mode":"draw","windowSeconds":%d}}`,
		stock, stock, begin.Format(time.RFC3339), begin.Add(time.Hour).Format(time.RFC3339), int(window/time.Second)))
}

package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"
)

// MultiNodeConfig is one make bench run on the multi-node topology: a
// Redis Cluster, three Kafka brokers, api instances behind HAProxy,
// several order-writers.
type MultiNodeConfig struct {
	Label    string // e.g. "2 api"
	Users    int
	Workers  uint64
	Vouchers int
	Procs    Procs
	// Runs collects every multi-node run's figures, one JSON object a
	// line; Single is the one-node topology's spread figures (spread
	// -save) of the same bench, for the comparison. Without Runs the run
	// is a warm-up: audited, not recorded, and refusals tolerated (the
	// brokers' JIT, the pools).
	Runs, Single string
}

// MultiNodeFigures are one run's.
type MultiNodeFigures struct {
	Label string
	RPS   float64
	P99   time.Duration
	CPU   CPU
}

// MultiNode sells cfg.Users orders spread over cfg.Vouchers vouchers
// through the load balancer, audits them, and prints every multi-node run
// so far beside the one-node topology's same load.
func (s *Sale) MultiNode(ctx context.Context, out io.Writer, cfg MultiNodeConfig) error {
	tokens, err := s.Sessions(ctx, 300_000_000+rand.Int64N(1<<40), cfg.Users)
	if err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	f := MultiNodeFigures{Label: cfg.Label}
	measured := func(name string, fn func() (Report, error)) (rep Report, err error) {
		rep, f.CPU, err = cfg.Procs.Measure(name, fn)
		return rep, err
	}
	warmup := cfg.Runs == ""
	want := "every request accepted"
	if warmup {
		want = "a warm-up: requests a cold cluster refuses are counted, and the audit allows for them"
	}
	fmt.Fprintf(out, "\n[%s] %d users spread over %d vouchers, %s\n", cfg.Label, cfg.Users, cfg.Vouchers, want)
	rep, _, err := s.spreadRun(ctx, out, SpreadConfig{Label: cfg.Label, Vouchers: cfg.Vouchers, Workers: cfg.Workers, Warmup: warmup}, tokens, measured)
	if err != nil {
		return err
	}
	f.RPS, f.P99 = rep.PerSecond, rep.P99
	if cfg.Runs == "" {
		return nil
	}
	recorded, err := appendRun(cfg.Runs, f)
	if err != nil {
		return err
	}

	raw, err := os.ReadFile(cfg.Single)
	if err != nil {
		return fmt.Errorf("the one-node figures: %w", err)
	}
	var single SpreadFigures
	if err := json.Unmarshal(raw, &single); err != nil || len(single.CPU) < 2 {
		return fmt.Errorf("the one-node figures in %s: %v", cfg.Single, err)
	}
	base := MultiNodeFigures{Label: single.Label, RPS: single.ManyRPS, P99: single.ManyP99, CPU: single.CPU[1]}
	runs := append([]MultiNodeFigures{base}, recorded...)
	fmt.Fprintf(out, "\nOne node against the multi-node topology, the same load (%d orders over %d vouchers; one machine, 2 cores)\n", cfg.Users, cfg.Vouchers)
	fmt.Fprintf(out, "%-34s %10s %10s %22s %10s\n", "topology", "req/s", "p99", "CPU-ms per 1,000 (all)", "vs one node")
	var cpu []CPU
	for _, r := range runs {
		total := r.CPU.PerThousand("total")
		fmt.Fprintf(out, "%-34s %10.0f %10s %22.1f %9.2fx\n", r.Label, r.RPS, r.P99.Round(100*time.Microsecond), total, total/base.CPU.PerThousand("total"))
		cpu = append(cpu, r.CPU)
	}
	fmt.Fprintln(out)
	fmt.Fprint(out, CPUTable(cpu...))
	return nil
}

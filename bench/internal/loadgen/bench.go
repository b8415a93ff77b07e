package loadgen

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"time"
)

// BenchConfig is the make bench run.
type BenchConfig struct {
	Users     int    // requests per HTTP run, one per user
	Workers   uint64 // concurrent clients of the closed-loop runs
	RedisAddr string
	RedisReqs int
	Brokers   []string
	MySQLDSN  string
	WriterBin string
	WriterEnv []string
	Drain     int
	PlotDir   string
}

// SaleRun is one flash sale: the load, then the audit.
func (s *Sale) SaleRun(ctx context.Context, out io.Writer, name string, tokens []string, stock int, opt Options) (Report, Audit, error) {
	voucher, err := s.CreateVoucher(ctx, stock)
	if err != nil {
		return Report{}, Audit{}, err
	}
	lag, err := s.LagBuckets(ctx)
	if err != nil {
		return Report{}, Audit{}, err
	}
	rep, err := Run(name, Requests(s.API, "/voucher-order/seckill/"+strconv.FormatInt(voucher, 10), tokens), opt)
	if err != nil {
		return rep, Audit{}, err
	}
	end := time.Now()
	accepted := rep.OK + rep.Outcomes["503 order reserved, not yet published"]
	a, err := s.AuditSale(ctx, voucher, accepted, int64(min(len(tokens), stock)), end, 60*time.Second, lag)
	fmt.Fprintln(out, rep)
	fmt.Fprintln(out, a)
	return rep, a, err
}

// Bench runs the make bench figures in one go on one machine and prints
// them with their ratios.
func (s *Sale) Bench(ctx context.Context, out io.Writer, cfg BenchConfig) error {
	tokens, err := s.Sessions(ctx, 100_000_000+rand.Int64N(1<<40), cfg.Users)
	if err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	plot := func(name string) string {
		if cfg.PlotDir == "" {
			return ""
		}
		return filepath.Join(cfg.PlotDir, name+".html")
	}
	progress := out
	closed := func(name string) Options {
		return Options{Workers: cfg.Workers, Progress: progress, PlotPath: plot(name)}
	}

	// A broker just started (make test restarts Kafka) runs its first
	// tens of thousands of produce requests interpreted, at about half the
	// speed: measure the steady state, after one unmeasured sale.
	fmt.Fprintf(out, "\nwarm-up: one unmeasured sale of %d users (JIT of the Kafka broker, connection pools)\n", cfg.Users)
	_, warm, err := s.SaleRun(ctx, io.Discard, "warm-up", tokens, cfg.Users, Options{Workers: cfg.Workers})
	if err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if len(warm.Violations) > 0 {
		return fmt.Errorf("warm-up sale audit: %v", warm.Violations)
	}

	fmt.Fprintf(out, "\n(c) POST /bench/noop: a logged-in no-op route, %d users, %d clients\n", cfg.Users, cfg.Workers)
	noop, err := Run("(c) noop", Requests(s.API, "/bench/noop", tokens), closed("c-noop"))
	if err != nil {
		return err
	}
	fmt.Fprintln(out, noop)

	fmt.Fprintf(out, "\n(a) POST /voucher-order/seckill/:id, stock %d: every request accepted\n", cfg.Users)
	accept, auditA, err := s.SaleRun(ctx, out, "(a) accept", tokens, cfg.Users, closed("a-accept"))
	if err != nil {
		return err
	}

	fmt.Fprintf(out, "\n(b) the same route after sell-out (stock 1)\n")
	soldOut, auditB, err := s.SaleRun(ctx, out, "(b) sold out", tokens, 1, closed("b-soldout"))
	if err != nil {
		return err
	}

	rate := int(0.8 * accept.PerSecond)
	fmt.Fprintf(out, "\n(a80) the accept path open-loop at 80%% of (a)'s peak: %d req/s\n", rate)
	at80, audit80, err := s.SaleRun(ctx, out, "(a80) accept at 80%", tokens, cfg.Users,
		Options{Workers: 4 * cfg.Workers, Rate: rate, Progress: progress, PlotPath: plot("a80-accept")})
	if err != nil {
		return err
	}

	fmt.Fprintf(out, "\n(d) redis-benchmark: the gate script by EVALSHA, %d requests, 50 clients\n", cfg.RedisReqs)
	redisRPS, err := s.RedisBench(ctx, cfg.RedisAddr, cfg.RedisReqs, 50)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "(d) redis-benchmark EVALSHA seckill.lua: %.0f req/s\n", redisRPS)

	fmt.Fprintf(out, "\n(e) the order-writer draining a backlog of %d orders into MariaDB\n", cfg.Drain)
	drain, err := Drain(ctx, cfg.MySQLDSN, cfg.Brokers, cfg.WriterBin, cfg.WriterEnv, cfg.Drain)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, drain)

	pct := func(a, b float64) float64 { return 100 * a / b }
	fmt.Fprintf(out, `
== make bench summary (one run, this machine) ==
(a) accept path        %8.0f req/s  p99 %v
(b) sold-out path      %8.0f req/s  p99 %v
(c) no-op route        %8.0f req/s  p99 %v
(d) redis-benchmark    %8.0f req/s
(e) writer drain       %8.0f orders/s from start (%.0f steady)
(a)/(c) = %.0f%%   target >= 40%%
(b)/(c) = %.0f%%   target >= 90%%
(a)/(d) = %.0f%%
(a) at 80%% of peak (%d req/s): p99 %v   target < 20ms
accept -> MySQL lag under (a): p50 %v p99 %v   target p99 < 1s
audits: (a) %d violations, (b) %d, (a80) %d
`,
		accept.PerSecond, accept.P99, soldOut.PerSecond, soldOut.P99, noop.PerSecond, noop.P99, redisRPS,
		drain.PerSec, drain.SteadyPS,
		pct(accept.PerSecond, noop.PerSecond), pct(soldOut.PerSecond, noop.PerSecond), pct(accept.PerSecond, redisRPS),
		rate, at80.P99, auditA.LagP50, auditA.LagP99,
		len(auditA.Violations), len(auditB.Violations), len(audit80.Violations))
	if n := len(auditA.Violations) + len(auditB.Violations) + len(audit80.Violations); n > 0 {
		return fmt.Errorf("%d audit violations", n)
	}
	return nil
}

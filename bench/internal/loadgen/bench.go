package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// BenchConfig is the make bench run.
type BenchConfig struct {
	Users     int    // requests per HTTP run, one per user
	Workers   uint64 // concurrent clients of the closed-loop runs
	RedisReqs int
	Brokers   []string
	MySQLDSN  string
	WriterBin string
	WriterEnv []string
	Drain     int
	PlotDir   string
	// Procs are the system's processes, whose CPU each run measures.
	Procs Procs
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
	path := "/voucher-order/seckill/" + strconv.FormatInt(voucher, 10)
	// Clients that hang up buy beside the others, on a few connections of
	// their own.
	hangUps := int(opt.HangUp * float64(len(tokens)))
	var hung Report
	var hungErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		if hangUps > 0 {
			hung, hungErr = Run(name+", hanging up", Requests(s.API, path, tokens[:hangUps]),
				Options{Workers: max(1, opt.Workers/8), Timeout: opt.HangUpAfter})
		}
	}()
	rep, err := Run(name, Requests(s.API, path, tokens[hangUps:]), opt)
	<-done
	if err = errors.Join(err, hungErr); err != nil {
		return rep, Audit{}, err
	}
	end := time.Now()
	reserved := func(r Report) int64 { return r.OK + r.Outcomes["503 order reserved, not yet published"] }
	answered := int64(0)
	for o, n := range hung.Outcomes {
		if !strings.HasPrefix(o, "transport error") {
			answered += n
		}
	}
	a, err := s.AuditSale(ctx, voucher, Expect{Users: int64(len(tokens)), Stock: int64(stock),
		Accepted: reserved(rep) + reserved(hung), Unanswered: hung.Requests - answered}, end, 60*time.Second, lag)
	fmt.Fprintln(out, rep)
	if hangUps > 0 {
		fmt.Fprintln(out, hung)
	}
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

	// measured runs fn and the CPU every process used meanwhile: for a
	// sale, until MySQL had every order (SaleRun waits for it).
	measured := cfg.Procs.Measure

	fmt.Fprintf(out, "\n(c) POST /bench/noop: a logged-in no-op route, %d users, %d clients\n", cfg.Users, cfg.Workers)
	noop, cpuC, err := measured("(c) noop", func() (Report, error) {
		return Run("(c) noop", Requests(s.API, "/bench/noop", tokens), closed("c-noop"))
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, noop)

	fmt.Fprintf(out, "\n(a) POST /voucher-order/seckill/:id, stock %d: every request accepted\n", cfg.Users)
	var auditA Audit
	accept, cpuA, err := measured("(a) accept", func() (rep Report, err error) {
		rep, auditA, err = s.SaleRun(ctx, out, "(a) accept", tokens, cfg.Users, closed("a-accept"))
		return rep, err
	})
	if err != nil {
		return err
	}

	fmt.Fprintf(out, "\n(b) the same route after sell-out (stock 1)\n")
	var auditB Audit
	soldOut, cpuB, err := measured("(b) sold out", func() (rep Report, err error) {
		rep, auditB, err = s.SaleRun(ctx, out, "(b) sold out", tokens, 1, closed("b-soldout"))
		return rep, err
	})
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

	fmt.Fprintf(out, "\n(ah) the accept path with one client in ten hanging up after 2 ms (most before their answer)\n")
	_, auditH, err := s.SaleRun(ctx, out, "(ah) accept, hang-ups", tokens, cfg.Users,
		Options{Workers: cfg.Workers, Progress: progress, PlotPath: plot("ah-accept-hangups"), HangUp: 0.1, HangUpAfter: 2 * time.Millisecond})
	if err != nil {
		return err
	}

	// What the system costs with no sale on: the floor every per-order
	// figure above carries for the seconds its run lasts. Measured after
	// the sales, not before (c): the api keeps a session 10 s, and (c)
	// relies on the warm-up's.
	const idleFor = 20 * time.Second
	fmt.Fprintf(out, "\n(i) idle: %v with the daemons up and no load\n", idleFor)
	idle, err := cfg.Procs.Idle(ctx, idleFor)
	if err != nil {
		return fmt.Errorf("idle: %w", err)
	}

	fmt.Fprintf(out, "\n(d) redis-benchmark: the gate script by EVALSHA on the voucher's master, one attempt per call (the api batches them), %d requests, 50 clients\n", cfg.RedisReqs)
	ceiling, err := s.RedisBench(ctx, 1, cfg.RedisReqs, 50)
	if err != nil {
		return err
	}
	redisRPS := ceiling.PerSecond
	fmt.Fprintf(out, "(d) redis-benchmark EVALSHA seckill.lua: %.0f req/s\n", redisRPS)

	fmt.Fprintf(out, "\n(e) the order-writer draining a backlog of %d orders into MariaDB\n", cfg.Drain)
	drain, err := Drain(ctx, s.Redis, cfg.MySQLDSN, cfg.Brokers, cfg.WriterBin, cfg.WriterEnv, cfg.Drain)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, drain)

	pct := func(a, b float64) float64 { return 100 * a / b }
	downstream := cpuA.PerThousand("kafka") + cpuA.PerThousand("order-writer") + cpuA.PerThousand("mariadb")
	fmt.Fprintf(out, `
== CPU per process (from /proc/<pid>/stat; a sale's run lasts until MySQL has every order) ==
%s(a) accept: total %.0f CPU-ms per 1,000 orders (target <= 150), api %.0f, downstream kafka + order-writer + mariadb %.0f
(i) idle, no load: %s
`, CPUTable(cpuC, cpuA, cpuB), cpuA.PerThousand("total"), cpuA.PerThousand("api"), downstream, idle)
	fmt.Fprintf(out, `
== make bench summary (one run, this machine) ==
(a) accept path        %8.0f req/s  p99 %v
(b) sold-out path      %8.0f req/s  p99 %v
(c) no-op route        %8.0f req/s  p99 %v
(d) redis-benchmark    %8.0f req/s  (one attempt per call)
(e) writer drain       %8.0f orders/s from start (%.0f steady)
(a)/(c) = %.0f%%   target >= 50%%
(b)/(c) = %.0f%%   target >= 95%%
(a)/(d) = %.0f%%
(a) at 80%% of peak (%d req/s): p99 %v   target < 20ms
accept -> MySQL lag under (a): p50 %v p99 %v   target p99 < 500ms
accept -> MySQL lag under (ah), clients hanging up: p50 %v p99 %v   target p99 < 500ms (%d unanswered, %d of them taken)
audits: (a) %d violations, (b) %d, (a80) %d, (ah) %d
`,
		accept.PerSecond, accept.P99, soldOut.PerSecond, soldOut.P99, noop.PerSecond, noop.P99, redisRPS,
		drain.PerSec, drain.SteadyPS,
		pct(accept.PerSecond, noop.PerSecond), pct(soldOut.PerSecond, noop.PerSecond), pct(accept.PerSecond, redisRPS),
		rate, at80.P99, auditA.LagP50, auditA.LagP99,
		auditH.LagP50, auditH.LagP99, auditH.Unanswered, auditH.Orders-auditH.Accepted,
		len(auditA.Violations), len(auditB.Violations), len(audit80.Violations), len(auditH.Violations))
	if n := len(auditA.Violations) + len(auditB.Violations) + len(audit80.Violations) + len(auditH.Violations); n > 0 {
		return fmt.Errorf("%d audit violations", n)
	}
	return nil
}

package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/redisconn"
)

// SpreadConfig is the make bench comparison of Redis topologies: the
// accept path on one hot voucher, then the same load spread over many
// vouchers (on a cluster, over every master), and the gate's ceiling on
// one master.
type SpreadConfig struct {
	Label     string // "one node" or "cluster"
	Users     int
	Workers   uint64
	Vouchers  int
	RedisReqs int
	Procs     Procs
	// Save writes this run's figures there; Beside reads an earlier run's
	// (the other topology) to print both side by side.
	Save, Beside string
	// Warmup tolerates requests answered 503: a warm-up runs on brokers
	// that may have just restarted, whose first minute (the JIT
	// compiling on two shared cores) can be slow enough for publishes to
	// time out. Its audit still checks every invariant that does not
	// need to know which voucher a refusal fell on.
	Warmup bool
}

// SpreadFigures are one topology's figures.
type SpreadFigures struct {
	Label          string
	Masters        int
	HotRPS         float64
	HotP99         time.Duration
	ManyRPS        float64
	ManyP99        time.Duration
	ManyMasters    int // masters the many vouchers sat on
	GateCeilingRPS float64
	CPU            []CPU
}

// Spread runs the comparison and prints it.
func (s *Sale) Spread(ctx context.Context, out io.Writer, cfg SpreadConfig) error {
	tokens, err := s.Sessions(ctx, 200_000_000+rand.Int64N(1<<40), cfg.Users)
	if err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	ids, err := redisconn.ReplicationIDs(ctx, s.Redis)
	if err != nil {
		return err
	}
	f := SpreadFigures{Label: cfg.Label, Masters: len(ids)}
	measured := func(name string, fn func() (Report, error)) (Report, error) {
		rep, cpu, err := cfg.Procs.Measure(name, fn)
		if err == nil {
			f.CPU = append(f.CPU, cpu)
		}
		return rep, err
	}
	opt := Options{Workers: cfg.Workers}

	fmt.Fprintf(out, "\n[%s] one hot voucher: %d users, every request accepted\n", cfg.Label, cfg.Users)
	var audit Audit
	hot, err := measured(cfg.Label+" hot", func() (rep Report, err error) {
		rep, audit, err = s.SaleRun(ctx, out, cfg.Label+" hot", tokens, cfg.Users, opt)
		return rep, err
	})
	if err != nil {
		return err
	}
	if len(audit.Violations) > 0 {
		return fmt.Errorf("hot voucher audit: %v", audit.Violations)
	}
	f.HotRPS, f.HotP99 = hot.PerSecond, hot.P99

	fmt.Fprintf(out, "\n[%s] the same users spread over %d vouchers\n", cfg.Label, cfg.Vouchers)
	many, masters, err := s.spreadRun(ctx, out, cfg, tokens, measured)
	if err != nil {
		return err
	}
	f.ManyRPS, f.ManyP99, f.ManyMasters = many.PerSecond, many.P99, masters

	fmt.Fprintf(out, "\n[%s] redis-benchmark: the gate script by EVALSHA on the master of one voucher, %d requests, 50 clients\n", cfg.Label, cfg.RedisReqs)
	ceiling, err := s.RedisBench(ctx, 1, cfg.RedisReqs, 50)
	if err != nil {
		return err
	}
	f.GateCeilingRPS = ceiling.PerSecond

	runs := []SpreadFigures{f}
	if cfg.Beside != "" {
		var other SpreadFigures
		raw, err := os.ReadFile(cfg.Beside)
		if err != nil {
			return fmt.Errorf("the other topology's figures: %w", err)
		}
		if err := json.Unmarshal(raw, &other); err != nil {
			return fmt.Errorf("the other topology's figures: %w", err)
		}
		runs = append([]SpreadFigures{other}, runs...)
	}
	fmt.Fprintln(out, "\nRedis topologies, the same load (one machine, 2 cores: every Redis process shares them with the rest)")
	fmt.Fprintf(out, "%-36s", "")
	for _, r := range runs {
		fmt.Fprintf(out, " %16s", r.Label)
	}
	fmt.Fprintln(out)
	row := func(name string, v func(SpreadFigures) string) {
		fmt.Fprintf(out, "%-36s", name)
		for _, r := range runs {
			fmt.Fprintf(out, " %16s", v(r))
		}
		fmt.Fprintln(out)
	}
	row("masters", func(r SpreadFigures) string { return strconv.Itoa(r.Masters) })
	row("1 hot voucher: req/s", func(r SpreadFigures) string { return fmt.Sprintf("%.0f", r.HotRPS) })
	row("1 hot voucher: p99", func(r SpreadFigures) string { return r.HotP99.Round(100 * time.Microsecond).String() })
	row(fmt.Sprintf("%d vouchers: req/s", cfg.Vouchers), func(r SpreadFigures) string { return fmt.Sprintf("%.0f", r.ManyRPS) })
	row(fmt.Sprintf("%d vouchers: p99", cfg.Vouchers), func(r SpreadFigures) string { return r.ManyP99.Round(100 * time.Microsecond).String() })
	row("  on masters", func(r SpreadFigures) string { return strconv.Itoa(r.ManyMasters) })
	row("gate ceiling, one master (EVALSHA/s)", func(r SpreadFigures) string { return fmt.Sprintf("%.0f", r.GateCeilingRPS) })
	var cpu []CPU
	for _, r := range runs {
		cpu = append(cpu, r.CPU...)
	}
	fmt.Fprintln(out)
	fmt.Fprint(out, CPUTable(cpu...))
	if cfg.Save != "" {
		raw, _ := json.Marshal(f)
		if err := os.WriteFile(cfg.Save, raw, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// spreadRun sells the users over cfg.Vouchers vouchers, each with the stock
// of its buyers, and audits each; it returns the report and how many
// masters the vouchers sat on.
func (s *Sale) spreadRun(ctx context.Context, out io.Writer, cfg SpreadConfig, tokens []string,
	measured func(string, func() (Report, error)) (Report, error)) (Report, int, error) {
	vouchers := make([]int64, cfg.Vouchers)
	buyers := make([]int64, cfg.Vouchers)
	masters := map[string]bool{}
	for i := range tokens {
		buyers[i%cfg.Vouchers]++
	}
	for i := range vouchers {
		v, err := s.CreateVoucher(ctx, int(buyers[i]))
		if err != nil {
			return Report{}, 0, err
		}
		vouchers[i] = v
		m, err := redisconn.MasterFor(ctx, s.Redis, s.Store.KeysOf(v).Voucher)
		if err != nil {
			return Report{}, 0, err
		}
		masters[m] = true
	}
	lag, err := s.LagBuckets(ctx)
	if err != nil {
		return Report{}, 0, err
	}
	reqs := make([]Request, len(tokens))
	for i, tok := range tokens {
		reqs[i] = Requests(s.API, "/voucher-order/seckill/"+strconv.FormatInt(vouchers[i%cfg.Vouchers], 10), []string{tok})[0]
	}
	name := fmt.Sprintf("%s %d vouchers", cfg.Label, cfg.Vouchers)
	rep, err := measured(name, func() (Report, error) { return Run(name, reqs, Options{Workers: cfg.Workers}) })
	if err != nil {
		return rep, 0, err
	}
	end := time.Now()
	fmt.Fprintln(out, rep)
	refused := int64(len(tokens)) - rep.OK
	if refused > 0 && (!cfg.Warmup || !coldRefusals(rep.Outcomes, refused, int64(len(tokens)))) {
		return rep, 0, fmt.Errorf("%s: %d of %d requests accepted: %v", name, rep.OK, len(tokens), rep.Outcomes)
	}
	for i, v := range vouchers {
		a, err := s.AuditSale(ctx, v, spreadExpect(buyers[i], refused), end, 60*time.Second, lag)
		if err != nil {
			return rep, 0, err
		}
		if len(a.Violations) > 0 {
			return rep, 0, fmt.Errorf("voucher %d audit: %v", v, a.Violations)
		}
	}
	fmt.Fprintf(out, "audit: the %d vouchers OK (on %d masters)\n", cfg.Vouchers, len(masters))
	return rep, len(masters), nil
}

// coldRefusals reports whether the refused of a warm-up's requests look
// like a cold cluster's: every answer but "ok" a 503, what the api answers
// when a publish does not complete in time, and no more than a tenth of
// them (a cold cluster refused 1.3 %). Anything else (a 500, a transport
// error, a sold-out, a run mostly refused) is a defect even in a warm-up.
func coldRefusals(outcomes map[string]int64, refused, requests int64) bool {
	if refused*10 > requests {
		return false
	}
	for o := range outcomes {
		if o != "ok" && !strings.HasPrefix(o, "503 ") {
			return false
		}
	}
	return true
}

// spreadExpect is what the audit of a voucher with buyers buyers, each
// with a unit, expects when refused requests of the run were not accepted.
// Which vouchers they fell on is not kept, and an answer such as "reserved,
// the queue is slow" still becomes an order: so up to refused of this
// voucher's buyers may or may not have an order, as for clients that hung
// up.
func spreadExpect(buyers, refused int64) Expect {
	unknown := min(refused, buyers)
	return Expect{Users: buyers, Stock: buyers, Accepted: buyers - unknown, Unanswered: unknown}
}

package loadgen

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"

	"github.com/seckill/seckill/internal/jwtauth"
	"github.com/seckill/seckill/internal/user"
)

// SessionBenchConfig is one run of the accept path in one configuration
// of the API: a session mode, or a tracing sampler.
type SessionBenchConfig struct {
	// Varied is what the runs compare, in the table's title and first
	// column ("session mode" when empty).
	Varied string
	// Topology is where the rest runs, in the table's title ("one node"
	// when empty).
	Topology string
	Label    string // e.g. "jwt HS256"
	Users    int
	Workers  uint64
	Procs    Procs
	// Keys sign the users' access tokens, as the API's login would; nil:
	// redis sessions.
	Keys *jwtauth.Keyring
	// Runs collects every mode's figures, one JSON object a line; the
	// table printed after each run compares them all.
	Runs string
	// Sink, when set, is the OTLP sink the API exports its spans to
	// (OTLPSink): the spans exported during the run are counted.
	Sink string
}

// SessionFigures are one mode's.
type SessionFigures struct {
	Label string
	RPS   float64
	P99   time.Duration
	CPU   CPU
	Spans int64 // exported to the sink during the run
}

// jwtTokens are access tokens for n users, each in a family of its own,
// signed as the API signs them.
func jwtTokens(keys *jwtauth.Keyring, firstUserID int64, n int) ([]string, error) {
	tokens := jwtauth.NewTokens(keys, 15*time.Minute)
	out := make([]string, n)
	now := time.Now()
	for i := range out {
		tok, err := tokens.Issue(user.User{ID: firstUserID + int64(i), NickName: "load"}, crand.Text(), now)
		if err != nil {
			return nil, err
		}
		out[i] = tok
	}
	return out, nil
}

// SessionBench sells cfg.Users orders (every request accepted) with
// sessions of the mode the API runs, after an unmeasured warm-up sale, and
// prints every mode's run so far side by side.
func (s *Sale) SessionBench(ctx context.Context, out io.Writer, cfg SessionBenchConfig) error {
	first := 500_000_000 + rand.Int64N(1<<40)
	var tokens []string
	var err error
	if cfg.Keys != nil {
		tokens, err = jwtTokens(cfg.Keys, first, cfg.Users)
	} else {
		tokens, err = s.Sessions(ctx, first, cfg.Users)
	}
	if err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	warm := min(len(tokens), 3000)
	if _, a, err := s.SaleRun(ctx, io.Discard, "warm-up", tokens[:warm], warm, Options{Workers: cfg.Workers}); err != nil || len(a.Violations) > 0 {
		return fmt.Errorf("warm-up: %v %v", err, a.Violations)
	}
	fmt.Fprintf(out, "\n[%s] POST /voucher-order/seckill/:id, stock %d: every request accepted\n", cfg.Label, cfg.Users)
	spans := func() (int64, error) { return 0, nil }
	if cfg.Sink != "" {
		spans = func() (int64, error) { return SinkSpans(ctx, cfg.Sink) }
	}
	before, err := spans()
	if err != nil {
		return err
	}
	var audit Audit
	rep, cpu, err := cfg.Procs.Measure(cfg.Label, func() (rep Report, err error) {
		rep, audit, err = s.SaleRun(ctx, out, cfg.Label, tokens, cfg.Users, Options{Workers: cfg.Workers})
		return rep, err
	})
	if err != nil {
		return err
	}
	if len(audit.Violations) > 0 {
		return fmt.Errorf("audit: %v", audit.Violations)
	}
	// The API's batch exporter sends every 5 s (OTEL_BSP_SCHEDULE_DELAY):
	// the run's last spans arrive once the count has stood still longer.
	after, err := spans()
	if err != nil {
		return err
	}
	for still := time.Now(); cfg.Sink != "" && time.Since(still) < 6*time.Second; {
		time.Sleep(time.Second)
		n, err := spans()
		if err != nil {
			return err
		}
		if n != after {
			after, still = n, time.Now()
		}
	}
	f := SessionFigures{Label: cfg.Label, RPS: rep.PerSecond, P99: rep.P99, CPU: cpu, Spans: after - before}
	runs, err := appendRun(cfg.Runs, f)
	if err != nil {
		return err
	}
	varied := cmp.Or(cfg.Varied, "session mode")
	fmt.Fprintf(out, "\nThe accept path by %s (%s, %d orders each, %d clients; one machine, 2 cores)\n", varied, cmp.Or(cfg.Topology, "one node"), cfg.Users, cfg.Workers)
	fmt.Fprintf(out, "%-22s %10s %10s %14s %14s %12s\n", varied, "req/s", "p99", "api CPU-ms/1k", "all CPU-ms/1k", "spans/order")
	var cpus []CPU
	for _, r := range runs {
		fmt.Fprintf(out, "%-22s %10.0f %10s %14.1f %14.1f %12.2f\n", r.Label, r.RPS, r.P99.Round(100*time.Microsecond),
			r.CPU.PerThousand("api"), r.CPU.PerThousand("total"), float64(r.Spans)/float64(cfg.Users))
		cpus = append(cpus, r.CPU)
	}
	if base := runs[0].CPU.PerThousand("api"); len(runs) > 1 && base > 0 {
		for _, r := range runs[1:] {
			fmt.Fprintf(out, "api CPU per order, %s / %s: %.2f\n", r.Label, runs[0].Label, r.CPU.PerThousand("api")/base)
		}
	}
	fmt.Fprintln(out)
	fmt.Fprint(out, CPUTable(cpus...))
	return nil
}

// appendRun adds f to the runs file (one JSON object a line) and returns
// every run in it.
func appendRun[F any](path string, f F) ([]F, error) {
	line, _ := json.Marshal(f)
	file, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	if _, err := file.Write(append(line, '\n')); err != nil {
		file.Close()
		return nil, err
	}
	if err := file.Close(); err != nil {
		return nil, err
	}
	all, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var runs []F
	sc := bufio.NewScanner(bytes.NewReader(all))
	for sc.Scan() {
		var r F
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		runs = append(runs, r)
	}
	return runs, nil
}

package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// BotCheckBenchConfig is the accept path with each bot check, in one run.
type BotCheckBenchConfig struct {
	Users   int
	Workers int
	Procs   Procs
}

// BotCheckBench sells cfg.Users units to as many buyers on a sale of each
// bot check that needs no person (none, then path), through the same
// client loop: on none a buyer POSTs the order at the fixed route; on path
// it first GETs its order path, then POSTs at it. The CPU per 1,000 orders
// of each process, and the path's over none's, are what the defence costs.
func (s *Sale) BotCheckBench(ctx context.Context, out io.Writer, cfg BotCheckBenchConfig) error {
	tokens, err := s.Sessions(ctx, 700_000_000+time.Now().UnixNano()%(1<<40), cfg.Users)
	if err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	type run struct {
		mode  string
		rep   Report
		cpu   CPU
		audit Audit
	}
	var runs []run
	// Each measured run right after an unmeasured one of its own mode:
	// the api's connections, code paths and session cache (10 s) in the
	// same state for both.
	for _, mode := range []string{"warm-up none", "none", "warm-up path", "path"} {
		check := strings.TrimPrefix(mode, "warm-up ")
		voucher, err := s.createSale(ctx, cfg.Users, check)
		if err != nil {
			return err
		}
		lag, err := s.LagBuckets(ctx)
		if err != nil {
			return err
		}
		rep, cpu, err := cfg.Procs.Measure(mode, func() (Report, error) {
			return s.buyers(ctx, mode, voucher, tokens, check == "path", cfg.Workers)
		})
		if err != nil {
			return err
		}
		a, err := s.AuditSale(ctx, voucher, Expect{Users: int64(len(tokens)), Stock: int64(cfg.Users), Accepted: rep.OK}, time.Now(), 60*time.Second, lag)
		if err != nil {
			return err
		}
		if len(a.Violations) > 0 {
			return fmt.Errorf("%s: audit: %v", mode, a.Violations)
		}
		if !strings.HasPrefix(mode, "warm-up") {
			fmt.Fprintln(out, rep)
			fmt.Fprintln(out, a)
			runs = append(runs, run{mode, rep, cpu, a})
		}
	}
	// The floor every process burns with no load (Kafka's most of all):
	// a run that lasts longer carries more of it without costing the
	// orders anything more.
	const idleFor = 10 * time.Second
	idle, err := cfg.Procs.Idle(ctx, idleFor)
	if err != nil {
		return fmt.Errorf("idle: %w", err)
	}
	net := func(r run, name string) float64 { return r.cpu.NetPerThousand(idle, r.rep.Duration, name) }
	fmt.Fprintf(out, "\nThe accept path by bot check (%d buyers each, %d clients; one machine, 2 cores; path: GET the path, then POST the order at it)\n",
		cfg.Users, cfg.Workers)
	fmt.Fprintf(out, "%-10s %12s %10s", "botCheck", "orders/s", "p99")
	for _, n := range runs[0].cpu.Names {
		if n != Self {
			fmt.Fprintf(out, " %14s", n+" ms/1k")
		}
	}
	fmt.Fprintf(out, " %14s\n", "all ms/1k")
	for _, r := range runs {
		fmt.Fprintf(out, "%-10s %12.0f %10s", r.mode, r.rep.PerSecond, r.rep.P99.Round(100*time.Microsecond))
		for _, n := range r.cpu.Names {
			if n != Self {
				fmt.Fprintf(out, " %14.1f", r.cpu.PerThousand(n))
			}
		}
		fmt.Fprintf(out, " %14.1f\n", r.cpu.PerThousand("total"))
	}
	fmt.Fprintf(out, "net of each process's idle (%s), CPU-ms per 1,000 orders:\n", idle)
	for _, r := range runs {
		fmt.Fprintf(out, "%-10s %23s", r.mode, "")
		for _, n := range r.cpu.Names {
			if n != Self {
				fmt.Fprintf(out, " %14.1f", net(r, n))
			}
		}
		fmt.Fprintf(out, " %14.1f\n", net(r, "total"))
	}
	none, path := runs[0], runs[1]
	if net(none, "api") > 0 && net(none, "total") > 0 {
		fmt.Fprintf(out, "the defence's cost, path over none: api %+.1f %%, all processes %+.1f %% (net of idle; gross %+.1f %%)\n",
			100*(net(path, "api")/net(none, "api")-1), 100*(net(path, "total")/net(none, "total")-1),
			100*(path.cpu.PerThousand("total")/none.cpu.PerThousand("total")-1))
	}
	return nil
}

// createSale is CreateVoucher with a bot check.
func (s *Sale) createSale(ctx context.Context, stock int, check string) (int64, error) {
	was := s.BotCheck
	s.BotCheck = check
	defer func() { s.BotCheck = was }()
	return s.CreateVoucher(ctx, stock)
}

// buyers has every token buy voucher once, workers at a time: with path,
// a GET of the buyer's order path first, the order at it then; the
// latency is the buyer's whole flow.
func (s *Sale) buyers(ctx context.Context, name string, voucher int64, tokens []string, path bool, workers int) (Report, error) {
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers, MaxConnsPerHost: workers}}
	defer client.CloseIdleConnections()
	fixed := s.API + "/voucher-order/seckill/" + strconv.FormatInt(voucher, 10)
	hist := hdrhistogram.New(1, int64(60*time.Second/time.Microsecond), 3)
	rep := Report{Name: name, Outcomes: map[string]int64{}}
	var mu sync.Mutex
	var next atomic.Int64
	var failed error
	var failOnce sync.Once
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(tokens)); i = next.Add(1) - 1 {
				began := time.Now()
				o, err := s.buy(ctx, client, fixed, tokens[i], path)
				took := time.Since(began)
				if err != nil {
					failOnce.Do(func() { failed = err })
					return
				}
				mu.Lock()
				rep.Requests++
				rep.Outcomes[o]++
				if o == "ok" {
					rep.OK++
				}
				_ = hist.RecordValue(int64(took / time.Microsecond))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed != nil {
		return rep, failed
	}
	rep.Duration = time.Since(start)
	rep.PerSecond = float64(rep.Requests) / rep.Duration.Seconds()
	q := func(p float64) time.Duration {
		return (time.Duration(hist.ValueAtQuantile(p)) * time.Microsecond).Round(10 * time.Microsecond)
	}
	rep.P50, rep.P90, rep.P99, rep.P999, rep.Max = q(50), q(90), q(99), q(99.9), time.Duration(hist.Max())*time.Microsecond
	return rep, nil
}

// envelope is the course's Result, as far as a buyer reads it.
type envelope struct {
	Success  bool            `json:"success"`
	ErrorMsg string          `json:"errorMsg"`
	Data     json.RawMessage `json:"data"`
}

func (s *Sale) call(ctx context.Context, client *http.Client, method, url, token string) (int, envelope, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, envelope{}, err
	}
	req.Header.Set("Authorization", token)
	res, err := client.Do(req)
	if err != nil {
		return 0, envelope{}, err
	}
	defer res.Body.Close()
	var e envelope
	if err := json.NewDecoder(res.Body).Decode(&e); err != nil {
		return res.StatusCode, e, fmt.Errorf("%s %s: %d, not the envelope: %w", method, url, res.StatusCode, err)
	}
	return res.StatusCode, e, nil
}

// buy is one buyer's flow, and its outcome as Run names them.
func (s *Sale) buy(ctx context.Context, client *http.Client, fixed, token string, path bool) (string, error) {
	url := fixed
	if path {
		code, e, err := s.call(ctx, client, http.MethodGet, fixed+"/path", token)
		if err != nil {
			return "", err
		}
		var p struct {
			URL string `json:"url"`
		}
		if code != http.StatusOK || !e.Success || json.Unmarshal(e.Data, &p) != nil || p.URL == "" {
			return fmt.Sprintf("path: %d %s", code, e.ErrorMsg), nil
		}
		url = s.API + p.URL
	}
	code, e, err := s.call(ctx, client, http.MethodPost, url, token)
	if err != nil {
		return "", err
	}
	if code == http.StatusOK && e.Success {
		return "ok", nil
	}
	if code == http.StatusAccepted && e.Success {
		return "entered", nil
	}
	if code == 0 {
		return "", errors.New("no answer")
	}
	return fmt.Sprintf("%d %s", code, e.ErrorMsg), nil
}

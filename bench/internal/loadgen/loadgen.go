// Package loadgen drives the API with vegeta and reports what it measured:
// throughput, HDR latency percentiles and the count of every outcome.
package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	vegeta "github.com/tsenart/vegeta/v12/lib"
	"github.com/tsenart/vegeta/v12/lib/plot"
)

// Report is one measured run.
type Report struct {
	Name      string
	Requests  int64
	Duration  time.Duration
	OK        int64 // HTTP 200 with success true
	Outcomes  map[string]int64
	P50, P90  time.Duration
	P99, P999 time.Duration
	Max       time.Duration
	PerSecond float64 // answers (any outcome) per second
}

func (r Report) String() string {
	outcomes := make([]string, 0, len(r.Outcomes))
	for o, n := range r.Outcomes {
		outcomes = append(outcomes, fmt.Sprintf("%d × %s", n, o))
	}
	sort.Strings(outcomes)
	return fmt.Sprintf("%-32s %7d requests in %6.2fs = %8.0f req/s  latency p50 %v p90 %v p99 %v p99.9 %v max %v\n%-32s outcomes: %s",
		r.Name, r.Requests, r.Duration.Seconds(), r.PerSecond, r.P50, r.P90, r.P99, r.P999, r.Max,
		"", strings.Join(outcomes, ", "))
}

// Request is one HTTP request of a run.
type Request struct {
	Method string
	URL    string
	Header http.Header
	Body   []byte
}

// Options shape a run.
type Options struct {
	Workers uint64 // concurrent clients (closed loop), or the most open-loop may use
	Rate    int    // requests per second, open loop; 0 is closed loop, as fast as Workers allow
	// Progress, when set, gets a line a second.
	Progress io.Writer
	// PlotPath, when set, gets vegeta's HTML latency plot.
	PlotPath string
	// Timeout is how long a client waits for its answer before it hangs
	// up (15 s when zero).
	Timeout time.Duration
	// HangUp is the share of a sale's requests (SaleRun) sent by clients
	// that hang up after HangUpAfter, beside the others.
	HangUp      float64
	HangUpAfter time.Duration
}

// Run sends every request once and measures the answers.
func Run(name string, requests []Request, opt Options) (Report, error) {
	var next atomic.Int64
	targeter := func(t *vegeta.Target) error {
		i := next.Add(1) - 1
		if i >= int64(len(requests)) {
			return vegeta.ErrNoTargets
		}
		r := requests[i]
		t.Method, t.URL, t.Header, t.Body = r.Method, r.URL, r.Header, r.Body
		return nil
	}
	workers := opt.Workers
	timeout := opt.Timeout
	if timeout == 0 {
		timeout = 15 * time.Second
	}
	attacker := vegeta.NewAttacker(vegeta.Workers(workers), vegeta.MaxWorkers(workers),
		vegeta.Connections(int(workers)), vegeta.MaxConnections(int(workers)),
		vegeta.Timeout(timeout), vegeta.KeepAlive(true))
	pacer := vegeta.Pacer(vegeta.ConstantPacer{})
	if opt.Rate > 0 {
		pacer = vegeta.ConstantPacer{Freq: opt.Rate, Per: time.Second}
	}
	hist := hdrhistogram.New(1, int64(60*time.Second/time.Microsecond), 3)
	rep := Report{Name: name, Outcomes: map[string]int64{}}
	var p *plot.Plot
	if opt.PlotPath != "" {
		p = plot.New(plot.Title(name), plot.Downsample(4000), plot.Label(plot.ErrorLabeler))
	}
	var first, last time.Time
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	results := attacker.Attack(targeter, pacer, 0, name)
	for done := false; !done; {
		select {
		case res, ok := <-results:
			if !ok {
				done = true
				break
			}
			if res.Error == vegeta.ErrNoTargets.Error() {
				continue
			}
			if first.IsZero() || res.Timestamp.Before(first) {
				first = res.Timestamp
			}
			if end := res.End(); end.After(last) {
				last = end
			}
			rep.Requests++
			_ = hist.RecordValue(int64(res.Latency / time.Microsecond))
			o := outcome(res)
			rep.Outcomes[o]++
			if o == "ok" {
				rep.OK++
			}
			if p != nil {
				_ = p.Add(res)
			}
		case <-tick.C:
			if opt.Progress != nil {
				fmt.Fprintf(opt.Progress, "  %s: %d/%d answered, %d ok, p99 so far %v\n", name, rep.Requests, len(requests), rep.OK,
					time.Duration(hist.ValueAtQuantile(99))*time.Microsecond)
			}
		}
	}
	rep.Duration = last.Sub(first)
	if rep.Duration > 0 {
		rep.PerSecond = float64(rep.Requests) / rep.Duration.Seconds()
	}
	q := func(p float64) time.Duration {
		return (time.Duration(hist.ValueAtQuantile(p)) * time.Microsecond).Round(10 * time.Microsecond)
	}
	rep.P50, rep.P90, rep.P99, rep.P999, rep.Max = q(50), q(90), q(99), q(99.9), (time.Duration(hist.Max()) * time.Microsecond)
	if p != nil {
		p.Close()
		f, err := os.Create(opt.PlotPath)
		if err != nil {
			return rep, fmt.Errorf("latency plot: %w", err)
		}
		defer f.Close()
		if _, err := p.WriteTo(f); err != nil {
			return rep, fmt.Errorf("latency plot: %w", err)
		}
	}
	return rep, nil
}

// outcome names an answer: "ok" for success, else its status and message.
func outcome(res *vegeta.Result) string {
	if res.Code == 0 {
		return "transport error: " + res.Error
	}
	var body struct {
		Success  bool   `json:"success"`
		ErrorMsg string `json:"errorMsg"`
	}
	_ = json.Unmarshal(res.Body, &body)
	if res.Code == http.StatusOK && body.Success {
		return "ok"
	}
	msg := body.ErrorMsg
	// Messages that carry an order id would make one outcome per order.
	if strings.HasPrefix(msg, "order ") {
		msg = "order reserved, not yet published"
	}
	return fmt.Sprintf("%d %s", res.Code, msg)
}

// Fprint writes reports.
func Fprint(w io.Writer, reports ...Report) {
	for _, r := range reports {
		fmt.Fprintln(w, r)
	}
}

// Package loadgen drives the API with vegeta and reports what it measured.
package loadgen

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Report is one measured run.
type Report struct {
	Name      string
	Requests  uint64
	Duration  time.Duration
	OK        uint64 // HTTP 200 with success true
	Failed    uint64 // anything else
	Statuses  map[string]int
	P50, P95  time.Duration
	P99, Max  time.Duration
	PerSecond float64 // OK answers per second
}

func (r Report) String() string {
	return fmt.Sprintf("%-28s %7d requests in %6.2fs  %8.0f ok/s  ok %d failed %d  latency p50 %v p95 %v p99 %v max %v  statuses %v",
		r.Name, r.Requests, r.Duration.Seconds(), r.PerSecond, r.OK, r.Failed,
		r.P50.Round(10*time.Microsecond), r.P95.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond),
		r.Max.Round(10*time.Microsecond), r.Statuses)
}

// Request is one HTTP request of a run.
type Request struct {
	Method string
	URL    string
	Header http.Header
	Body   []byte
}

// Run sends every request once, as fast as workers concurrent clients
// allow, and measures the answers.
func Run(name string, requests []Request, workers uint64) Report {
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
	attacker := vegeta.NewAttacker(vegeta.Workers(workers), vegeta.MaxWorkers(workers),
		vegeta.Connections(int(workers)), vegeta.Timeout(10*time.Second), vegeta.KeepAlive(true))
	var metrics vegeta.Metrics
	rep := Report{Name: name}
	for res := range attacker.Attack(targeter, vegeta.ConstantPacer{}, 0, name) {
		if res.Error == vegeta.ErrNoTargets.Error() {
			continue
		}
		metrics.Add(res)
		if res.Code == http.StatusOK && bytes.Contains(res.Body, []byte(`"success":true`)) {
			rep.OK++
		} else {
			rep.Failed++
		}
	}
	metrics.Close()
	rep.Requests, rep.Duration, rep.Statuses = metrics.Requests, metrics.Duration+metrics.Wait, metrics.StatusCodes
	rep.P50, rep.P95, rep.P99, rep.Max = metrics.Latencies.P50, metrics.Latencies.P95, metrics.Latencies.P99, metrics.Latencies.Max
	if rep.Duration > 0 {
		rep.PerSecond = float64(rep.OK) / rep.Duration.Seconds()
	}
	return rep
}

// Fprint writes reports one per line.
func Fprint(w io.Writer, reports ...Report) {
	for _, r := range reports {
		fmt.Fprintln(w, r)
	}
}

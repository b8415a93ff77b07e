// Package health watches the program's dependencies (Redis, MySQL, Kafka,
// the binlog source) and answers the liveness and readiness probes.
//
// A dependency is either required — the program cannot do its job without
// it, so while it is down the program is not ready and a balancer or an
// orchestrator should send it nothing — or optional: the program does its
// job without it and only the routes that use it fail, so while it is
// down the program is degraded (seckill_degraded, a log line, the admin
// view) and stays ready. A MySQL outage must not take every api out of a
// balancer while the sale, which needs Redis and Kafka only, could go on.
//
// Each dependency is checked in its own loop: while it is down the loop
// retries with exponential backoff and logs the dependency and its address
// once per change of state, not per attempt; once it is up the loop keeps
// checking at a steady interval. The clients themselves (go-redis,
// database/sql, kafka-go) redial on their own; the monitor is what tells the
// operator, the readiness probe and the program's workers whether they can.
package health

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/prometheus/client_golang/prometheus"
)

// Check answers nil when the dependency works. It must honour ctx's deadline.
type Check func(ctx context.Context) error

var errNotChecked = errors.New("not checked yet")

// Options tune the loops; the zero value gives the defaults.
type Options struct {
	CheckTimeout time.Duration // one check; default 2s
	Interval     time.Duration // between checks while up; default 5s
	MaxBackoff   time.Duration // longest wait between retries while down; default 10s
}

// Monitor tracks the state of every dependency added before Run.
type Monitor struct {
	logger   *slog.Logger
	opts     Options
	up       *prometheus.GaugeVec
	degraded prometheus.Gauge

	mu      sync.RWMutex
	deps    []*dependency
	changed chan struct{} // closed and replaced on every change of state
}

type dependency struct {
	name, addr string
	required   bool
	check      Check
	err        error
}

// Status is one dependency as the admin listener's readiness reports it.
type Status struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
	Up   bool   `json:"up"`
	// Required: while it is down the program is not ready; otherwise it
	// is degraded.
	Required bool   `json:"required"`
	Error    string `json:"error,omitempty"`
}

// The program's state, as the readiness endpoints name it.
const (
	StateReady       = "ready"
	StateDegraded    = "degraded" // ready, without an optional dependency
	StateUnavailable = "unavailable"
)

// NewMonitor registers the seckill_dependency_up gauge on reg.
func NewMonitor(logger *slog.Logger, reg prometheus.Registerer, opts Options) *Monitor {
	if opts.CheckTimeout <= 0 {
		opts.CheckTimeout = 2 * time.Second
	}
	if opts.Interval <= 0 {
		opts.Interval = 5 * time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 10 * time.Second
	}
	up := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "seckill_dependency_up",
		Help: "1 when the dependency answered its last check, 0 otherwise.",
	}, []string{"dependency"})
	degraded := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "seckill_degraded",
		Help: "1 while the program is ready without a dependency it works without (only what uses it fails); 0 while it has them all, or is not ready (seckill_dependency_up says which).",
	})
	reg.MustRegister(up, degraded)
	return &Monitor{logger: logger, opts: opts, up: up, degraded: degraded, changed: make(chan struct{})}
}

// Add declares a dependency the program cannot do its job without; call
// it before Run.
func (m *Monitor) Add(name, addr string, check Check) { m.add(name, addr, true, check) }

// AddOptional declares a dependency the program does its job without:
// while it is down the program is degraded, not unready. Call it before
// Run.
func (m *Monitor) AddOptional(name, addr string, check Check) { m.add(name, addr, false, check) }

func (m *Monitor) add(name, addr string, required bool, check Check) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deps = append(m.deps, &dependency{name: name, addr: addr, required: required, check: check, err: errNotChecked})
	m.up.WithLabelValues(name).Set(0)
}

// Run checks every dependency until ctx ends.
func (m *Monitor) Run(ctx context.Context) {
	m.mu.RLock()
	deps := append([]*dependency(nil), m.deps...)
	m.mu.RUnlock()
	var wg sync.WaitGroup
	for _, d := range deps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.watch(ctx, d)
		}()
	}
	wg.Wait()
}

func (m *Monitor) watch(ctx context.Context, d *dependency) {
	retry := backoff.NewExponentialBackOff()
	retry.InitialInterval = 200 * time.Millisecond
	retry.MaxInterval = m.opts.MaxBackoff
	retry.MaxElapsedTime = 0 // a daemon waits for its dependency as long as it runs
	for {
		checkCtx, cancel := context.WithTimeout(ctx, m.opts.CheckTimeout)
		err := d.check(checkCtx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		wait := m.opts.Interval
		if err != nil {
			wait = retry.NextBackOff()
		} else {
			retry.Reset()
		}
		m.record(d, err, wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (m *Monitor) record(d *dependency, err error, retryIn time.Duration) {
	m.mu.Lock()
	wasUp, first := d.err == nil, errors.Is(d.err, errNotChecked)
	d.err = err
	if (err == nil) != wasUp || first {
		close(m.changed)
		m.changed = make(chan struct{})
	}
	// Under the lock: two dependencies recorded at once leave the gauge
	// at the state both made.
	if m.stateLocked() == StateDegraded {
		m.degraded.Set(1)
	} else {
		m.degraded.Set(0)
	}
	m.mu.Unlock()

	switch {
	case err == nil && (!wasUp || first):
		m.up.WithLabelValues(d.name).Set(1)
		m.logger.Info("dependency available", "dependency", d.name, "addr", d.addr)
	case err != nil && (wasUp || first) && d.required:
		m.up.WithLabelValues(d.name).Set(0)
		m.logger.Warn("dependency unavailable, retrying with backoff: not ready until it answers",
			"dependency", d.name, "addr", d.addr, "err", err, "retry_in", retryIn)
	case err != nil && (wasUp || first):
		m.up.WithLabelValues(d.name).Set(0)
		m.logger.Warn("dependency unavailable, retrying with backoff: degraded, still ready (only what uses it fails)",
			"dependency", d.name, "addr", d.addr, "err", err, "retry_in", retryIn)
	}
}

// Statuses is the state of every dependency, in the order they were added.
func (m *Monitor) Statuses() []Status {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]Status, 0, len(m.deps))
	for _, d := range m.deps {
		s := Status{Name: d.name, Addr: d.addr, Up: d.err == nil, Required: d.required}
		if d.err != nil {
			s.Error = d.err.Error()
		}
		out = append(out, s)
	}
	return out
}

// Up reports whether the named dependency answered its last check.
func (m *Monitor) Up(name string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, d := range m.deps {
		if d.name == name {
			return d.err == nil
		}
	}
	return false
}

// Ready reports whether every required dependency answered its last
// check.
func (m *Monitor) Ready() bool { return m.State() != StateUnavailable }

// State is unavailable while a required dependency is down, degraded while
// only optional ones are, ready otherwise.
func (m *Monitor) State() string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.stateLocked()
}

func (m *Monitor) stateLocked() string {
	state := StateReady
	for _, d := range m.deps {
		switch {
		case d.err == nil:
		case d.required:
			return StateUnavailable
		default:
			state = StateDegraded
		}
	}
	return state
}

// WaitUp blocks until the named dependencies are all up, or ctx ends.
// Workers call it before they start, and again after they lose a dependency.
func (m *Monitor) WaitUp(ctx context.Context, names ...string) error {
	for {
		m.mu.RLock()
		changed, allUp := m.changed, true
		for _, d := range m.deps {
			for _, n := range names {
				if d.name == n && d.err != nil {
					allUp = false
				}
			}
		}
		m.mu.RUnlock()
		if allUp {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// ReadyHandler is the admin listener's readiness: 200 while every
// required dependency is up (status ready, or degraded when an optional
// one is down), 503 otherwise (unavailable), with each dependency's name,
// address, whether it is required and its last error.
func (m *Monitor) ReadyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		statuses := m.Statuses()
		state := m.State()
		writeJSON(w, readyCode(state), map[string]any{"status": state, "dependencies": statuses})
	})
}

// PublicReadyHandler is the readiness a public port serves to balancers:
// the same answer as ReadyHandler's, ready or unavailable and nothing
// more — which dependency failed, where it is and why are for the admin
// listener, not for whoever can reach the public port.
func (m *Monitor) PublicReadyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		state := m.State()
		if state == StateDegraded {
			state = StateReady
		}
		writeJSON(w, readyCode(state), map[string]string{"status": state})
	})
}

func readyCode(state string) int {
	if state == StateUnavailable {
		return http.StatusServiceUnavailable
	}
	return http.StatusOK
}

// LiveHandler answers 200 while the process can serve HTTP at all.
func LiveHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
}

func writeJSON(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

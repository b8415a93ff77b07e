// Package health watches the program's dependencies (Redis, MySQL, Kafka,
// the binlog source) and answers the liveness and readiness probes.
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
	logger *slog.Logger
	opts   Options
	up     *prometheus.GaugeVec

	mu      sync.RWMutex
	deps    []*dependency
	changed chan struct{} // closed and replaced on every change of state
}

type dependency struct {
	name, addr string
	check      Check
	err        error
}

// Status is one dependency as the readiness probe reports it.
type Status struct {
	Name  string `json:"name"`
	Addr  string `json:"addr"`
	Up    bool   `json:"up"`
	Error string `json:"error,omitempty"`
}

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
	reg.MustRegister(up)
	return &Monitor{logger: logger, opts: opts, up: up, changed: make(chan struct{})}
}

// Add declares a dependency; call it before Run.
func (m *Monitor) Add(name, addr string, check Check) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deps = append(m.deps, &dependency{name: name, addr: addr, check: check, err: errNotChecked})
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
	m.mu.Unlock()

	switch {
	case err == nil && (!wasUp || first):
		m.up.WithLabelValues(d.name).Set(1)
		m.logger.Info("dependency available", "dependency", d.name, "addr", d.addr)
	case err != nil && (wasUp || first):
		m.up.WithLabelValues(d.name).Set(0)
		m.logger.Warn("dependency unavailable, retrying with backoff",
			"dependency", d.name, "addr", d.addr, "err", err, "retry_in", retryIn)
	}
}

// Statuses is the state of every dependency, in the order they were added.
func (m *Monitor) Statuses() []Status {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]Status, 0, len(m.deps))
	for _, d := range m.deps {
		s := Status{Name: d.name, Addr: d.addr, Up: d.err == nil}
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

// Ready reports whether every dependency answered its last check.
func (m *Monitor) Ready() bool {
	for _, s := range m.Statuses() {
		if !s.Up {
			return false
		}
	}
	return true
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

// ReadyHandler answers 200 when every dependency is up and 503 otherwise,
// with each dependency's name, address and last error in the body.
func (m *Monitor) ReadyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		statuses := m.Statuses()
		ready := true
		for _, s := range statuses {
			ready = ready && s.Up
		}
		code, status := http.StatusOK, "ready"
		if !ready {
			code, status = http.StatusServiceUnavailable, "unavailable"
		}
		writeJSON(w, code, map[string]any{"status": status, "dependencies": statuses})
	})
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

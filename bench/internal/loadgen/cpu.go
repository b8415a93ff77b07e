package loadgen

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc/<pid>/stat's CPU times: USER_HZ, 100 on
// every Linux the project runs on.
const clockTick = 10 * time.Millisecond

// Self is the name under which Procs measures the load generator itself,
// reported apart from the system it drives.
const Self = "loadgen"

// Procs are the processes of the system whose CPU time a run measures, by
// name, in the order they are printed.
type Procs struct {
	Names []string
	PIDs  []int
}

// ParseProcs reads "api=123,redis=456": the processes to measure. The load
// generator is added as Self.
func ParseProcs(s string) (Procs, error) {
	var p Procs
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, pid, ok := strings.Cut(item, "=")
		n, err := strconv.Atoi(pid)
		if !ok || name == "" || err != nil || n <= 0 {
			return p, fmt.Errorf("procs: %q is not name=pid", item)
		}
		p.Names, p.PIDs = append(p.Names, name), append(p.PIDs, n)
	}
	p.Names, p.PIDs = append(p.Names, Self), append(p.PIDs, os.Getpid())
	return p, nil
}

// Sample is each process's CPU time (user + system) so far.
func (p Procs) Sample() ([]time.Duration, error) {
	out := make([]time.Duration, len(p.PIDs))
	for i, pid := range p.PIDs {
		t, err := cpuTime(pid)
		if err != nil {
			return nil, fmt.Errorf("cpu of %s (pid %d): %w", p.Names[i], pid, err)
		}
		out[i] = t
	}
	return out, nil
}

// cpuTime is utime + stime from /proc/<pid>/stat.
func cpuTime(pid int) (time.Duration, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: count fields
	// after its closing one. utime and stime are fields 14 and 15.
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("short stat %q", s)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("stat %q: utime %v, stime %v", s, err1, err2)
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// Measure runs fn and is the CPU each of p's processes used meanwhile,
// over the requests fn reports.
func (p Procs) Measure(name string, fn func() (Report, error)) (Report, CPU, error) {
	before, err := p.Sample()
	if err != nil {
		return Report{}, CPU{}, err
	}
	rep, err := fn()
	if err != nil {
		return rep, CPU{}, err
	}
	after, err := p.Sample()
	if err != nil {
		return rep, CPU{}, err
	}
	return rep, p.Diff(name, rep.Requests, before, after), nil
}

// Idle is the CPU each of p's processes uses in d with no load.
func (p Procs) Idle(ctx context.Context, d time.Duration) (IdleCPU, error) {
	before, err := p.Sample()
	if err != nil {
		return IdleCPU{}, err
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return IdleCPU{}, ctx.Err()
	case <-time.After(d):
	}
	after, err := p.Sample()
	if err != nil {
		return IdleCPU{}, err
	}
	return IdleCPU{CPU: p.Diff("idle", 0, before, after), Over: time.Since(start)}, nil
}

// IdleCPU is what each process used over a time with no load.
type IdleCPU struct {
	CPU
	Over time.Duration
}

// String is each process's CPU-ms a second, and the system's total (the
// load generator apart), whole: /proc counts in ticks of 10 ms.
func (c IdleCPU) String() string {
	var b strings.Builder
	var total time.Duration
	perSec := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / c.Over.Seconds() }
	for i, n := range c.Names {
		if n == Self {
			continue
		}
		total += c.Used[i]
		fmt.Fprintf(&b, "%s %.0f, ", n, perSec(c.Used[i]))
	}
	fmt.Fprintf(&b, "total %.0f CPU-ms a second", perSec(total))
	return b.String()
}

// CPU is what each process used during one run.
type CPU struct {
	Run      string
	Requests int64
	Names    []string
	Used     []time.Duration
}

// Diff is the CPU used between two samples of p over requests.
func (p Procs) Diff(run string, requests int64, before, after []time.Duration) CPU {
	c := CPU{Run: run, Requests: requests, Names: p.Names, Used: make([]time.Duration, len(p.Names))}
	for i := range p.Names {
		c.Used[i] = after[i] - before[i]
	}
	return c
}

// PerThousand is process name's CPU-ms per 1,000 requests; for "total",
// every process's but the load generator's.
func (c CPU) PerThousand(name string) float64 {
	var used time.Duration
	for i, n := range c.Names {
		if n == name || name == "total" && n != Self {
			used += c.Used[i]
		}
	}
	if c.Requests == 0 {
		return 0
	}
	return float64(used.Microseconds()) / 1000 / float64(c.Requests) * 1000
}

// NetPerThousand is c's PerThousand for name less what idle says the
// process burns with no load over a run of length over: a run that lasts
// longer carries more of that floor without its requests costing more.
func (c CPU) NetPerThousand(idle IdleCPU, over time.Duration, name string) float64 {
	if c.Requests == 0 {
		return 0
	}
	var used, idled time.Duration
	for i, n := range c.Names {
		if n == Self || name != "total" && n != name {
			continue
		}
		used += c.Used[i]
		idled += time.Duration(float64(idle.Used[i]) * over.Seconds() / idle.Over.Seconds())
	}
	return float64((used - idled).Microseconds()) / 1000 * 1000 / float64(c.Requests)
}

// CPUTable prints runs side by side: CPU-ms per 1,000 requests, per
// process and in total (the system, the load generator apart).
func CPUTable(runs ...CPU) string {
	if len(runs) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-22s", "CPU-ms per 1,000 req")
	for _, r := range runs {
		fmt.Fprintf(&b, " %14s", r.Run)
	}
	b.WriteString("\n")
	// Every process of any run, in the order they first appear: runs on
	// other topologies measure other processes (each cluster node).
	var names []string
	for _, r := range runs {
		for _, n := range r.Names {
			if n != Self && !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	for _, n := range append(names, "total") {
		fmt.Fprintf(&b, "%-22s", n)
		for _, r := range runs {
			if n != "total" && !slices.Contains(r.Names, n) {
				fmt.Fprintf(&b, " %14s", "-")
				continue
			}
			fmt.Fprintf(&b, " %14.1f", r.PerThousand(n))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "%-22s", Self+" (apart)")
	for _, r := range runs {
		fmt.Fprintf(&b, " %14.1f", r.PerThousand(Self))
	}
	b.WriteString("\n")
	return b.String()
}

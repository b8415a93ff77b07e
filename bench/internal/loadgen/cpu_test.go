package loadgen

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCPUOfThisProcessGrows(t *testing.T) {
	p, err := ParseProcs("self-again=" + strconv.Itoa(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	before, err := p.Sample()
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline); { // a spin, not a wait: the test is about the CPU it burns
	}
	after, err := p.Sample()
	if err != nil {
		t.Fatal(err)
	}
	c := p.Diff("spin", 1000, before, after)
	if got := c.PerThousand("self-again"); got < 100 {
		t.Fatalf("200 ms of spinning measured as %.1f CPU-ms", got)
	}
	if c.PerThousand("total") != c.PerThousand("self-again") {
		t.Fatalf("total %.1f leaves out the load generator, want only self-again's %.1f", c.PerThousand("total"), c.PerThousand("self-again"))
	}
}

func TestPerThousandAndTable(t *testing.T) {
	c := CPU{Run: "(a)", Requests: 20000, Names: []string{"api", "redis", Self},
		Used: []time.Duration{2 * time.Second, time.Second, 500 * time.Millisecond}}
	for name, want := range map[string]float64{"api": 100, "redis": 50, "total": 150, Self: 25} {
		if got := c.PerThousand(name); got != want {
			t.Errorf("%s: %.1f CPU-ms per 1,000, want %.1f", name, got, want)
		}
	}
	table := CPUTable(c)
	for _, line := range []string{"api", "redis", "total", Self + " (apart)"} {
		if !strings.Contains(table, line) {
			t.Errorf("table lacks %q:\n%s", line, table)
		}
	}
	for _, bad := range []string{"api", "=3", "api=x", "api=-1"} {
		if _, err := ParseProcs(bad); err == nil {
			t.Errorf("ParseProcs(%q) accepted it", bad)
		}
	}
}

// Runs on two topologies measure other processes: the table has a row for
// each, with "-" where a run did not measure it, and each run's total.
func TestTableOfRunsOnOtherProcesses(t *testing.T) {
	node := CPU{Run: "node", Requests: 1000, Names: []string{"api", "redis", Self}, Used: []time.Duration{time.Second, time.Second, time.Second}}
	cluster := CPU{Run: "cluster", Requests: 1000, Names: []string{"api", "redis-17001", "redis-17002", Self},
		Used: []time.Duration{time.Second, 500 * time.Millisecond, 250 * time.Millisecond, time.Second}}
	rows := map[string][]string{}
	for line := range strings.Lines(CPUTable(node, cluster)) {
		f := strings.Fields(line)
		rows[f[0]] = f[1:]
	}
	for name, want := range map[string][]string{
		"api": {"1000.0", "1000.0"}, "redis": {"1000.0", "-"}, "redis-17001": {"-", "500.0"}, "redis-17002": {"-", "250.0"},
		"total": {"2000.0", "1750.0"},
	} {
		if !slices.Equal(rows[name], want) {
			t.Errorf("row %s: %v, want %v", name, rows[name], want)
		}
	}
}

func TestIdleIsPerSecondWithoutTheLoadGenerator(t *testing.T) {
	c := IdleCPU{Over: 10 * time.Second, CPU: CPU{Names: []string{"api", "kafka", Self},
		Used: []time.Duration{30 * time.Millisecond, 500 * time.Millisecond, 5 * time.Second}}}
	if got, want := c.String(), "api 3, kafka 50, total 53 CPU-ms a second"; got != want {
		t.Fatalf("idle line %q, want %q", got, want)
	}
}

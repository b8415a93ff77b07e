package loadgen

import (
	"os"
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
	for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline); {
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

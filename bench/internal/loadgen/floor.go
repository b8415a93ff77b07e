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

	"github.com/seckill/seckill/bench/internal/floor"
)

// FloorConfig is a closed-loop run against the floor (cmd/floor): the
// accept path's I/O alone, the same clients and load as the api's run.
type FloorConfig struct {
	Users    int
	Workers  uint64
	Vouchers int
	// Runs is the file of the fixed-rate runs (FixedRate's Runs) that holds
	// the api's closed-loop run on one node, labelled Beside.
	Runs, Beside string
}

// Floor stocks Vouchers sales in the floor's Redis, sends Users orders by
// Workers clients, checks every one was taken, and prints the floor's rate
// beside the api's accept path on one node: the share of what this
// machine allows that the accept path reaches.
func (s *Sale) Floor(ctx context.Context, out io.Writer, cfg FloorConfig) error {
	base := 500_000_000 + rand.Int64N(1<<40)
	per := (cfg.Users + cfg.Vouchers - 1) / cfg.Vouchers
	vouchers := make([]int64, cfg.Vouchers)
	for i := range vouchers {
		vouchers[i] = base + int64(i)
		if err := floor.Stock(ctx, s.Redis, s.KeyPrefix, vouchers[i], per); err != nil {
			return err
		}
	}
	defer func() {
		for _, v := range vouchers {
			s.Redis.Del(context.Background(), floor.Keys(s.KeyPrefix, v)...)
		}
	}()
	reqs := make([]Request, cfg.Users)
	for i := range reqs {
		buyer := "floor-" + strconv.FormatInt(base, 36) + "-" + strconv.Itoa(i)
		reqs[i] = Requests(s.API, "/voucher-order/seckill/"+strconv.FormatInt(vouchers[i%cfg.Vouchers], 10), []string{buyer})[0]
	}
	fmt.Fprintf(out, "[floor] %d orders by %d clients over %d vouchers: echo, one EVALSHA, one produce (acks=all)\n", cfg.Users, cfg.Workers, cfg.Vouchers)
	rep, err := Run("floor closed loop", reqs, Options{Workers: cfg.Workers})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, rep)
	if rep.OK != int64(cfg.Users) {
		return fmt.Errorf("floor: %d of %d orders taken: %v", rep.OK, cfg.Users, rep.Outcomes)
	}
	floorRate := float64(rep.OK) / rep.Duration.Seconds()
	api, err := findRun(cfg.Runs, cfg.Beside)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nThe accept path against its floor, %d clients (%s)\n", cfg.Workers, time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(out, "%-26s %10s %12s\n", "", "orders/s", "p50 / p99")
	fmt.Fprintf(out, "%-26s %10.0f %12s\n", "floor", floorRate, fmt.Sprintf("%v / %v", rep.P50.Round(10*time.Microsecond), rep.P99.Round(10*time.Microsecond)))
	fmt.Fprintf(out, "%-26s %10.0f %12s\n", "api, "+api.Label, api.rate(), fmt.Sprintf("%v / %v", api.P50.Round(10*time.Microsecond), api.P99.Round(10*time.Microsecond)))
	fmt.Fprintf(out, "the accept path reaches %.0f %% of the floor's rate\n", 100*api.rate()/floorRate)
	return nil
}

// findRun is the run labelled label in the runs file at path.
func findRun(path, label string) (FixedRateFigures, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return FixedRateFigures{}, fmt.Errorf("the api's runs: %w", err)
	}
	for line := range strings.Lines(string(raw)) {
		var f FixedRateFigures
		if err := json.Unmarshal([]byte(line), &f); err == nil && f.Label == label {
			return f, nil
		}
	}
	return FixedRateFigures{}, fmt.Errorf("no run labelled %q in %s", label, path)
}

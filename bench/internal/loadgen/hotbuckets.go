package loadgen

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// HotBucketsConfig is make bench's hot voucher sold from stock buckets: the
// gate's ceiling on one voucher at each bucket count, then the same sale
// through the api at each.
type HotBucketsConfig struct {
	Users     int // units of each sale; a tenth more buyers come
	Workers   uint64
	RedisReqs int   // EVALSHA in all, each bucket its share
	Buckets   []int // the bucket counts compared, 1 first
	Procs     Procs
}

// HotBuckets runs the comparison and prints it.
func (s *Sale) HotBuckets(ctx context.Context, out io.Writer, cfg HotBucketsConfig) error {
	fmt.Fprintf(out, "\nthe gate's ceiling on one voucher: redis-benchmark, EVALSHA seckill.lua, %d requests shared by the buckets, 50 clients per bucket, every bucket at once\n",
		cfg.RedisReqs)
	var ceilings []GateCeiling
	for _, n := range cfg.Buckets {
		var c GateCeiling
		_, cpu, err := cfg.Procs.Measure(fmt.Sprintf("ceiling %d", n), func() (Report, error) {
			var err error
			c, err = s.RedisBench(ctx, n, cfg.RedisReqs, 50)
			return Report{Requests: int64(cfg.RedisReqs / n * n)}, err
		})
		if err != nil {
			return err
		}
		ceilings = append(ceilings, c)
		// The busiest Redis process's CPU per EVALSHA (the redis-benchmark
		// clients apart) bounds what each master could run on a core of
		// its own: what N masters on machines of their own would reach.
		var busiest time.Duration
		for i, name := range cpu.Names {
			if strings.HasPrefix(name, "redis") {
				busiest = max(busiest, cpu.Used[i])
			}
		}
		perCall := busiest / time.Duration(cfg.RedisReqs/n)
		own := 0.0
		if perCall > 0 {
			own = float64(n) * float64(time.Second) / float64(perCall)
		}
		fmt.Fprintf(out, "  %d bucket(s) on %d master(s): %8.0f EVALSHA/s here (per bucket %.0f); the busiest master %.1f µs CPU per EVALSHA: %.0f/s on %d core(s) of their own\n",
			c.Buckets, c.Masters, c.PerSecond, c.PerBucket, float64(perCall.Nanoseconds())/1000, own, n)
	}
	if len(ceilings) > 1 {
		fmt.Fprintf(out, "  ratio %d buckets / 1, here: x%.2f\n", ceilings[len(ceilings)-1].Buckets, ceilings[len(ceilings)-1].PerSecond/ceilings[0].PerSecond)
	}

	buyers := cfg.Users + cfg.Users/10
	tokens, err := s.Sessions(ctx, 300_000_000+rand.Int64N(1<<40), buyers)
	if err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	fmt.Fprintf(out, "\none hot voucher through the api: %d units, %d buyers, %d clients; the bucket counts alternated twice\n",
		cfg.Users, buyers, cfg.Workers)
	var cpus []CPU
	var rows []string
	defer func() { s.Buckets = 0 }()
	for i, n := range append(slices.Clone(cfg.Buckets), cfg.Buckets...) {
		s.Buckets = n
		label := fmt.Sprintf("%d bucket(s) %c", n, 'A'+rune(i/len(cfg.Buckets)))
		before, err := gateCalls(ctx, s.Redis)
		if err != nil {
			return err
		}
		var audit Audit
		rep, cpu, err := cfg.Procs.Measure(label, func() (rep Report, err error) {
			rep, audit, err = s.SaleRun(ctx, out, label, tokens, cfg.Users, Options{Workers: cfg.Workers})
			return rep, err
		})
		if err != nil {
			return err
		}
		after, err := gateCalls(ctx, s.Redis)
		if err != nil {
			return err
		}
		if len(audit.Violations) > 0 {
			return fmt.Errorf("%s: audit: %v", label, audit.Violations)
		}
		cpus = append(cpus, cpu)
		var total, top, topUsec int64
		for addr, a := range after {
			calls := a.calls - before[addr].calls
			total += calls
			if calls > top {
				top, topUsec = calls, a.usec-before[addr].usec
			}
		}
		share := 0.0
		if total > 0 {
			share = float64(top) / float64(total)
		}
		rows = append(rows, fmt.Sprintf("  %-12s %8.0f req/s  p99 %-9v  gate calls %7d, the busiest master %3.0f %% of them, busy %3.0f %% of a core running them; %d × moving stock",
			label, rep.PerSecond, rep.P99, total, 100*share, 100*float64(topUsec)/float64(rep.Duration.Microseconds()),
			rep.Outcomes["503 units are being moved to your queue, try again in a moment"]))
	}
	fmt.Fprintln(out)
	for _, r := range rows {
		fmt.Fprintln(out, r)
	}
	fmt.Fprintln(out)
	fmt.Fprint(out, CPUTable(cpus...))
	return nil
}

// evalsha is a master's EVALSHA count and the time it spent running them.
type evalsha struct{ calls, usec int64 }

var cmdstatEvalsha = regexp.MustCompile(`cmdstat_evalsha:calls=(\d+),usec=(\d+)`)

// gateCalls reads every master's EVALSHA statistics (INFO commandstats).
func gateCalls(ctx context.Context, rdb redis.UniversalClient) (map[string]evalsha, error) {
	var mu sync.Mutex
	stats := map[string]evalsha{}
	read := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return fmt.Errorf("INFO commandstats: %w", err)
		}
		var e evalsha
		if m := cmdstatEvalsha.FindStringSubmatch(info); m != nil {
			e.calls, _ = strconv.ParseInt(m[1], 10, 64)
			e.usec, _ = strconv.ParseInt(m[2], 10, 64)
		}
		mu.Lock()
		stats[c.Options().Addr] = e
		mu.Unlock()
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return stats, c.ForEachMaster(ctx, read)
	case *redis.Client:
		return stats, read(ctx, c)
	default:
		return nil, fmt.Errorf("gate calls: a %T", rdb)
	}
}

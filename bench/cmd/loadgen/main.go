// Command loadgen drives a running system with vegeta and prints what it
// measured.
//
//	loadgen login   [flags]   POST /user/login throughput
//	loadgen seckill [flags]   one flash sale: N users on a stock S, then the audit
//	loadgen drain   [flags]   the order-writer draining a queued backlog
//	loadgen bench   [flags]   the make bench figures and their ratios
//	loadgen spread  [flags]   one Redis topology's figures, beside another's
//	loadgen multinode [flags] one run on the multi-node topology, beside one node
//	loadgen ceiling [flags]   a hot voucher in -buckets buckets at rising open-loop -rates, each held -hold: the highest held with p99 ≤ 100 ms
//	loadgen floor [flags]     the floor (cmd/floor) closed-loop, beside the api's run labelled -label in -runs
//	loadgen fixedrate [flags] one topology at a fixed open-loop rate, or closed-loop (-rate 0: -users orders by -workers clients): CPU per order raw and net of idle, beside the others
//	loadgen sessions  [flags] the accept path in the API's session mode, beside the other modes
//	loadgen tracing   [flags] the accept path with the API's tracing sampler, beside the other runs
//	loadgen otlp-sink [flags] an OTLP/HTTP trace receiver that counts the spans and keeps none
//
// The API must run with its seckill and login rate limits off (every
// request comes from one address) and, for bench, SECKILL_API_BENCH_NOOP=true.
// loadgen reads the same SECKILL_* variables as the programs for Redis,
// MySQL, Kafka and the key prefix.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/seckill/seckill/bench/internal/loadgen"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/daemon"
	"github.com/seckill/seckill/internal/gate"
	"github.com/seckill/seckill/internal/mysqldb"
	"github.com/seckill/seckill/internal/salestate"
)

const usage = "usage: loadgen login|seckill|drain|bench|spread|buckets|multinode|fixedrate|floor|ceiling|sessions|tracing|botcheck|draw|otlp-sink [flags] (loadgen CMD -h lists them)"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run(cmd string, args []string) error {
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	apiURL := fs.String("api", "http://127.0.0.1:8081", "the API's base URL")
	users := fs.Int("users", 20000, "users, one request each")
	workers := fs.Uint64("workers", 64, "concurrent clients")
	stock := fs.Int("stock", 100, "seckill: the voucher's stock")
	rate := fs.Int("rate", 0, "seckill: requests per second, open loop (0: closed loop)")
	adminToken := fs.String("admin-token", os.Getenv("SECKILL_ADMIN_TOKEN"), "the API's admin token")
	writerMetrics := fs.String("writer-metrics", "http://127.0.0.1:9101/metrics", "the order-writer's metrics, for the lag; empty skips")
	plot := fs.String("plot", "", "seckill: write the HTML latency plot here; bench: a directory for the plots")
	writerBin := fs.String("writer-bin", "bin/order-writer", "bench: the order-writer binary for the drain")
	drain := fs.Int("drain", 200000, "bench: orders in the drained backlog")
	redisReqs := fs.Int("redis-requests", 200000, "bench: redis-benchmark requests")
	label := fs.String("label", "one node", "spread: this topology's name in the table")
	varied := fs.String("varied", "session mode", "sessions: what the runs compare, in the table's title")
	topology := fs.String("topology", "one node", "sessions: where the rest runs, in the table's title")
	vouchers := fs.Int("vouchers", 12, "spread: the vouchers the users are spread over")
	rates := fs.String("rates", "200,400,600,800,1000,1500,2000", "ceiling: the open-loop rates tried, in order")
	hold := fs.Duration("hold", 10*time.Second, "ceiling: how long each rate is held")
	buckets := fs.Int("buckets", 3, "ceiling: the hot voucher's stock buckets")
	save := fs.String("save", "", "spread: write this run's figures to this file")
	beside := fs.String("beside", "", "spread: print the figures of an earlier run (-save) beside this one's")
	runs := fs.String("runs", "", "multinode, sessions, tracing, fixedrate: the file that collects every run's figures")
	single := fs.String("single", "", "multinode: the one-node figures (spread -save) to compare with")
	procs := fs.String("procs", "", "bench: the system's processes to measure the CPU of, name=pid,... (the load generator is measured apart)")
	sink := fs.String("sink", "http://127.0.0.1:4318", "tracing: the OTLP sink the API exports to; otlp-sink: its address is -addr")
	sinkAddr := fs.String("addr", "127.0.0.1:4318", "otlp-sink: the address to listen on")
	duration := fs.Duration("duration", time.Minute, "fixedrate: how long the rate is held")
	idle := fs.Duration("idle", 20*time.Second, "fixedrate: how long the idle CPU is sampled, daemons up, no load")
	_ = fs.Parse(args)
	if cmd == "otlp-sink" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return loadgen.ServeOTLPSink(ctx, *sinkAddr)
	}

	common, sk, err := config.LoadCommon(os.LookupEnv)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rdb, err := daemon.OpenRedis(ctx, common, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		return err
	}
	defer rdb.Close()
	if cmd == "login" {
		reports, err := loadgen.Login(ctx, rdb, loadgen.LoginConfig{API: *apiURL, Users: *users, Workers: *workers, KeyPrefix: sk.KeyPrefix})
		loadgen.Fprint(os.Stdout, reports...)
		return err
	}
	db, err := mysqldb.Open(common.MySQLDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	sale := &loadgen.Sale{API: *apiURL, AdminToken: *adminToken, Redis: rdb, DB: db,
		Store: gate.New(salestate.New(rdb, sk.KeyPrefix)), KeyPrefix: sk.KeyPrefix, WriterMetrics: *writerMetrics}
	switch cmd {
	case "seckill":
		tokens, err := sale.Sessions(ctx, time.Now().UnixNano()%1_000_000_000*1000, *users)
		if err != nil {
			return err
		}
		_, audit, err := sale.SaleRun(ctx, os.Stdout, "seckill", tokens, *stock,
			loadgen.Options{Workers: *workers, Rate: *rate, Progress: os.Stderr, PlotPath: *plot})
		if err != nil {
			return err
		}
		if len(audit.Violations) > 0 {
			return fmt.Errorf("audit: %s", strings.Join(audit.Violations, "; "))
		}
		return nil
	case "drain":
		rep, err := loadgen.Drain(ctx, rdb, common.MySQLDSN, common.KafkaBrokers, *writerBin, nil, *drain)
		fmt.Println(rep)
		return err
	case "spread":
		measured, err := loadgen.ParseProcs(*procs)
		if err != nil {
			return err
		}
		return sale.Spread(ctx, os.Stdout, loadgen.SpreadConfig{Label: *label, Users: *users, Workers: *workers, Vouchers: *vouchers,
			RedisReqs: *redisReqs, Procs: measured, Save: *save, Beside: *beside})
	case "buckets":
		measured, err := loadgen.ParseProcs(*procs)
		if err != nil {
			return err
		}
		return sale.HotBuckets(ctx, os.Stdout, loadgen.HotBucketsConfig{Users: *users, Workers: *workers, RedisReqs: *redisReqs,
			Buckets: []int{1, 3}, Procs: measured})
	case "ceiling":
		var list []int
		for _, f := range strings.Split(*rates, ",") {
			r, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || r <= 0 {
				return fmt.Errorf("ceiling: -rates %q: %q is not a positive rate", *rates, f)
			}
			list = append(list, r)
		}
		_, err := sale.Ceiling(ctx, os.Stdout, loadgen.CeilingConfig{Rates: list, Hold: *hold, Buckets: *buckets, Workers: *workers, MaxP99: 100 * time.Millisecond})
		return err
	case "floor":
		return sale.Floor(ctx, os.Stdout, loadgen.FloorConfig{Users: *users, Workers: *workers, Vouchers: *vouchers, Runs: *runs, Beside: *label})
	case "fixedrate":
		measured, err := loadgen.ParseProcs(*procs)
		if err != nil {
			return err
		}
		if *rate < 0 {
			return fmt.Errorf("fixedrate: -rate must not be negative")
		}
		return sale.FixedRate(ctx, os.Stdout, loadgen.FixedRateConfig{Label: *label, Rate: *rate, Duration: *duration, Idle: *idle,
			Users: *users, Vouchers: *vouchers, Workers: *workers, Procs: measured, Runs: *runs})
	case "multinode":
		measured, err := loadgen.ParseProcs(*procs)
		if err != nil {
			return err
		}
		return sale.MultiNode(ctx, os.Stdout, loadgen.MultiNodeConfig{Label: *label, Users: *users, Workers: *workers,
			Vouchers: *vouchers, Procs: measured, Runs: *runs, Single: *single})
	case "botcheck":
		measured, err := loadgen.ParseProcs(*procs)
		if err != nil {
			return err
		}
		return sale.BotCheckBench(ctx, os.Stdout, loadgen.BotCheckBenchConfig{Users: *users, Workers: int(*workers), Procs: measured})
	case "draw":
		measured, err := loadgen.ParseProcs(*procs)
		if err != nil {
			return err
		}
		return sale.DrawBench(ctx, os.Stdout, loadgen.DrawBenchConfig{Users: *users, Workers: int(*workers), Procs: measured})
	case "sessions", "tracing":
		measured, err := loadgen.ParseProcs(*procs)
		if err != nil {
			return err
		}
		// The API's own session configuration: in the jwt mode the
		// users' tokens are signed with its keys.
		api, err := config.LoadAPI(os.LookupEnv)
		if err != nil {
			return err
		}
		if api.Sessions.Mode != config.SessionsJWT {
			api.Sessions.Keys = nil
		}
		bench := loadgen.SessionBenchConfig{Label: *label, Users: *users, Workers: *workers,
			Procs: measured, Keys: api.Sessions.Keys, Runs: *runs}
		bench.Varied, bench.Topology = *varied, *topology
		if cmd == "tracing" {
			bench.Varied, bench.Sink = "tracing", *sink
		}
		return sale.SessionBench(ctx, os.Stdout, bench)
	case "bench":
		if *plot != "" {
			if err := os.MkdirAll(*plot, 0o755); err != nil {
				return err
			}
		}
		measured, err := loadgen.ParseProcs(*procs)
		if err != nil {
			return err
		}
		return sale.Bench(ctx, os.Stdout, loadgen.BenchConfig{
			Users: *users, Workers: *workers, RedisReqs: *redisReqs,
			Brokers: common.KafkaBrokers, MySQLDSN: common.MySQLDSN, WriterBin: *writerBin, Drain: *drain, PlotDir: *plot,
			Procs: measured,
		})
	}
	return fmt.Errorf("unknown command %q; %s", cmd, usage)
}

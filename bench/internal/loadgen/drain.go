package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/gate"
	"github.com/seckill/seckill/internal/mysqldb"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/redisconn"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/schema"
)

// DrainReport is the order-writer draining a backlog.
type DrainReport struct {
	Orders   int
	Produce  time.Duration // queueing the backlog in Kafka
	Total    time.Duration // from the writer's start to the last row
	Steady   time.Duration // from the first row to the last
	PerSec   float64       // Orders / Total
	SteadyPS float64       // Orders / Steady
}

func (d DrainReport) String() string {
	return fmt.Sprintf("writer drain: %d queued orders (queued in %v) written to MySQL in %v from the writer's start = %.0f orders/s (%.0f orders/s from the first row to the last)",
		d.Orders, d.Produce.Round(time.Millisecond), d.Total.Round(time.Millisecond), d.PerSec, d.SteadyPS)
}

// Drain queues n orders of a fresh voucher on a topic of their own, then
// starts the order-writer binary on that topic and times it until MySQL
// holds all n: a writer that was down while a sale took its orders. The
// orders go to a fresh database (dropped afterwards), so that every run
// starts from the same empty tables, and each is taken by the gate first,
// in Redis under a key prefix of the run's own (deleted afterwards): the
// writer settles real reservations, as after a sale. Orders the gate never
// took would look to the writer like acknowledged writes Redis lost, and
// it would reconcile the sale again and again; with the database's
// voucher ids starting at 1, it did so into the keys of the live system's
// voucher 1. dsn is the server's; env is the rest of the writer's
// environment (its Redis, Kafka), rdb the same Redis.
func Drain(ctx context.Context, rdb redis.UniversalClient, dsn string, brokers []string, writerBin string, env []string, n int) (DrainReport, error) {
	rep := DrainReport{Orders: n}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return rep, err
	}
	admin, err := mysqldb.Open(dsn)
	if err != nil {
		return rep, err
	}
	defer admin.Close()
	cfg.DBName = fmt.Sprintf("seckill_drain_%d", time.Now().UnixNano())
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+cfg.DBName+"`"); err != nil {
		return rep, fmt.Errorf("drain database: %w", err)
	}
	defer admin.ExecContext(context.Background(), "DROP DATABASE `"+cfg.DBName+"`")
	db, err := mysqldb.Open(cfg.FormatDSN())
	if err != nil {
		return rep, err
	}
	defer db.Close()
	if _, err := schema.Migrate(ctx, db); err != nil {
		return rep, err
	}
	env = append(env, "SECKILL_MYSQL_DSN="+cfg.FormatDSN())
	res, err := db.ExecContext(ctx, "INSERT INTO tb_voucher (shop_id, title, pay_value, actual_value, type) VALUES (1, 'drain', 100, 1000, 1)")
	if err != nil {
		return rep, fmt.Errorf("drain voucher: %w", err)
	}
	voucher, _ := res.LastInsertId()
	if _, err := db.ExecContext(ctx, "INSERT INTO tb_seckill_voucher (voucher_id, stock, begin_time, end_time) VALUES (?, ?, NOW(), NOW() + INTERVAL 1 HOUR)", voucher, n); err != nil {
		return rep, fmt.Errorf("drain voucher: %w", err)
	}
	prefix := fmt.Sprintf("bench:drain:%d:", time.Now().UnixNano())
	defer func() {
		if err := deleteKeys(context.Background(), rdb, prefix); err != nil {
			fmt.Fprintf(os.Stderr, "drain: the keys under %s are left in Redis: %v\n", prefix, err)
		}
	}()
	events, err := take(ctx, gate.New(salestate.New(rdb, prefix)), voucher, n)
	if err != nil {
		return rep, err
	}
	topic := fmt.Sprintf("bench.drain.%d", time.Now().UnixNano())
	if err := broker.EnsureTopics(ctx, brokers, broker.Topic{Name: topic, Partitions: 6}); err != nil {
		return rep, err
	}
	defer broker.DeleteTopics(context.Background(), brokers, topic)

	start := time.Now()
	w := broker.NewWriter(brokers, topic)
	w.BatchSize = 2000
	const chunk = 10000
	for i := 0; i < n; i += chunk {
		msgs := make([]kafka.Message, 0, chunk)
		for _, e := range events[i:min(i+chunk, n)] {
			msgs = append(msgs, broker.OrderMessage(e))
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			w.Close()
			return rep, fmt.Errorf("queue the backlog: %w", err)
		}
	}
	if err := w.Close(); err != nil {
		return rep, err
	}
	rep.Produce = time.Since(start)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return rep, err
	}
	adminAddr := ln.Addr().String()
	ln.Close()
	cmd := exec.CommandContext(ctx, writerBin)
	cmd.Env = writerEnv(append(os.Environ(), env...), topic, prefix, adminAddr)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return rep, fmt.Errorf("start %s: %w", writerBin, err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	// Progress comes from the writer's own counter of committed rows, not a
	// COUNT(*) every few milliseconds, which would load the MariaDB under
	// measurement; one COUNT(*) at the end checks that MySQL holds them.
	metrics := "http://" + adminAddr + "/metrics"
	var first, last time.Time
	for {
		inserted, err := scrapeCounter(ctx, metrics, "seckill_orders_inserted_total")
		if err == nil && inserted > 0 && first.IsZero() {
			first = time.Now()
		}
		if err == nil && inserted >= float64(n) {
			last = time.Now()
			break
		}
		if time.Since(started) > 5*time.Minute {
			return rep, fmt.Errorf("drain: %.0f of %d orders after 5 minutes (last scrape error: %v)", inserted, n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var rows int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM tb_voucher_order WHERE voucher_id = ?", voucher).Scan(&rows); err != nil {
		return rep, err
	}
	if rows != n {
		return rep, fmt.Errorf("drain: the writer counted %d orders inserted, MySQL holds %d", n, rows)
	}
	rep.Total, rep.Steady = last.Sub(started), last.Sub(first)
	rep.PerSec = float64(n) / rep.Total.Seconds()
	rep.SteadyPS = float64(n) / rep.Steady.Seconds()
	return rep, nil
}

// writerEnv is the drained writer's environment: base, then its own
// topic, consumer group, key prefix and admin address, which win over
// base's (the last of a variable counts).
func writerEnv(base []string, topic, prefix, adminAddr string) []string {
	return append(base, "SECKILL_ORDERS_TOPIC="+topic, fmt.Sprintf("SECKILL_ORDER_GROUP=bench-drain-%d", time.Now().UnixNano()),
		"SECKILL_KEY_PREFIX="+prefix, "SECKILL_ADMIN_ADDR="+adminAddr, "SECKILL_LOG_LEVEL=warn")
}

// take has the gate accept n orders of voucher (its whole stock), from as
// many buyers at once as the api's bench crowd, and is their events.
func take(ctx context.Context, store *gate.Store, voucher int64, n int) ([]order.Event, error) {
	now := time.Now()
	if err := store.Warm(ctx, voucher, int64(n), now.Add(-time.Minute), now.Add(time.Hour)); err != nil {
		return nil, fmt.Errorf("drain sale: %w", err)
	}
	base := time.Now().UnixNano() & (1<<40 - 1) << 20
	events := make([]order.Event, n)
	var next atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	fail := func(err error) {
		stop.Store(true)
		select {
		case errs <- fmt.Errorf("drain sale: %w", err):
		default:
		}
	}
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n) && !stop.Load(); i = next.Add(1) - 1 {
				if err := ctx.Err(); err != nil {
					fail(err)
					return
				}
				user, id := 50_000_000+i, base+i
				d, err := store.Try(ctx, voucher, user, id)
				if err == nil && d.Err != nil {
					err = fmt.Errorf("order %d of %d: the gate answered %w", i+1, n, d.Err)
				}
				if err != nil {
					fail(err)
					return
				}
				events[i] = order.Event{OrderID: id, UserID: user, VoucherID: voucher, AcceptedAt: d.AcceptedAt.UnixMilli()}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return nil, err
	default:
		return events, nil
	}
}

// deleteKeys removes every key a writer under prefix may have made, on
// every master: the sale's, and the order-id counters of a reconcile
// (idgen's "id:<prefix>order:<day>", its stamp "{id:...}:epoch").
func deleteKeys(ctx context.Context, rdb redis.UniversalClient, prefix string) error {
	var errs []error
	for _, pattern := range []string{prefix + "*", "id:" + prefix + "*", "{id:" + prefix + "*"} {
		errs = append(errs, redisconn.Scan(ctx, rdb, pattern, func(ctx context.Context, key string) error {
			return rdb.Unlink(ctx, key).Err()
		}))
	}
	return errors.Join(errs...)
}

package orderdb_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/mysqldb"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/orderdb"
	"github.com/seckill/seckill/internal/testsupport"
)

// One order-writer transaction of 2,000 new orders of one voucher: the
// unit of the drain, without Kafka around it.
func BenchmarkApplyBatchOf2000(b *testing.B) {
	benchApply(b, testsupport.MustMySQL(b), 2000)
}

// The same transaction on one MariaDB and on the Galera cluster (through
// its HAProxy), by batch size: what a commit's certification by the three
// nodes costs per batch, and the batch size that pays for it. ms/batch is
// the whole transaction, the commit's round of certification in it.
func BenchmarkApplyOneServerAgainstTheCluster(b *testing.B) {
	for _, where := range []string{"one MariaDB", "Galera"} {
		for _, batch := range []int{20, 200, 2000} {
			b.Run(fmt.Sprintf("%s/batch=%d", where, batch), func(b *testing.B) {
				if where == "Galera" {
					benchApply(b, testsupport.MustMySQLCluster(b), batch)
					return
				}
				benchApply(b, testsupport.MustMySQL(b), batch)
			})
		}
	}
}

func benchApply(b *testing.B, m *testsupport.MySQL, batch int) {
	ctx := context.Background()
	if _, err := m.DB.Exec("INSERT INTO tb_voucher (id, shop_id, title, pay_value, actual_value, type) VALUES (1, 1, 'v', 100, 200, 1)"); err != nil {
		b.Fatal(err)
	}
	if _, err := m.DB.Exec("INSERT INTO tb_seckill_voucher (voucher_id, stock, begin_time, end_time) VALUES (1, ?, NOW(), NOW() + INTERVAL 1 DAY)", 1<<30); err != nil {
		b.Fatal(err)
	}
	next := int64(0)
	events := make([]order.Event, batch)
	for b.Loop() {
		now := time.Now().UnixMilli()
		for i := range events {
			next++
			events[i] = order.Event{OrderID: next, UserID: next, VoucherID: 1, AcceptedAt: now}
		}
		out, err := orderdb.Apply(ctx, m.DB, events)
		if err != nil || out.Inserted != batch {
			b.Fatalf("batch: %+v %v, want %d inserted", out, err, batch)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "orders/s")
	b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/batch")
}

// The reconcile's truth (SaleTruth, a voucher of 200 orders) on the
// Galera cluster through HAProxy, read plainly and causally (the
// programs' pools: wsrep_sync_wait = 1, mysqldb.Open): what waiting for
// the node to have applied every certified write costs a read when it
// is not behind.
func BenchmarkSaleTruthOnTheClusterCausalOrNot(b *testing.B) {
	m := testsupport.MustMySQLCluster(b)
	ctx := context.Background()
	if _, err := m.DB.Exec("INSERT INTO tb_voucher (id, shop_id, title, pay_value, actual_value, type) VALUES (1, 1, 'v', 100, 200, 1)"); err != nil {
		b.Fatal(err)
	}
	if _, err := m.DB.Exec("INSERT INTO tb_seckill_voucher (voucher_id, stock, begin_time, end_time) VALUES (1, 1000, NOW(), NOW() + INTERVAL 1 DAY)"); err != nil {
		b.Fatal(err)
	}
	events := make([]order.Event, 200)
	for i := range events {
		events[i] = order.Event{OrderID: int64(i + 1), UserID: int64(i + 1), VoucherID: 1, AcceptedAt: time.Now().UnixMilli()}
	}
	if _, err := orderdb.Apply(ctx, m.DB, events); err != nil {
		b.Fatal(err)
	}
	// The programs' settings without the causal reads.
	cfg, err := mysqldb.Config(m.DSN)
	if err != nil {
		b.Fatal(err)
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		b.Fatal(err)
	}
	plain := sql.OpenDB(connector)
	defer plain.Close()
	for _, c := range []struct {
		name string
		db   *sql.DB
	}{{"plain", plain}, {"causal", m.DB}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				truth, ok, err := (&orderdb.Orders{DB: c.db}).SaleTruth(ctx, 1, nil)
				if err != nil || !ok || len(truth.Holders) != len(events) {
					b.Fatalf("truth: %d holders, %v %v", len(truth.Holders), ok, err)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/read")
		})
	}
}

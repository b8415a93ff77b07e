package orderdb_test

import (
	"context"
	"fmt"
	"testing"
	"time"

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

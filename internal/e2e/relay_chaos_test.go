//go:build chaos

package e2e

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/idgen"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
)

// MariaDB stops for 15 s under two order-writers during a sale of 50,000
// orders: fifteen times the relay's age, sixty of its passes. The writers
// fall behind by the whole backlog; their relays must not take the backlog
// for lost orders and republish it: once MariaDB is back every order
// lands, and the orders topic holds at most 1 % more events than orders
// were accepted.
func TestChaosRelayDoesNotAmplifyABacklog(t *testing.T) {
	const orders, outage = 50_000, 15 * time.Second
	s := stack{testsupport.MustRedis(t), testsupport.MustMySQL(t), testsupport.MustKafka(t)}
	t.Cleanup(func() { stackCtl(t, "up") })
	topic, dlq := s.kafka.MustTopic(t, 6), s.kafka.MustTopic(t, 1)
	env := s.env()
	env["SECKILL_ORDERS_TOPIC"], env["SECKILL_ORDERS_DLQ_TOPIC"] = topic, dlq
	env["SECKILL_ORDER_GROUP"] = testsupport.Group(t)
	env["SECKILL_LOG_LEVEL"] = "warn"
	// An eager relay: without the writers' progress to go by it would
	// republish the backlog every second.
	env["SECKILL_RELAY_AGE"] = "1s"
	env["SECKILL_RELAY_INTERVAL"] = "250ms"
	bin := testsupport.MustBuild(t, "../../cmd/order-writer")
	for range 2 {
		env["SECKILL_ADMIN_ADDR"] = testsupport.FreeAddr(t)
		testsupport.Start(t, bin, env)
		testsupport.Eventually(t, "http://"+env["SECKILL_ADMIN_ADDR"]+"/readyz", 200, 30*time.Second)
	}

	const voucher = 71
	ctx := context.Background()
	s.mysql.MustSeedVoucher(t, voucher, orders)
	store := saletest.New(s.redis.Client, s.redis.Prefix)
	if err := store.Gate.Warm(ctx, voucher, orders, time.Now().Add(-time.Minute), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	pub := broker.NewOrderPublisher(broker.NewProducer(s.kafka.Brokers, topic, 0), 10*time.Second)
	t.Cleanup(func() { pub.Close() })
	svc := &order.Service{IDs: idgen.New(s.redis.Client, s.redis.Key("order"), 1000), Gate: store.Gate, Publisher: pub}
	var next atomic.Int64
	var accepted atomic.Int64
	sell := func(n int64) {
		var wg sync.WaitGroup
		last := next.Load() + n
		for range 64 {
			wg.Go(func() {
				for u := next.Add(1); u <= last; u = next.Add(1) {
					if _, err := svc.Place(ctx, u, voucher); err != nil {
						t.Errorf("user %d: %v", u, err)
						continue
					}
					accepted.Add(1)
				}
			})
		}
		wg.Wait()
		next.Store(last)
	}

	sell(orders / 5)
	stackCtl(t, "stop", "mariadb")
	down := time.Now()
	sell(orders - orders/5)
	time.Sleep(outage - time.Since(down)) // the outage's length is the point
	t.Logf("MariaDB down for %v; %d events in the topic for %d accepted orders", time.Since(down).Round(time.Second), topicEvents(t, s, topic), accepted.Load())
	stackCtl(t, "up")

	testsupport.Wait(t, 5*time.Minute, "every order in MySQL", func() bool {
		var n int64
		return s.mysql.DB.QueryRow("SELECT COUNT(*) FROM tb_voucher_order WHERE voucher_id = ?", voucher).Scan(&n) == nil && n == orders
	})
	got := s.mysql.MustSaleState(t, voucher)
	events := topicEvents(t, s, topic)
	t.Logf("after the outage: %d orders, %d failures, stock %d; %d events for %d accepted orders (%.2f %% more)",
		got.Orders, got.Failures, got.Stock, events, accepted.Load(), 100*float64(events-accepted.Load())/float64(accepted.Load()))
	if accepted.Load() != orders || got != (testsupport.SaleState{Orders: orders, Failures: 0, Stock: 0}) {
		t.Fatalf("MySQL %+v for %d accepted orders, want every one confirmed", got, accepted.Load())
	}
	if events > orders+orders/100 {
		t.Fatalf("the orders topic received %d events for %d orders: the relays republished a backlog that was not lost", events, orders)
	}
}

// topicEvents is how many events topic has received: the sum of its
// partitions' end offsets.
func topicEvents(t *testing.T, s stack, topic string) int64 {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(s.kafka.Brokers...), Timeout: 10 * time.Second}
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for p := range 6 {
		req.Topics[topic] = append(req.Topics[topic], kafka.LastOffsetOf(p))
	}
	res, err := client.ListOffsets(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, p := range res.Topics[topic] {
		if p.Error != nil {
			t.Fatal(p.Error)
		}
		total += p.LastOffset
	}
	return total
}

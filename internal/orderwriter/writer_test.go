package orderwriter_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/idgen"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/orderwriter"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
)

type pipeline struct {
	m      *testsupport.MySQL
	r      *testsupport.Redis
	k      *testsupport.Kafka
	store  *saletest.Sales
	topic  string
	dlq    string
	group  string
	pub    *broker.OrderPublisher
	logger *slog.Logger
	admin  string // the running writer's admin listener
	// writerEnv overrides the writer's configuration.
	writerEnv map[string]string
}

func newPipeline(t *testing.T) *pipeline {
	p := &pipeline{m: testsupport.MustMySQL(t), r: testsupport.MustRedis(t), k: testsupport.MustKafka(t), logger: slog.New(slog.DiscardHandler)}
	p.store = saletest.New(p.r.Client, p.r.Prefix)
	p.topic, p.dlq, p.group = p.k.MustTopic(t, 3), p.k.MustTopic(t, 1), testsupport.Group(t)
	p.pub = broker.NewOrderPublisher(broker.NewProducer(p.k.Brokers, p.topic, 0), 5*time.Second)
	t.Cleanup(func() { _ = p.pub.Close() })
	return p
}

// startWriter runs the order-writer program (app.OrderWriter, as
// cmd/order-writer does) in the test until the returned stop.
func (p *pipeline) startWriter(t *testing.T) (stop func()) {
	vars := map[string]string{
		"SECKILL_MYSQL_DSN": p.m.DSN, "SECKILL_KAFKA_BROKERS": strings.Join(p.k.Brokers, ","),
		"SECKILL_KEY_PREFIX": p.r.Prefix, "SECKILL_ORDERS_TOPIC": p.topic, "SECKILL_ORDERS_DLQ_TOPIC": p.dlq,
		"SECKILL_ORDER_GROUP": p.group, "SECKILL_ADMIN_ADDR": "127.0.0.1:0", "SECKILL_ORDER_BATCH_SIZE": "100",
		"SECKILL_RELAY_INTERVAL": "1h",
	}
	maps.Copy(vars, p.r.Env())
	maps.Copy(vars, p.writerEnv)
	cfg, err := config.LoadOrderWriter(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	w := app.NewOrderWriter(cfg, io.Discard)
	if err := w.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	p.admin = "http://" + w.AdminAddr()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		if err := w.Close(); err != nil {
			t.Errorf("writer: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func (p *pipeline) waitOrders(t *testing.T, voucher int64, want int64) {
	t.Helper()
	var c testsupport.SaleState
	if !testsupport.PollEvery(30*time.Second, 50*time.Millisecond, func() bool {
		if c = p.m.MustSaleState(t, voucher); c.Orders > want {
			t.Fatalf("%d orders, want %d", c.Orders, want)
		}
		return c.Orders == want
	}) {
		t.Fatalf("%d orders after 30s, want %d", c.Orders, want)
	}
}

// waitConfirmed waits for the writer to confirm every reservation of
// voucher: it does so right after the MySQL commit.
func (p *pipeline) waitConfirmed(t *testing.T, voucher int64) {
	t.Helper()
	key := p.store.KeysOf(voucher).Pending
	var n int64
	if !testsupport.Poll(10*time.Second, func() bool { n = p.r.Client.HLen(context.Background(), key).Val(); return n == 0 }) {
		t.Fatalf("%d reservations still pending 10 s after MySQL had the orders: the relay would bring them back", n)
	}
}

func (p *pipeline) warm(t *testing.T, voucher, stock int64) {
	p.m.MustSeedVoucher(t, voucher, stock)
	if err := p.store.Gate.Warm(context.Background(), voucher, stock, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
}

// Accepted orders land in MySQL, their reservations are confirmed, an
// undecodable event goes to the dead-letter topic with its reason, and the
// offsets are committed after the batch.
func TestWriterSettlesBatchesAndDeadLetters(t *testing.T) {
	p := newPipeline(t)
	ctx := context.Background()
	voucher := 1 + rand.Int64N(1<<30)
	p.warm(t, voucher, 10)
	svc := &order.Service{Gate: p.store.Gate, IDs: idgen.New(p.r.Client, p.r.Key("order"), 10), Publisher: p.pub, Logger: p.logger}
	for u := range int64(5) {
		if _, err := svc.Place(ctx, u+1, voucher); err != nil {
			t.Fatal(err)
		}
	}
	w := broker.NewWriter(p.k.Brokers, p.topic)
	defer w.Close()
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("x"), Value: []byte("not an order")}); err != nil {
		t.Fatal(err)
	}

	stop := p.startWriter(t)
	p.waitOrders(t, voucher, 5)
	p.waitConfirmed(t, voucher)
	if got := p.m.MustSaleState(t, voucher); got.Stock != 5 {
		t.Fatalf("MySQL stock %d, want 5", got.Stock)
	}

	m := p.k.MustFirstMessage(t, p.dlq)
	if string(m.Value) != "not an order" || broker.Header(m, broker.HeaderError) == "" || broker.Header(m, broker.HeaderTopic) != p.topic ||
		broker.Header(m, broker.HeaderOffset) == "" || broker.Attempt(m) != 1 {
		t.Fatalf("dead letter %q with headers %v", m.Value, m.Headers)
	}

	// Everything gets committed: the group's offsets cover all 6 messages.
	var committed int64
	testsupport.PollEvery(10*time.Second, 50*time.Millisecond, func() bool { committed = committedTotal(t, p); return committed == 6 })
	stop()
	if committed != 6 {
		t.Fatalf("committed offsets sum to %d, want 6", committed)
	}
}

// An order whose id the generator repeated (as after Redis lost its last
// writes) is not taken for a redelivery and dropped: it goes to the
// dead-letter topic with the reason, its reservation is settled, its offset
// committed, and the order that held the id first is untouched.
func TestWriterDeadLettersAnOrderIDCollision(t *testing.T) {
	p := newPipeline(t)
	ctx := context.Background()
	voucher := 1 + rand.Int64N(1<<30)
	p.warm(t, voucher, 10)
	svc := &order.Service{Gate: p.store.Gate, IDs: idgen.New(p.r.Client, p.r.Key("order"), 10), Publisher: p.pub, Logger: p.logger}
	held, err := svc.Place(ctx, 1, voucher)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Place(ctx, 2, voucher); err != nil {
		t.Fatal(err)
	}
	stop := p.startWriter(t)
	defer stop()
	p.waitOrders(t, voucher, 2)

	d, err := p.store.Gate.Try(ctx, voucher, 3, held)
	if err != nil || d.Err != nil {
		t.Fatalf("gate for the repeated id: %+v %v", d, err)
	}
	repeated := order.Event{OrderID: held, UserID: 3, VoucherID: voucher, AcceptedAt: d.AcceptedAt.UnixMilli()}
	if err := p.pub.Publish(ctx, repeated); err != nil {
		t.Fatal(err)
	}

	m := p.k.MustFirstMessage(t, p.dlq)
	parked, err := broker.DecodeOrder(m.Value)
	if err != nil || parked != repeated {
		t.Fatalf("dead letter %q (%v), want the repeated order %+v", m.Value, err, repeated)
	}
	if broker.Header(m, broker.HeaderError) != orderwriter.ErrIDCollision.Error() || broker.Attempt(m) != 1 {
		t.Fatalf("dead letter headers %v, want the id collision", m.Headers)
	}

	var owner int64
	if err := p.m.DB.QueryRow("SELECT user_id FROM tb_voucher_order WHERE id = ?", held).Scan(&owner); err != nil || owner != 1 {
		t.Fatalf("order %d belongs to user %d (%v), want 1", held, owner, err)
	}
	if got := p.m.MustSaleState(t, voucher); got.Orders != 2 || got.Stock != 8 {
		t.Fatalf("MySQL after the collision: %+v, want 2 orders and stock 8", got)
	}
	var committed int64
	testsupport.PollEvery(10*time.Second, 50*time.Millisecond, func() bool { committed = committedTotal(t, p); return committed == 3 })
	if committed != 3 {
		t.Fatalf("committed offsets sum to %d, want 3", committed)
	}
	p.waitConfirmed(t, voucher)
}

func committedTotal(t *testing.T, p *pipeline) int64 {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(p.k.Brokers...), Timeout: 10 * time.Second}
	res, err := client.OffsetFetch(context.Background(), &kafka.OffsetFetchRequest{GroupID: p.group, Topics: map[string][]int{p.topic: {0, 1, 2}}})
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, part := range res.Topics[p.topic] {
		if part.CommittedOffset > 0 {
			total += part.CommittedOffset
		}
	}
	return total
}

// One bad event among good ones must not stall its partition. The first is
// the event an outside read found (acceptedAt 1 ms: MariaDB refuses the row
// with 1292 and the batch was retried forever); the second passes every
// check at decode but breaks a constraint of the database's own (here a
// CHECK a DBA added), which only the row-by-row path can pin to it. Either
// goes to the dead-letter topic with its error; every valid order around it
// is confirmed.
func TestWriterIsolatesAnEventMySQLRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, p *pipeline)
		bad   func(voucher int64) string
		error string // in the dead letter's error header
	}{
		{"AcceptedAtOutOfRange", nil,
			func(voucher int64) string {
				return fmt.Sprintf(`{"orderId":"5","userId":1,"voucherId":%d,"acceptedAt":1}`, voucher)
			}, "acceptedAt"},
		{"RefusedByAConstraint", func(t *testing.T, p *pipeline) {
			if _, err := p.m.DB.Exec("ALTER TABLE tb_voucher_order ADD CONSTRAINT chk_not_666 CHECK (user_id <> 666)"); err != nil {
				t.Fatal(err)
			}
		}, func(voucher int64) string {
			return fmt.Sprintf(`{"orderId":"5","userId":666,"voucherId":%d,"acceptedAt":%d}`, voucher, time.Now().UnixMilli())
		}, "chk_not_666"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPipeline(t)
			ctx := context.Background()
			voucher := 1 + rand.Int64N(1<<30)
			p.warm(t, voucher, 10)
			if tc.setup != nil {
				tc.setup(t, p)
			}
			svc := &order.Service{Gate: p.store.Gate, IDs: idgen.New(p.r.Client, p.r.Key("order"), 10), Publisher: p.pub, Logger: p.logger}
			place := func(users ...int64) {
				for _, u := range users {
					if _, err := svc.Place(ctx, u, voucher); err != nil {
						t.Fatal(err)
					}
				}
			}
			place(1, 2)
			// Keyed like an order event: the same partition as the sale's.
			w := broker.NewWriter(p.k.Brokers, p.topic)
			defer w.Close()
			bad := tc.bad(voucher)
			if err := w.WriteMessages(ctx, kafka.Message{Key: []byte(strconv.FormatInt(voucher, 10)), Value: []byte(bad)}); err != nil {
				t.Fatal(err)
			}
			place(3, 4, 5)

			p.startWriter(t)
			p.waitOrders(t, voucher, 5)
			p.waitConfirmed(t, voucher)
			if got := p.m.MustSaleState(t, voucher); got.Stock != 5 {
				t.Fatalf("MySQL stock %d, want 5", got.Stock)
			}
			m := p.k.MustFirstMessage(t, p.dlq)
			if string(m.Value) != bad || !strings.Contains(broker.Header(m, broker.HeaderError), tc.error) ||
				broker.Header(m, broker.HeaderTopic) != p.topic || broker.Header(m, broker.HeaderOffset) == "" || broker.Attempt(m) != 1 {
				t.Fatalf("dead letter %q with headers %v", m.Value, m.Headers)
			}
		})
	}
}

// A batch whose Redis froze (SIGSTOP: no answer, no closed connection)
// goes on without its Redis steps. Each of them (the statuses, the
// reservations, the check) waited out the production client's read
// timeout and its retries, seconds in all, while the batch held its
// offsets, which a reconcile after a failover waits for. Once Redis
// answers again the steps are done: the reservation is confirmed.
func TestABatchGoesOnPastAFrozenRedis(t *testing.T) {
	m := testsupport.MustMySQL(t)
	r, proc := testsupport.MustPrivateRedis(t)
	store := saletest.New(testsupport.MustProductionClient(t, r.Addr), "")
	ctx := context.Background()
	voucher := 1 + rand.Int64N(1<<30)
	m.MustSeedVoucher(t, voucher, 10)
	if err := store.Gate.Warm(ctx, voucher, 10, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	const orderID, user = 7001, 42
	if d, err := store.Gate.Try(ctx, voucher, user, orderID); err != nil || d.Err != nil {
		t.Fatalf("the order's reservation: %v, %v", d.Err, err)
	}
	w := &orderwriter.Writer{DB: m.DB, Reservations: store, Records: store.Records, Sale: store.Repair, Logger: slog.New(slog.DiscardHandler)}
	msg := kafka.Message{Topic: "orders", Key: []byte(strconv.FormatInt(voucher, 10)),
		Value: fmt.Appendf(nil, `{"orderId":"%d","userId":%d,"voucherId":%d,"acceptedAt":%d}`, orderID, user, voucher, time.Now().UnixMilli())}

	if err := proc.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = proc.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	handled := make(chan error, 1)
	start := time.Now()
	go func() { handled <- w.Handle(ctx, []kafka.Message{msg}) }()
	select {
	case err := <-handled:
		if err != nil {
			t.Fatalf("the batch: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the batch did not end in 30 s with its Redis frozen")
	}
	took := time.Since(start)
	t.Logf("the batch ended %v after it began, its Redis frozen", took)
	// Its steps alone took 3 s and more before; 2 s leaves the loaded
	// machine ten times settleWait.
	if took > 2*time.Second {
		t.Fatalf("the batch took %v with its Redis frozen: it waited for its Redis steps", took)
	}
	if got := m.MustSaleState(t, voucher); got.Orders != 1 {
		t.Fatalf("MySQL holds %d orders of voucher %d; want the batch's 1", got.Orders, voucher)
	}
	resume()
	testsupport.Wait(t, 30*time.Second, "the reservation confirmed once Redis answers", func() bool {
		n, err := r.Client.HLen(ctx, store.KeysOf(voucher).Pending).Result()
		return err == nil && n == 0
	})
}

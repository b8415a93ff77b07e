package order_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/idgen"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/seckill"
	"github.com/seckill/seckill/internal/testsupport"
)

type pipeline struct {
	m      *testsupport.MySQL
	r      *testsupport.Redis
	k      *testsupport.Kafka
	store  *seckill.Store
	topic  string
	dlq    string
	group  string
	pub    *seckill.Publisher
	logger *slog.Logger
}

func newPipeline(t *testing.T) *pipeline {
	p := &pipeline{m: testsupport.MustMySQL(t), r: testsupport.MustRedis(t), k: testsupport.MustKafka(t), logger: slog.New(slog.DiscardHandler)}
	p.store = seckill.NewStore(p.r.Client, p.r.Prefix)
	p.topic, p.dlq, p.group = p.k.MustTopic(t, 3), p.k.MustTopic(t, 1), testsupport.Group(t)
	p.pub = seckill.NewPublisher(broker.NewWriter(p.k.Brokers, p.topic), 5*time.Second)
	t.Cleanup(func() { _ = p.pub.Close() })
	return p
}

// startWriter runs an order-writer in the test until the returned stop.
func (p *pipeline) startWriter(t *testing.T) (stop func()) {
	reader := kafka.NewReader(kafka.ReaderConfig{Brokers: p.k.Brokers, GroupID: p.group, Topic: p.topic,
		StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond})
	dlq := broker.NewWriter(p.k.Brokers, p.dlq)
	w := &order.Writer{Reader: reader, DLQ: dlq, DB: p.m.DB, Store: p.store, BatchSize: 100, BatchWait: 20 * time.Millisecond, Logger: p.logger}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("writer: %v", err)
		}
		reader.Close()
		dlq.Close()
	}
	t.Cleanup(stop)
	return stop
}

func (p *pipeline) waitOrders(t *testing.T, voucher int64, want int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c := state(t, p.m, voucher)
		if c.orders == want {
			return
		}
		if c.orders > want {
			t.Fatalf("%d orders, want %d", c.orders, want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d orders after 30s, want %d", c.orders, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *pipeline) warm(t *testing.T, voucher, stock int64) {
	seedVoucher(t, p.m, voucher, stock)
	if err := p.store.Warm(context.Background(), voucher, stock, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
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
	svc := &seckill.Service{Store: p.store, IDs: idgen.New(p.r.Client, p.r.Key("order"), 10), Publisher: p.pub, Logger: p.logger}
	for u := range int64(5) {
		if _, err := svc.Order(ctx, u+1, voucher); err != nil {
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
	if n := p.r.Client.HLen(ctx, p.store.KeysOf(voucher).Pending).Val(); n != 0 {
		t.Fatalf("%d reservations still pending after the writer committed", n)
	}
	if got := state(t, p.m, voucher); got.stock != 5 {
		t.Fatalf("MySQL stock %d, want 5", got.stock)
	}

	m, headers := p.firstDeadLetter(t)
	if string(m.Value) != "not an order" || headers["error"] == "" || headers["topic"] != p.topic || headers["offset"] == "" {
		t.Fatalf("dead letter %q with headers %v", m.Value, headers)
	}

	// Everything gets committed: the group's offsets cover all 6 messages.
	committed := committedTotal(t, p)
	for deadline := time.Now().Add(10 * time.Second); committed != 6 && time.Now().Before(deadline); committed = committedTotal(t, p) {
		time.Sleep(50 * time.Millisecond)
	}
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
	svc := &seckill.Service{Store: p.store, IDs: idgen.New(p.r.Client, p.r.Key("order"), 10), Publisher: p.pub, Logger: p.logger}
	held, err := svc.Order(ctx, 1, voucher)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Order(ctx, 2, voucher); err != nil {
		t.Fatal(err)
	}
	stop := p.startWriter(t)
	defer stop()
	p.waitOrders(t, voucher, 2)

	d, err := p.store.Try(ctx, voucher, 3, held)
	if err != nil || d.Err != nil {
		t.Fatalf("gate for the repeated id: %+v %v", d, err)
	}
	repeated := seckill.OrderEvent{OrderID: held, UserID: 3, VoucherID: voucher, AcceptedAt: d.AcceptedAt.UnixMilli()}
	if err := p.pub.Publish(ctx, repeated); err != nil {
		t.Fatal(err)
	}

	m, headers := p.firstDeadLetter(t)
	parked, err := seckill.DecodeOrderEvent(m.Value)
	if err != nil || parked != repeated {
		t.Fatalf("dead letter %q (%v), want the repeated order %+v", m.Value, err, repeated)
	}
	if !strings.Contains(headers["error"], "held by another order") {
		t.Fatalf("dead letter reason %q", headers["error"])
	}

	var owner int64
	if err := p.m.DB.QueryRow("SELECT user_id FROM tb_voucher_order WHERE id = ?", held).Scan(&owner); err != nil || owner != 1 {
		t.Fatalf("order %d belongs to user %d (%v), want 1", held, owner, err)
	}
	if got := state(t, p.m, voucher); got.orders != 2 || got.stock != 8 {
		t.Fatalf("MySQL after the collision: %+v, want 2 orders and stock 8", got)
	}
	committed := committedTotal(t, p)
	for deadline := time.Now().Add(10 * time.Second); committed != 3 && time.Now().Before(deadline); committed = committedTotal(t, p) {
		time.Sleep(50 * time.Millisecond)
	}
	if committed != 3 {
		t.Fatalf("committed offsets sum to %d, want 3", committed)
	}
	if n := p.r.Client.HLen(ctx, p.store.KeysOf(voucher).Pending).Val(); n != 0 {
		t.Fatalf("%d reservations still pending: the relay would bring the collided order back forever", n)
	}
}

// firstDeadLetter reads the dead-letter topic's first message and its
// headers.
func (p *pipeline) firstDeadLetter(t *testing.T) (kafka.Message, map[string]string) {
	t.Helper()
	dl := kafka.NewReader(kafka.ReaderConfig{Brokers: p.k.Brokers, Topic: p.dlq, Partition: 0, MaxWait: 100 * time.Millisecond})
	defer dl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := dl.ReadMessage(ctx)
	if err != nil {
		t.Fatalf("dead-letter topic: %v", err)
	}
	headers := map[string]string{}
	for _, h := range m.Headers {
		headers[h.Key] = string(h.Value)
	}
	return m, headers
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

type failingPublisher struct{}

func (failingPublisher) Publish(context.Context, ...seckill.OrderEvent) error {
	return errors.New("injected: the API died before the publish")
}

// The API takes the unit and the reservation but never publishes (it died,
// or the publish failed): the relay publishes the reservation once it is
// old enough, and the order ends confirmed.
func TestRelayDeliversAnUnpublishedOrder(t *testing.T) {
	p := newPipeline(t)
	ctx := context.Background()
	voucher := 1 + rand.Int64N(1<<30)
	p.warm(t, voucher, 3)
	svc := &seckill.Service{Store: p.store, IDs: idgen.New(p.r.Client, p.r.Key("order"), 10), Publisher: failingPublisher{}, Logger: p.logger}
	orderID, err := svc.Order(ctx, 42, voucher)
	var notPublished *seckill.NotPublishedError
	if !errors.As(err, &notPublished) || notPublished.OrderID != orderID || orderID == 0 {
		t.Fatalf("order with a failing publisher: %d, %v", orderID, err)
	}
	relay := &seckill.Relay{Store: p.store, Publisher: p.pub, Age: time.Second, Interval: time.Hour, Batch: 100, Logger: p.logger}
	if n, err := relay.Scan(ctx); err != nil || n != 0 {
		t.Fatalf("relay on a fresh reservation: %d, %v; want it left alone", n, err)
	}
	p.startWriter(t)
	time.Sleep(relay.Age + 100*time.Millisecond)
	if n, err := relay.Scan(ctx); err != nil || n != 1 {
		t.Fatalf("relay: %d, %v; want 1 republished", n, err)
	}
	p.waitOrders(t, voucher, 1)
	st, ok, err := order.Lookup(ctx, p.m.DB, p.store, orderID, 42)
	if err != nil || !ok || st.Status != order.StatusConfirmed {
		t.Fatalf("lookup: %+v %v %v, want confirmed", st, ok, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.r.Client.HLen(ctx, p.store.KeysOf(voucher).Pending).Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the reservation was never confirmed")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A backlog larger than the relay's batch is republished in one scan.
func TestRelayDrainsMoreThanABatch(t *testing.T) {
	p := newPipeline(t)
	ctx := context.Background()
	voucher := 1 + rand.Int64N(1<<30)
	p.warm(t, voucher, 1000)
	svc := &seckill.Service{Store: p.store, IDs: idgen.New(p.r.Client, p.r.Key("order"), 100), Publisher: failingPublisher{}, Logger: p.logger}
	for u := range int64(250) {
		if _, err := svc.Order(ctx, u+1, voucher); err == nil {
			t.Fatal("the failing publisher published")
		}
	}
	// Age is far above the scan's duration on a slow machine, so the second
	// scan sees only what the first rescheduled, never a re-aged entry.
	const age = 2 * time.Second
	time.Sleep(age + 100*time.Millisecond)
	relay := &seckill.Relay{Store: p.store, Publisher: p.pub, Age: age, Interval: time.Hour, Batch: 100, Logger: p.logger}
	if n, err := relay.Scan(ctx); err != nil || n != 250 {
		t.Fatalf("one scan republished %d (%v), want all 250", n, err)
	}
	if n, err := relay.Scan(ctx); err != nil || n != 0 {
		t.Fatalf("an immediate second scan republished %d (%v), want 0 until Age passes again", n, err)
	}
}

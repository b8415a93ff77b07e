package gate_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/gate"
	"github.com/seckill/seckill/internal/idgen"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/testsupport"
)

type failingPublisher struct{}

func (failingPublisher) Publish(context.Context, ...order.Event) error {
	return errors.New("injected: the API died before the publish")
}

type relayRig struct {
	r     *testsupport.Redis
	store *gate.Store
	topic string
	k     *testsupport.Kafka
	pub   *broker.OrderPublisher
	svc   *order.Service
}

// newRelayRig is a warmed voucher whose orders are never published.
func newRelayRig(t *testing.T, stock int64) (*relayRig, int64) {
	k := testsupport.MustKafka(t)
	rig := &relayRig{k: k, topic: k.MustTopic(t, 1)}
	var voucher int64
	rig.r, rig.store, voucher = warmedVoucher(t, stock)
	rig.pub = broker.NewOrderPublisher(broker.NewWriter(k.Brokers, rig.topic), 5*time.Second)
	t.Cleanup(func() { _ = rig.pub.Close() })
	rig.svc = &order.Service{Gate: rig.store, IDs: idgen.New(rig.r.Client, rig.r.Key("order"), 100), Publisher: failingPublisher{},
		Logger: slog.New(slog.DiscardHandler)}
	return rig, voucher
}

func (rig *relayRig) relay(age time.Duration) *gate.Relay {
	return &gate.Relay{Store: rig.store, Publisher: rig.pub, Age: age, Interval: time.Hour, Batch: 100, Logger: slog.New(slog.DiscardHandler)}
}

// The API takes the unit and the reservation but never publishes (it died,
// or the publish failed): the relay leaves a fresh reservation alone and
// publishes it once it is old enough, as the event the API would have sent.
func TestRelayPublishesAnUnpublishedOrder(t *testing.T) {
	rig, voucher := newRelayRig(t, 3)
	ctx := context.Background()
	orderID, err := rig.svc.Place(ctx, 42, voucher)
	e, ok := apperr.As(err)
	if !errors.Is(err, order.ErrNotPublished) || orderID == 0 || !ok || e.Data == nil {
		t.Fatalf("order with a failing publisher: %d, %v; want ErrNotPublished carrying the id", orderID, err)
	}
	relay := rig.relay(time.Second)
	if n, err := relay.Scan(ctx); err != nil || n != 0 {
		t.Fatalf("relay on a fresh reservation: %d, %v; want it left alone", n, err)
	}
	time.Sleep(relay.Age + 100*time.Millisecond)
	if n, err := relay.Scan(ctx); err != nil || n != 1 {
		t.Fatalf("relay: %d, %v; want 1 republished", n, err)
	}
	reader := kafka.NewReader(kafka.ReaderConfig{Brokers: rig.k.Brokers, Topic: rig.topic, Partition: 0, MaxWait: 100 * time.Millisecond})
	defer reader.Close()
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	m, err := reader.ReadMessage(rctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := broker.DecodeOrder(m.Value)
	if err != nil || got.OrderID != orderID || got.UserID != 42 || got.VoucherID != voucher {
		t.Fatalf("relayed %+v (%v), want order %d of user 42", got, err, orderID)
	}
	if pending, ok, err := rig.store.FindReservation(ctx, orderID); err != nil || !ok || pending != got {
		t.Fatalf("reservation after the relay: %+v %v %v; want it kept until the writer confirms %+v", pending, ok, err, got)
	}
}

// A backlog larger than the relay's batch is republished in one scan.
func TestRelayDrainsMoreThanABatch(t *testing.T) {
	rig, voucher := newRelayRig(t, 1000)
	ctx := context.Background()
	for u := range int64(250) {
		if _, err := rig.svc.Place(ctx, u+1, voucher); !errors.Is(err, order.ErrNotPublished) {
			t.Fatalf("order with a failing publisher: %v", err)
		}
	}
	// Age is far above the scan's duration on a slow machine, so the second
	// scan sees only what the first rescheduled, never a re-aged entry.
	const age = 2 * time.Second
	time.Sleep(age + 100*time.Millisecond)
	relay := rig.relay(age)
	if n, err := relay.Scan(ctx); err != nil || n != 250 {
		t.Fatalf("one scan republished %d (%v), want all 250", n, err)
	}
	if n, err := relay.Scan(ctx); err != nil || n != 0 {
		t.Fatalf("an immediate second scan republished %d (%v), want 0 until Age passes again", n, err)
	}
}

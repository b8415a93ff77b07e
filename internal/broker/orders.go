package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/telemetry"
)

// orderJSON is an order event on the wire. The order id is a string: a
// JavaScript reader would lose a 64-bit integer.
type orderJSON struct {
	OrderID    int64 `json:"orderId,string"`
	UserID     int64 `json:"userId"`
	VoucherID  int64 `json:"voucherId"`
	AcceptedAt int64 `json:"acceptedAt"`
}

// OrderMessage is e as a Kafka message, keyed by voucher: a sale's events
// share a partition, so the producer sends them in one request per batch
// instead of one per partition (the broker's cost is per request), and
// one writer settles a voucher's orders, which all lock its stock row
// anyway.
func OrderMessage(e order.Event) kafka.Message {
	v, _ := json.Marshal(orderJSON{OrderID: e.OrderID, UserID: e.UserID, VoucherID: e.VoucherID, AcceptedAt: e.AcceptedAt})
	m := kafka.Message{Key: orderKey(e.VoucherID), Value: v}
	if e.Trace != "" {
		m.Headers = []kafka.Header{{Key: "traceparent", Value: []byte(e.Trace)}}
	}
	return m
}

func orderKey(voucherID int64) []byte { return strconv.AppendInt(nil, voucherID, 10) }

var _ order.Durability = OrderDurability{}

// OrderDurability is a Durability of the orders topic seen by voucher, as
// OrderMessage keys the events.
type OrderDurability struct{ Topic *Durability }

// Accepting says whether voucherID's partition takes a durable write.
func (d OrderDurability) Accepting(voucherID int64) bool {
	return d.Topic.Accepting(orderKey(voucherID))
}

// Failed makes voucherID's partition suspect.
func (d OrderDurability) Failed(voucherID int64) { d.Topic.Failed(orderKey(voucherID)) }

// The acceptance times an order row can hold: tb_voucher_order's
// TIMESTAMP columns end in January 2038, and no order of this project was
// accepted before 2020. An event outside them is no order that Redis's
// clock accepted: a bug, a broken clock, a bad replay.
var (
	EarliestAcceptance = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	LatestAcceptance   = time.Date(2038, 1, 19, 3, 14, 7, 0, time.UTC)
)

// DecodeOrder reads an order event and checks every field is in the range
// MySQL and the sale accept.
func DecodeOrder(b []byte) (order.Event, error) {
	var j orderJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return order.Event{}, fmt.Errorf("decode order event: %w", err)
	}
	if j.OrderID <= 0 || j.UserID <= 0 || j.VoucherID <= 0 {
		return order.Event{}, fmt.Errorf("decode order event: missing or non-positive orderId, userId or voucherId in %s", b)
	}
	if at := time.UnixMilli(j.AcceptedAt); at.Before(EarliestAcceptance) || at.After(LatestAcceptance) {
		return order.Event{}, fmt.Errorf("decode order event: acceptedAt %d is outside %s..%s",
			j.AcceptedAt, EarliestAcceptance.Format(time.RFC3339), LatestAcceptance.Format(time.RFC3339))
	}
	return order.Event{OrderID: j.OrderID, UserID: j.UserID, VoucherID: j.VoucherID, AcceptedAt: j.AcceptedAt}, nil
}

var _ order.Publisher = (*OrderPublisher)(nil)

// OrderPublisher sends order events to the orders topic and waits for
// every in-sync replica.
type OrderPublisher struct {
	p       *Producer
	timeout time.Duration
}

// NewOrderPublisher publishes with p, giving up after timeout.
func NewOrderPublisher(p *Producer, timeout time.Duration) *OrderPublisher {
	return &OrderPublisher{p: p, timeout: timeout}
}

// Publish writes events synchronously. Each message carries its order's
// trace context: the one the event keeps (a republished order), else the
// publish span's, a child of ctx's.
func (p *OrderPublisher) Publish(ctx context.Context, events ...order.Event) (err error) {
	var links []trace.Link
	for _, e := range events {
		if l, ok := telemetry.LinkTo(e.Trace); ok {
			links = append(links, l)
		}
	}
	ctx, span := tracer.Start(ctx, "send "+p.p.Topic(), trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithLinks(links...), messaging("send", p.p.Topic(), len(events)))
	defer func() { endSpan(span, err) }()
	msgs := make([]kafka.Message, len(events))
	for i, e := range events {
		msgs[i] = OrderMessage(e)
		if e.Trace == "" {
			InjectTrace(ctx, &msgs[i])
		}
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	if err := p.p.WriteMessages(ctx, msgs...); err != nil {
		return fmt.Errorf("publish %d order events to %s: %w", len(events), p.p.Topic(), err)
	}
	return nil
}

// Close waits for the events in flight and closes the producer.
func (p *OrderPublisher) Close() error { return p.p.Close() }

// Shutdown closes the producer within ctx (Producer.Shutdown).
func (p *OrderPublisher) Shutdown(ctx context.Context) error { return p.p.Shutdown(ctx) }

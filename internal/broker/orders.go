package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/order"
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
	v, _ := json.Marshal(orderJSON(e))
	return kafka.Message{Key: strconv.AppendInt(nil, e.VoucherID, 10), Value: v}
}

// DecodeOrder reads an order event and checks it is whole.
func DecodeOrder(b []byte) (order.Event, error) {
	var j orderJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return order.Event{}, fmt.Errorf("decode order event: %w", err)
	}
	if j.OrderID <= 0 || j.UserID <= 0 || j.VoucherID <= 0 || j.AcceptedAt <= 0 {
		return order.Event{}, fmt.Errorf("decode order event: missing or non-positive field in %s", b)
	}
	return order.Event(j), nil
}

var _ order.Publisher = (*OrderPublisher)(nil)

// OrderPublisher sends order events to the orders topic and waits for
// every in-sync replica.
type OrderPublisher struct {
	w       *kafka.Writer
	timeout time.Duration
}

// NewOrderPublisher publishes with w (NewWriter: RequireAll, short batch
// timeout), giving up after timeout.
func NewOrderPublisher(w *kafka.Writer, timeout time.Duration) *OrderPublisher {
	return &OrderPublisher{w: w, timeout: timeout}
}

// Publish writes events synchronously.
func (p *OrderPublisher) Publish(ctx context.Context, events ...order.Event) error {
	msgs := make([]kafka.Message, len(events))
	for i, e := range events {
		msgs[i] = OrderMessage(e)
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	if err := p.w.WriteMessages(ctx, msgs...); err != nil {
		return fmt.Errorf("publish %d order events to %s: %w", len(events), p.w.Topic, err)
	}
	return nil
}

// Close flushes and closes the writer.
func (p *OrderPublisher) Close() error { return p.w.Close() }

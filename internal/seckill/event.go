package seckill

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
)

// OrderEvent is what the API publishes for an accepted order: the
// reservation, as the order-writer needs it.
type OrderEvent struct {
	OrderID    int64 `json:"orderId,string"`
	UserID     int64 `json:"userId"`
	VoucherID  int64 `json:"voucherId"`
	AcceptedAt int64 `json:"acceptedAt"` // ms since 1970, Redis's clock
}

// Reservation is the event as the reservation it carries.
func (e OrderEvent) Reservation() Reservation {
	return Reservation{OrderID: e.OrderID, UserID: e.UserID, VoucherID: e.VoucherID, AcceptedAt: time.UnixMilli(e.AcceptedAt)}
}

// EventOf is the event of a reservation.
func EventOf(r Reservation) OrderEvent {
	return OrderEvent{OrderID: r.OrderID, UserID: r.UserID, VoucherID: r.VoucherID, AcceptedAt: r.AcceptedAt.UnixMilli()}
}

// Message is the event as a Kafka message, keyed by user so that one
// user's events keep their order.
func (e OrderEvent) Message() kafka.Message {
	v, _ := json.Marshal(e)
	return kafka.Message{Key: strconv.AppendInt(nil, e.UserID, 10), Value: v}
}

// DecodeOrderEvent reads an event and checks it is whole.
func DecodeOrderEvent(b []byte) (OrderEvent, error) {
	var e OrderEvent
	if err := json.Unmarshal(b, &e); err != nil {
		return OrderEvent{}, fmt.Errorf("decode order event: %w", err)
	}
	if e.OrderID <= 0 || e.UserID <= 0 || e.VoucherID <= 0 || e.AcceptedAt <= 0 {
		return OrderEvent{}, fmt.Errorf("decode order event: missing or non-positive field in %s", b)
	}
	return e, nil
}

// Publisher sends order events to the orders topic and waits for every
// in-sync replica.
type Publisher struct {
	w       *kafka.Writer
	timeout time.Duration
}

// NewPublisher publishes with w (broker.NewWriter: RequireAll, short batch
// timeout), giving up after timeout.
func NewPublisher(w *kafka.Writer, timeout time.Duration) *Publisher {
	return &Publisher{w: w, timeout: timeout}
}

// Publish writes events synchronously.
func (p *Publisher) Publish(ctx context.Context, events ...OrderEvent) error {
	msgs := make([]kafka.Message, len(events))
	for i, e := range events {
		msgs[i] = e.Message()
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	if err := p.w.WriteMessages(ctx, msgs...); err != nil {
		return fmt.Errorf("publish %d order events to %s: %w", len(events), p.w.Topic, err)
	}
	return nil
}

// Close flushes and closes the writer.
func (p *Publisher) Close() error { return p.w.Close() }

package broker_test

import (
	"context"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/testsupport"
)

// lateConn delivers what it reads from the broker late, as a broker or a
// network a little behind does: data that would arrive after the read
// deadline fails the read with a timeout, as the real deadline would.
type lateConn struct {
	net.Conn
	late time.Duration

	mu       sync.Mutex
	deadline time.Time
}

func (c *lateConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *lateConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *lateConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	deadline := c.deadline
	c.mu.Unlock()
	if n > 0 && !deadline.IsZero() && time.Now().Add(c.late).After(deadline) {
		return 0, os.ErrDeadlineExceeded
	}
	time.Sleep(c.late) // the lateness is the point: a broker or network a little behind
	return n, err
}

// idleFetches reads an empty partition for d through connections late by
// late, with the reader's MaxWait, and returns the reader's dials and
// errors.
func idleFetches(t *testing.T, k *testsupport.Kafka, topic string, maxWait, late, d time.Duration) kafka.ReaderStats {
	dialer := &kafka.Dialer{Timeout: 5 * time.Second, DialFunc: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &lateConn{Conn: c, late: late}, nil
	}}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: k.Brokers, Topic: topic, Partition: 0, MinBytes: 64 << 10, MaxBytes: 1 << 20,
		MaxWait: maxWait, Dialer: dialer})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if _, err := r.FetchMessage(ctx); err == nil {
		t.Fatal("a message on an empty topic")
	}
	return r.Stats()
}

// kafka-go's reader sets its read deadline at MaxWait but asks the broker
// to wait MaxWait less a margin (a quarter of it under one second): a fetch
// answered 12.5 ms late with a 50 ms wait times out and the reader dials
// again — 10 to 29 times per make bench run in the order-writer's log.
// broker.FetchMaxWait leaves the broker the wait we want and the reader a
// second beyond it.
func TestFetchesAnsweredLateDoNotReconnect(t *testing.T) {
	k := testsupport.MustKafka(t)
	topic := k.MustTopic(t, 1)
	const wait, late, run = 50 * time.Millisecond, 20 * time.Millisecond, 2 * time.Second

	plain := idleFetches(t, k, topic, wait, late, run)
	t.Logf("MaxWait %v, fetches answered %v late: %d fetches, %d dials, %d errors", wait, late, plain.Fetches, plain.Dials, plain.Errors)
	if plain.Dials < 3 {
		t.Fatalf("MaxWait %v with fetches %v late dialled %d times: the test does not make the broker late enough", wait, late, plain.Dials)
	}

	fixed := idleFetches(t, k, topic, broker.FetchMaxWait(wait), late, run)
	t.Logf("FetchMaxWait(%v), fetches answered %v late: %d fetches, %d dials, %d errors", wait, late, fixed.Fetches, fixed.Dials, fixed.Errors)
	if fixed.Dials != 1 || fixed.Errors != 0 {
		t.Fatalf("FetchMaxWait(%v) with fetches %v late: %d dials, %d errors; want one dial and no error", wait, late, fixed.Dials, fixed.Errors)
	}
	if fixed.Fetches < int64(run/(2*(wait+late))) {
		t.Fatalf("%d fetches in %v: the broker no longer answers after %v", fixed.Fetches, run, wait)
	}
}

package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/testsupport"
)

func newGroupReader(k *testsupport.Kafka, group, topic string) *kafka.Reader {
	return kafka.NewReader(kafka.ReaderConfig{
		Brokers:     k.Brokers,
		GroupID:     group,
		Topic:       topic,
		StartOffset: kafka.FirstOffset,
		MaxWait:     100 * time.Millisecond,
		// CommitInterval 0: CommitMessages returns once the broker has
		// stored the offset.
	})
}

// A message produced with acks from every in-sync replica is consumed in a
// group with FetchMessage/CommitMessages; a second reader of the same group
// starts right after the last committed offset.
func TestGroupResumesAfterCommittedOffset(t *testing.T) {
	k := testsupport.MustKafka(t)
	topic := k.MustTopic(t, 1)
	group := testsupport.Group(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	w := broker.NewWriter(k.Brokers, topic)
	defer w.Close()
	if w.RequiredAcks != kafka.RequireAll {
		t.Fatalf("writer acks = %v, want RequireAll", w.RequiredAcks)
	}
	const total, committed = 10, 4
	for i := range total {
		msg := kafka.Message{Key: []byte("user-1"), Value: fmt.Appendf(nil, "m%d", i)}
		if err := w.WriteMessages(ctx, msg); err != nil {
			t.Fatalf("write m%d: %v", i, err)
		}
	}

	first := newGroupReader(k, group, topic)
	for i := range committed {
		m, err := first.FetchMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Value) != fmt.Sprintf("m%d", i) {
			t.Fatalf("first reader got %s, want m%d", m.Value, i)
		}
		if err := first.CommitMessages(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	// Fetched but never committed: the next reader must see it again.
	if _, err := first.FetchMessage(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	second := newGroupReader(k, group, topic)
	defer second.Close()
	for i := committed; i < total; i++ {
		m, err := second.FetchMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Value) != fmt.Sprintf("m%d", i) {
			t.Fatalf("second reader got %s at offset %d, want m%d", m.Value, m.Offset, i)
		}
		if err := second.CommitMessages(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEnsureTopicsIsIdempotent(t *testing.T) {
	k := testsupport.MustKafka(t)
	topic := k.MustTopic(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := broker.EnsureTopics(ctx, k.Brokers, broker.Topic{Name: topic, Partitions: 3}); err != nil {
		t.Fatalf("second EnsureTopics: %v", err)
	}
	conn, err := kafka.DialContext(ctx, "tcp", k.Brokers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	parts, err := conn.ReadPartitions(topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 3 {
		t.Fatalf("partitions = %d, want 3", len(parts))
	}
}

func TestPingFailsOnAClosedPort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := broker.Ping(ctx, []string{testsupport.FreeAddr(t)}); err == nil {
		t.Fatal("Ping of a closed port succeeded")
	}
}

// A topic's end offsets are asked for right after the topic is created
// (a reconcile or the relay on a fresh deployment), while its partitions
// may still be electing their leader: a temporary answer is waited out,
// not returned as a failure.
func TestEndsOfATopicJustCreated(t *testing.T) {
	k := testsupport.MustKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 5 {
		p := &broker.Progress{Brokers: k.Brokers, Group: testsupport.Group(t), Topic: k.MustTopic(t, 6)}
		ends, err := p.Ends(ctx)
		if err != nil {
			t.Fatalf("end offsets of a new topic: %v", err)
		}
		if len(ends) != 6 {
			t.Fatalf("end offsets %v, want 6 partitions", ends)
		}
		for part, end := range ends {
			if end != 0 {
				t.Fatalf("partition %d of a new topic ends at %d, want 0", part, end)
			}
		}
	}
}

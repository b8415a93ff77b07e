package broker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/testsupport"
)

// Dead letters are read with what their headers say, in partition and
// offset order, as often as wanted; a replay puts each back on its source
// topic, or on the fallback when its headers name none (a cache key the
// binlog follower dead-lettered directly), marked with where it came from,
// with the trace context of the message it carries.
func TestDeadLettersReadAndReplayed(t *testing.T) {
	const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	k := testsupport.MustKafka(t)
	source, dlq, fallback := k.MustTopic(t, 1), k.MustTopic(t, 2), k.MustTopic(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := broker.NewWriter(k.Brokers, dlq)
	defer w.Close()
	f := &broker.Forwarder{Writer: w}
	traced := kafka.Message{Topic: source, Partition: 0, Offset: 41, Key: []byte("k1"), Value: []byte("v1"),
		Headers: []kafka.Header{{Key: "traceparent", Value: []byte(traceparent)}}}
	if err := f.Forward(ctx, traced, 3, errors.New("redis down")); err != nil {
		t.Fatal(err)
	}
	if err := f.Forward(ctx, kafka.Message{Key: []byte("k2"), Value: []byte("v2")}, 1, errors.New("timeout")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		letters, err := broker.ReadDeadLetters(ctx, k.Brokers, dlq)
		if err != nil || len(letters) != 2 {
			t.Fatalf("read %d dead letters (%v), want 2", len(letters), err)
		}
	}
	letters, _ := broker.ReadDeadLetters(ctx, k.Brokers, dlq)
	byKey := map[string]broker.DeadLetter{}
	for _, d := range letters {
		byKey[d.Key] = d
	}
	if d := byKey["k1"]; d.Error != "redis down" || d.SourceTopic != source || d.SourceOffset != "41" || d.Attempt != 3 || d.Value != "v1" ||
		d.TraceParent != traceparent {
		t.Fatalf("k1's dead letter = %+v", d)
	}
	sent, err := broker.Replay(ctx, k.Brokers, dlq, letters, fallback)
	if err != nil || sent[source] != 1 || sent[fallback] != 1 {
		t.Fatalf("replay sent %v (%v), want one to %s and one to %s", sent, err, source, fallback)
	}
	for topic, key := range map[string]string{source: "k1", fallback: "k2"} {
		got, err := broker.ReadDeadLetters(ctx, k.Brokers, topic)
		if err != nil || len(got) != 1 || got[0].Key != key || broker.Header(got[0].Message(), broker.HeaderReplayedFrom) != fmt.Sprintf("%s/%d/%d", dlq, byKey[key].Partition, byKey[key].Offset) {
			t.Fatalf("%s holds %+v (%v), want %s marked as replayed from %s", topic, got, err, key, byKey[key].Ref())
		}
		if got[0].TraceParent != byKey[key].TraceParent {
			t.Errorf("%s replayed with traceparent %q, want %q", key, got[0].TraceParent, byKey[key].TraceParent)
		}
	}
}

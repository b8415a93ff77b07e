package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// DeadLetter is a message of a dead-letter topic, with what its headers
// say of it: why it failed, where it was consumed from, after how many
// tries.
type DeadLetter struct {
	Partition       int       `json:"partition"` // in the dead-letter topic
	Offset          int64     `json:"offset"`
	Time            time.Time `json:"time"`
	Error           string    `json:"error"`
	SourceTopic     string    `json:"sourceTopic"`
	SourcePartition string    `json:"sourcePartition"`
	SourceOffset    string    `json:"sourceOffset"`
	Attempt         int       `json:"attempt"`
	Key             string    `json:"key"`
	Value           string    `json:"value"`
	// TraceParent is the trace context of the message it carries, when
	// it was traced: the order's request, in the tracing backend.
	TraceParent string `json:"traceparent,omitempty"`

	message kafka.Message
}

// Ref is the dead letter's place in its topic, PARTITION:OFFSET, as a
// replay names it.
func (d DeadLetter) Ref() string { return fmt.Sprintf("%d:%d", d.Partition, d.Offset) }

// Message is the dead letter as read from its topic.
func (d DeadLetter) Message() kafka.Message { return d.message }

// HeaderReplayedFrom marks a replayed message with the dead letter it came
// from (topic/partition/offset).
const HeaderReplayedFrom = "replayed-from"

// ReadDeadLetters reads every message topic holds, up to the end offsets it
// had when asked, in partition and offset order. Nothing is committed: a
// dead-letter topic is read as a record, as often as wanted.
func ReadDeadLetters(ctx context.Context, brokers []string, topic string) ([]DeadLetter, error) {
	parts, err := partitionOffsets(ctx, &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: deadline(ctx, 10*time.Second)}, topic)
	if err != nil {
		return nil, err
	}
	var letters []DeadLetter
	for _, po := range parts {
		read, err := readPartition(ctx, brokers, topic, po.Partition, po.FirstOffset, po.LastOffset)
		if err != nil {
			return nil, err
		}
		letters = append(letters, read...)
	}
	return letters, nil
}

func readPartition(ctx context.Context, brokers []string, topic string, partition int, from, end int64) ([]DeadLetter, error) {
	if from >= end {
		return nil, nil
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: partition, MaxWait: FetchMaxWait(500 * time.Millisecond)})
	defer r.Close()
	if err := r.SetOffset(from); err != nil {
		return nil, fmt.Errorf("read %s/%d: %w", topic, partition, err)
	}
	var letters []DeadLetter
	for {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return nil, fmt.Errorf("read %s/%d at %d: %w", topic, partition, from, err)
		}
		letters = append(letters, DeadLetter{Partition: m.Partition, Offset: m.Offset, Time: m.Time,
			Error: Header(m, HeaderError), SourceTopic: Header(m, HeaderTopic), SourcePartition: Header(m, HeaderPartition),
			SourceOffset: Header(m, HeaderOffset), Attempt: Attempt(m), Key: string(m.Key), Value: string(m.Value),
			TraceParent: Header(m, "traceparent"), message: m})
		if m.Offset >= end-1 {
			return letters, nil
		}
	}
}

// Replay writes each dead letter's key and value back onto the topic it
// was consumed from (fallback when its headers do not say), marked with
// where it came from, and returns how many went to each topic. The
// consumers' own rules make a replay safe to repeat: an order already
// written is a redelivery, a cache key already gone is deleted again.
func Replay(ctx context.Context, brokers []string, dlq string, letters []DeadLetter, fallback string) (map[string]int, error) {
	byTopic := map[string][]kafka.Message{}
	for _, d := range letters {
		topic := d.SourceTopic
		if topic == "" {
			topic = fallback
		}
		m := kafka.Message{Key: d.message.Key, Value: d.message.Value, Headers: []kafka.Header{
			{Key: HeaderReplayedFrom, Value: fmt.Appendf(nil, "%s/%d/%d", dlq, d.Partition, d.Offset)},
		}}
		// The replayed message keeps its order's trace context: its
		// consumer links back to the request, as on the first delivery.
		m.Headers = append(m.Headers, traceHeaders(d.message)...)
		byTopic[topic] = append(byTopic[topic], m)
	}
	sent := map[string]int{}
	var errs []error
	for topic, msgs := range byTopic {
		w := NewWriter(brokers, topic)
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			errs = append(errs, fmt.Errorf("replay onto %s: %w", topic, err))
		} else {
			sent[topic] = len(msgs)
		}
		if err := w.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return sent, errors.Join(errs...)
}

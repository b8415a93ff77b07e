package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
)

// Progress is how far a consumer group has consumed a topic: the relay
// asks it whether an order's event can still be queued ahead of the
// order-writer, a reconcile whether the writer has caught up.
type Progress struct {
	Brokers []string
	Group   string
	Topic   string
}

// Ends are the topic's end offsets by partition: where each partition's
// next event will go. A partition still electing its leader (a topic just
// created, a broker restarting) answers with a temporary error: that is
// waited out for up to endsPatience, not returned.
func (p *Progress) Ends(ctx context.Context) (map[int]int64, error) {
	deadline := time.Now().Add(endsPatience)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		ends, err := p.ends(ctx)
		var kerr kafka.Error
		if err == nil || !errors.As(err, &kerr) || !kerr.Temporary() || time.Now().Add(wait).After(deadline) {
			return ends, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
	}
}

// endsPatience is how long Ends waits out a partition without a leader.
const endsPatience = 10 * time.Second

func (p *Progress) ends(ctx context.Context) (map[int]int64, error) {
	parts, err := partitionOffsets(ctx, p.client(ctx), p.Topic)
	if err != nil {
		return nil, err
	}
	ends := map[int]int64{}
	for _, part := range parts {
		ends[part.Partition] = part.LastOffset
	}
	return ends, nil
}

// committed are the group's committed offsets of parts; -1 for a partition
// it has committed nothing in.
func (p *Progress) committed(ctx context.Context, client *kafka.Client, parts []int) (map[int]int64, error) {
	res, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: p.Group, Topics: map[string][]int{p.Topic: parts}})
	if err != nil {
		return nil, fmt.Errorf("committed offsets of %s: %w", p.Group, err)
	}
	if res.Error != nil {
		return nil, fmt.Errorf("committed offsets of %s: %w", p.Group, res.Error)
	}
	committed := map[int]int64{}
	for _, part := range res.Topics[p.Topic] {
		if part.Error != nil {
			return nil, fmt.Errorf("committed offset of %s/%d: %w", p.Topic, part.Partition, part.Error)
		}
		committed[part.Partition] = part.CommittedOffset
	}
	return committed, nil
}

// partitionOffsets are the first and last offsets of every partition of
// topic, by partition.
func partitionOffsets(ctx context.Context, client *kafka.Client, topic string) ([]kafka.PartitionOffsets, error) {
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	if len(meta.Topics) != 1 {
		return nil, fmt.Errorf("metadata of %s: %d topics in the answer", topic, len(meta.Topics))
	}
	if err := meta.Topics[0].Error; err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for _, part := range meta.Topics[0].Partitions {
		req.Topics[topic] = append(req.Topics[topic], kafka.FirstOffsetOf(part.ID), kafka.LastOffsetOf(part.ID))
	}
	res, err := client.ListOffsets(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("offsets of %s: %w", topic, err)
	}
	parts := res.Topics[topic]
	for _, part := range parts {
		if part.Error != nil {
			return nil, fmt.Errorf("offsets of %s/%d: %w", topic, part.Partition, part.Error)
		}
	}
	slices.SortFunc(parts, func(a, b kafka.PartitionOffsets) int { return a.Partition - b.Partition })
	return parts, nil
}

// Reached reports whether the group's committed offsets have reached ends
// on every partition: whatever the topic held then has been consumed. While
// the broker cannot say yet (its group coordinator is loading, as on a
// fresh broker, or moving) the answer is "not yet", not an error.
func (p *Progress) Reached(ctx context.Context, ends map[int]int64) (bool, error) {
	reached, err := p.reached(ctx, ends)
	var kerr kafka.Error
	if errors.As(err, &kerr) && kerr.Temporary() {
		return false, nil
	}
	return reached, err
}

func (p *Progress) reached(ctx context.Context, ends map[int]int64) (bool, error) {
	parts := make([]int, 0, len(ends))
	for part := range ends {
		parts = append(parts, part)
	}
	committed, err := p.committed(ctx, p.client(ctx), parts)
	if err != nil {
		return false, err
	}
	for part, end := range ends {
		// A partition never committed reads -1: reached only while empty.
		if end > 0 && committed[part] < end {
			return false, nil
		}
	}
	return true, nil
}

func (p *Progress) client(ctx context.Context) *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(p.Brokers...), Timeout: deadline(ctx, 5*time.Second)}
}

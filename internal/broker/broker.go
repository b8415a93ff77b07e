// Package broker is the Kafka adapter: the settings every writer and reader
// of the project uses, topic management, and the readiness check.
package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
)

// Topic is a topic the project needs, with its partition count and
// replication.
type Topic struct {
	Name       string
	Partitions int
	Replicas   int // replication factor; 0 is 1
	MinInSync  int // min.insync.replicas; 0 leaves the broker's default
	// Leader, when not 0, is the broker every partition prefers as its
	// leader (a test that kills the leader); the other replicas follow in
	// the order the cluster lists its brokers.
	Leader int
}

// Ping asks the cluster for its metadata: a broker that accepts TCP but has
// no controller yet does not pass.
func Ping(ctx context.Context, brokers []string) error {
	client, done := freshClient(brokers, deadline(ctx, 3*time.Second))
	defer done()
	resp, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{}})
	if err != nil {
		return fmt.Errorf("kafka metadata: %w", err)
	}
	if resp.Controller.ID < 0 && len(resp.Brokers) == 0 {
		return errors.New("kafka metadata: no brokers and no controller")
	}
	return nil
}

// EnsureTopics creates the topics that do not exist yet and leaves
// existing ones as they are. A replication factor above the cluster's
// broker count is refused here, by name, before Kafka's own error.
func EnsureTopics(ctx context.Context, brokers []string, topics ...Topic) error {
	fresh, done := freshClient(brokers, deadline(ctx, 10*time.Second))
	defer done()
	md, err := fresh.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{}})
	if err != nil {
		return fmt.Errorf("create topics: metadata: %w", err)
	}
	req := &kafka.CreateTopicsRequest{}
	for _, t := range topics {
		replicas := max(t.Replicas, 1)
		if replicas > len(md.Brokers) {
			return fmt.Errorf("create topic %s: replication factor %d needs %d brokers, the cluster at %v has %d",
				t.Name, replicas, replicas, brokers, len(md.Brokers))
		}
		tc := kafka.TopicConfig{Topic: t.Name, NumPartitions: t.Partitions, ReplicationFactor: replicas}
		if t.MinInSync > 0 {
			tc.ConfigEntries = []kafka.ConfigEntry{{ConfigName: "min.insync.replicas", ConfigValue: strconv.Itoa(t.MinInSync)}}
		}
		if t.Leader != 0 {
			ids := []int{t.Leader}
			for _, b := range md.Brokers {
				if b.ID != t.Leader && len(ids) < replicas {
					ids = append(ids, b.ID)
				}
			}
			tc.NumPartitions, tc.ReplicationFactor = -1, -1
			for p := range t.Partitions {
				tc.ReplicaAssignments = append(tc.ReplicaAssignments, kafka.ReplicaAssignment{Partition: p, Replicas: ids})
			}
		}
		req.Topics = append(req.Topics, tc)
	}
	// On kafka-go's shared transport: answering the creation, it refreshes
	// its cache and waits until the new topics are in it, so that the
	// process's other clients find them at once.
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: deadline(ctx, 10*time.Second)}
	resp, err := client.CreateTopics(ctx, req)
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	for name, err := range resp.Errors {
		if err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", name, err)
		}
	}
	return nil
}

// DeleteTopics removes topics; a topic that is already gone is no error.
func DeleteTopics(ctx context.Context, brokers []string, names ...string) error {
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: deadline(ctx, 10*time.Second)}
	resp, err := client.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: names})
	if err != nil {
		return fmt.Errorf("delete topics: %w", err)
	}
	for name, err := range resp.Errors {
		if err != nil && !errors.Is(err, kafka.UnknownTopicOrPartition) {
			return fmt.Errorf("delete topic %s: %w", name, err)
		}
	}
	return nil
}

// NewWriter is a synchronous, keyed writer that waits for every in-sync
// replica. RequiredAcks is set explicitly because the struct's zero value
// means no acks at all, and BatchTimeout is a few milliseconds because the
// 1 s default caps a synchronous writer at one batch per second.
//
// Its transport reads the topic's metadata every second (kafka-go's
// default is 6 s, all topics): kafka-go does not refresh it when a leader
// dies (segmentio/kafka-go#1221), so after a broker's death the writer kept
// sending to the dead leader for up to 6 s after Kafka had moved the
// leadership, and every order in that window went to the relay.
func NewWriter(brokers []string, topic string) *Writer {
	transport := &kafka.Transport{
		Dial:        (&net.Dialer{Timeout: time.Second}).DialContext,
		MetadataTTL: time.Second, MetadataTopics: []string{topic},
	}
	return &Writer{transport: transport, Writer: &kafka.Writer{
		Addr:                   kafka.TCP(brokers...),
		Transport:              transport,
		Topic:                  topic,
		Balancer:               &kafka.Hash{},
		RequiredAcks:           kafka.RequireAll,
		BatchTimeout:           5 * time.Millisecond,
		WriteTimeout:           5 * time.Second,
		ReadTimeout:            5 * time.Second,
		MaxAttempts:            3,
		AllowAutoTopicCreation: false,
	}}
}

// Compression is the kafka-go codec named none, lz4 or zstd.
func Compression(name string) kafka.Compression {
	switch name {
	case "lz4":
		return kafka.Lz4
	case "zstd":
		return kafka.Zstd
	default:
		return 0
	}
}

// Writer is a kafka.Writer with a transport of its own, which Close stops
// too (kafka.Writer closes only the transport it made itself: the
// metadata refresh would go on).
type Writer struct {
	*kafka.Writer
	transport *kafka.Transport
}

// Close flushes and closes the writer, then its transport.
func (w *Writer) Close() error {
	err := w.Writer.Close()
	w.transport.CloseIdleConnections()
	return err
}

// freshClient is a kafka.Client on a transport of its own, and what closes
// that transport, for the metadata a start-up decision is made on.
// kafka-go's shared DefaultTransport answers a metadata request from a
// cache it refreshes every 6 s: seconds after a broker had come back,
// topic creation still counted two brokers of three and refused
// replication factor 3 (TestChaosKafkaTwoBrokersDown, right after
// TestChaosKafkaLeaderKilled). A transport of its own reads the cluster's
// metadata when it is first used.
func freshClient(brokers []string, timeout time.Duration) (*kafka.Client, func()) {
	transport := &kafka.Transport{Dial: (&net.Dialer{Timeout: time.Second}).DialContext}
	return &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: timeout, Transport: transport}, transport.CloseIdleConnections
}

// deadline is how long a kafka.Client call may take: ctx's own deadline if
// it has one, def otherwise.
func deadline(ctx context.Context, def time.Duration) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return time.Until(d)
	}
	return def
}

// fetchDeadlineMargin is kafka-go's own: its reader sets the connection's
// read deadline at ReaderConfig.MaxWait and asks the broker to wait that
// less one second — or less a quarter of it, when it is under a second
// (adjustDeadlineForRTT, defaultRTT). With a 50 ms wait a fetch answered
// 12.5 ms late timed out and the reader dialled again.
const fetchDeadlineMargin = time.Second

// FetchMaxWait is the ReaderConfig.MaxWait that makes the broker wait up to
// wait for a fetch to fill, and the reader a second longer for the answer.
func FetchMaxWait(wait time.Duration) time.Duration { return wait + fetchDeadlineMargin }

// Linger is the least time between two of a partition's produce requests
// (Producer.Linger) for a publisher of topic, by the topic's replication.
// A produce request costs the brokers CPU of its own, and a replicated
// one costs each follower a fetch: at 800 orders a second on three
// brokers, requests 5 ms apart cost the brokers 668 CPU-ms per 1,000
// orders against 429 with batches 20 ms apart, and saturated two shared
// cores (p50 82 ms against 27). One replica keeps up at 5 ms. A call
// after a quiet spell waits for neither. A topic that cannot be read yet
// gets the replicated linger, which works on both.
func Linger(ctx context.Context, brokers []string, topic string) (time.Duration, error) {
	const single, replicated = 5 * time.Millisecond, 20 * time.Millisecond
	client, done := freshClient(brokers, deadline(ctx, 3*time.Second))
	defer done()
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return replicated, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	if len(md.Topics) != 1 || md.Topics[0].Error != nil || len(md.Topics[0].Partitions) == 0 {
		return replicated, fmt.Errorf("metadata of %s: no such topic", topic)
	}
	if len(md.Topics[0].Partitions[0].Replicas) > 1 {
		return replicated, nil
	}
	return single, nil
}

// InGroup gives a group reader's configuration the project's group timing.
// kafka-go's defaults (a 30 s session, a 30 s rebalance) leave the
// partitions of a member that died, and the whole group while the
// coordinator moves, unread for half a minute; a flash sale's orders would
// wait that long on their way to MySQL. A member is declared dead after 6 s
// without a heartbeat (one a second), and a rebalance waits 10 s for the
// members to rejoin.
func InGroup(cfg kafka.ReaderConfig) kafka.ReaderConfig {
	cfg.SessionTimeout = 6 * time.Second
	cfg.HeartbeatInterval = time.Second
	cfg.RebalanceTimeout = 10 * time.Second
	return cfg
}

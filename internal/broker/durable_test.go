package broker_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/testsupport"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// The durability view agrees with Kafka's own answer to an acks=all
// write. Kafka caps min.insync.replicas at the replication factor, and so
// does the view; a partition truly short of in-sync replicas (two of three
// brokers down) is TestChaosKafkaTwoBrokersDown's.
func TestDurabilityAgreesWithKafka(t *testing.T) {
	k := testsupport.MustKafka(t)
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		minInSync int
		accepting bool
	}{
		{"as many in sync as needed", 1, true},
		{"min.insync.replicas above the replication factor", 2, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			topic := "t.durable." + strings.ReplaceAll(c.name, " ", "-") + "." + time.Now().Format("150405.000000")
			if err := broker.EnsureTopics(ctx, k.Brokers, broker.Topic{Name: topic, Partitions: 3, MinInSync: c.minInSync}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = broker.DeleteTopics(context.Background(), k.Brokers, topic) })
			d := broker.OrderDurability{Topic: broker.NewDurability(k.Brokers, topic, time.Second, quiet)}
			testsupport.Wait(t, 10*time.Second, "the topic's metadata read", func() bool {
				d.Topic.Refresh(ctx)
				return d.Topic.Known(ctx) == nil
			})
			for v := int64(1); v <= 6; v++ {
				if got := d.Accepting(v); got != c.accepting {
					t.Fatalf("voucher %d accepting: %v, want %v", v, got, c.accepting)
				}
			}
			err := broker.NewOrderPublisher(broker.NewProducer(k.Brokers, topic, 0), 5*time.Second).
				Publish(ctx, order.Event{OrderID: 1, UserID: 1, VoucherID: 1, AcceptedAt: time.Now().UnixMilli()})
			if kafkaTakes := err == nil; kafkaTakes != c.accepting {
				t.Fatalf("Kafka's answer to an acks=all write: %v; the view said accepting=%v", err, c.accepting)
			}
			if !c.accepting && !errors.Is(err, kafka.NotEnoughReplicas) {
				t.Fatalf("Kafka refused the write with %v, want NOT_ENOUGH_REPLICAS", err)
			}
		})
	}
}

// A topic that does not exist, or a cluster that does not answer, is
// known to nobody: every order is refused and readiness says why.
func TestDurabilityUnknownRefusesEverything(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		brokers []string
		topic   string
	}{
		{"no such topic", testsupport.MustKafka(t).Brokers, "t.durable.missing." + time.Now().Format("150405.000000")},
		{"no broker answers", []string{testsupport.FreeAddr(t)}, "seckill.orders"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := broker.OrderDurability{Topic: broker.NewDurability(c.brokers, c.topic, time.Second, quiet)}
			d.Topic.Refresh(ctx)
			if err := d.Topic.Known(ctx); err == nil {
				t.Fatal("Known() = nil; want the reason the topic is unknown")
			}
			if d.Accepting(1) {
				t.Fatal("accepting an order on an unknown topic")
			}
		})
	}
}

// A failed publish makes its partition suspect until the metadata moves
// or SuspectFor passes; the other partitions keep accepting.
func TestFailedPublishSuspendsItsPartition(t *testing.T) {
	k := testsupport.MustKafka(t)
	ctx := context.Background()
	topic := k.MustTopic(t, 6)
	d := broker.OrderDurability{Topic: broker.NewDurability(k.Brokers, topic, time.Second, quiet)}
	d.Topic.SuspectFor = 300 * time.Millisecond
	now := time.Now()
	d.Topic.Now = func() time.Time { return now }
	d.Topic.Refresh(ctx)
	d.Failed(1)
	if d.Accepting(1) {
		t.Fatal("voucher 1 accepted right after its publish failed")
	}
	others := 0
	for v := int64(2); v <= 40; v++ {
		if d.Accepting(v) {
			others++
		}
	}
	if others == 0 {
		t.Fatal("one failed publish stopped every partition")
	}
	// Within SuspectFor, metadata unchanged: still refused.
	now = now.Add(250 * time.Millisecond)
	d.Topic.Refresh(ctx)
	if d.Accepting(1) {
		t.Fatal("voucher 1 accepted again within SuspectFor, its partition's metadata unchanged")
	}
	now = now.Add(100 * time.Millisecond)
	d.Topic.Refresh(ctx)
	if !d.Accepting(1) {
		t.Fatal("voucher 1 still refused after SuspectFor")
	}
}

// A replication factor the cluster cannot place is named at creation.
func TestEnsureTopicsRefusesMoreReplicasThanBrokers(t *testing.T) {
	k := testsupport.MustKafka(t)
	err := broker.EnsureTopics(context.Background(), k.Brokers, broker.Topic{Name: "t.never", Partitions: 1, Replicas: 4})
	if err == nil || !strings.Contains(err.Error(), "replication factor 4 needs 4 brokers") {
		t.Fatalf("EnsureTopics with 4 replicas: %v", err)
	}
}

// The producer's linger follows the topic's replication: 5 ms on one
// replica, 20 ms on three, 20 ms when the topic cannot be read.
func TestLingerFollowsReplication(t *testing.T) {
	single, cluster := testsupport.MustKafka(t), testsupport.MustKafkaCluster(t)
	for _, c := range []struct {
		name    string
		k       *testsupport.Kafka
		topic   string
		want    time.Duration
		wantErr bool
	}{
		{"one replica", single, single.MustTopic(t, 6), 5 * time.Millisecond, false},
		{"three replicas", cluster, cluster.MustTopic(t, 6), 20 * time.Millisecond, false},
		{"no such topic", single, "t.linger.missing", 20 * time.Millisecond, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got time.Duration
			var err error
			ask := func() bool {
				got, err = broker.Linger(context.Background(), c.k.Brokers, c.topic)
				return err == nil
			}
			if c.wantErr {
				ask()
			} else {
				// A topic just created is not known to every broker at
				// once: until then its replication is unknown.
				testsupport.Wait(t, 10*time.Second, "the brokers know the new topic", ask)
			}
			if got != c.want || (err != nil) != c.wantErr {
				t.Fatalf("Linger = %v, %v; want %v, error %v", got, err, c.want, c.wantErr)
			}
		})
	}
}

// The probe keeps a connection to each broker between refreshes: one
// dial per broker however many refreshes (a dial per broker per refresh
// cost every broker a connection set up and torn down twice a second, per
// api), and its view stays right.
func TestDurabilityKeepsItsConnections(t *testing.T) {
	k := testsupport.MustKafka(t)
	ctx := context.Background()
	topic := k.MustTopic(t, 3)
	d := broker.NewDurability(k.Brokers, topic, time.Second, quiet)
	dials := d.CountDials()
	defer d.CloseConns()
	// A topic just created is not known to every broker at once.
	testsupport.Wait(t, 10*time.Second, "the probe reads the new topic", func() bool {
		d.Refresh(ctx)
		return d.Known(ctx) == nil
	})
	before := dials.Load()
	for range 10 {
		d.Refresh(ctx)
		if err := d.Known(ctx); err != nil {
			t.Fatal(err)
		}
		if !d.Accepting([]byte("voucher-1")) {
			t.Fatal("a healthy topic's partition refused")
		}
	}
	if n := dials.Load() - before; n != 0 {
		t.Fatalf("10 refreshes after the first dialled %d times; want none (a connection kept to each broker)", n)
	}
}

// The start-up calls (topic creation, the ping) and a new producer read
// the cluster as it is now, not kafka-go's shared metadata cache, which it
// refreshes every 6 s: a topic another client created a moment ago is
// seen at once. With the cache, topic creation counted two brokers of
// three seconds after the third had come back, and refused replication
// factor 3.
func TestStartUpCallsSeeTheClusterAsItIsNow(t *testing.T) {
	k := testsupport.MustKafka(t)
	ctx := context.Background()
	// The shared cache's view of these brokers, read before the topic is.
	if _, err := (&kafka.Client{Addr: kafka.TCP(k.Brokers...)}).Metadata(ctx, &kafka.MetadataRequest{}); err != nil {
		t.Fatal(err)
	}
	topic := "t.fresh_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	own := &kafka.Transport{}
	defer own.CloseIdleConnections()
	other := &kafka.Client{Addr: kafka.TCP(k.Brokers...), Transport: own, Timeout: 10 * time.Second}
	res, err := other.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: 1, ReplicationFactor: 1}}})
	if err == nil {
		err = res.Errors[topic]
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = broker.DeleteTopics(context.Background(), k.Brokers, topic) })
	p := broker.NewProducer(k.Brokers, topic, 0)
	defer p.Close()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := p.WriteMessages(wctx, kafka.Message{Key: []byte("1"), Value: []byte("{}")}); err != nil {
		t.Fatalf("a write to a topic created a moment ago: %v", err)
	}
}

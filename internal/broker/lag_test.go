package broker_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/testsupport"
)

// The lag is every event a group has not committed, over all partitions:
// all of them before the group commits anything, those after the committed
// offset afterwards, none once it has committed the last; the watch keeps
// the gauge at it.
func TestLagCountsWhatTheGroupHasNotCommitted(t *testing.T) {
	k := testsupport.MustKafka(t)
	topic, group := k.MustTopic(t, 3), testsupport.Group(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := &kafka.Writer{Addr: kafka.TCP(k.Brokers...), Topic: topic, Balancer: &kafka.RoundRobin{}, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	var msgs []kafka.Message
	for i := range 30 {
		msgs = append(msgs, kafka.Message{Value: []byte(strconv.Itoa(i))})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	p := &broker.Progress{Brokers: k.Brokers, Group: group, Topic: topic}
	wantLag := func(want int64) {
		t.Helper()
		lag, err := p.Lag(ctx)
		if err != nil || lag != want {
			t.Fatalf("lag = %d, %v; want %d", lag, err, want)
		}
	}
	wantLag(30)

	reader := newGroupReader(k, group, topic)
	defer reader.Close()
	for i := range 30 {
		m, err := reader.FetchMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := reader.CommitMessages(ctx, m); err != nil {
			t.Fatal(err)
		}
		if i == 11 {
			wantLag(18)
		}
	}
	wantLag(0)

	gauge := broker.NewLagMetric(prometheus.NewRegistry()).WithLabelValues("orders")
	gauge.Set(-1)
	if err := w.WriteMessages(ctx, msgs[:7]...); err != nil {
		t.Fatal(err)
	}
	watchCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() {
		done <- (&broker.LagWatch{Progress: p, Gauge: gauge, Interval: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}).Run(watchCtx)
	}()
	if deadline, _ := ctx.Deadline(); !testsupport.Poll(time.Until(deadline), func() bool { return testutil.ToFloat64(gauge) == 7 }) {
		t.Fatalf("the gauge reads %v, want 7", testutil.ToFloat64(gauge))
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

package broker

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Lag is how many events of the topic the group has not committed: by
// partition, the end offset less the committed one, or less the first
// offset still kept when the group has committed none there (a group that
// starts from the oldest event, as every consumer here does).
func (p *Progress) Lag(ctx context.Context) (int64, error) {
	client := p.client(ctx)
	offsets, err := partitionOffsets(ctx, client, p.Topic)
	if err != nil {
		return 0, err
	}
	parts := make([]int, 0, len(offsets))
	for _, part := range offsets {
		parts = append(parts, part.Partition)
	}
	committed, err := p.committed(ctx, client, parts)
	if err != nil {
		return 0, err
	}
	var lag int64
	for _, part := range offsets {
		from := committed[part.Partition]
		if from < part.FirstOffset {
			from = part.FirstOffset
		}
		lag += max(0, part.LastOffset-from)
	}
	return lag, nil
}

// NewLagMetric registers seckill_consumer_lag_messages on reg, by consumer.
func NewLagMetric(reg prometheus.Registerer) *prometheus.GaugeVec {
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seckill_consumer_lag_messages",
		Help: "Events of the consumer's topic its group has not committed (the same for every member of the group)."}, []string{"consumer"})
	reg.MustRegister(v)
	return v
}

// LagWatch keeps a lag gauge at the group's lag, read every Interval. A
// read that fails leaves the last value: Kafka's own reachability has its
// readiness check and alert.
type LagWatch struct {
	Progress *Progress
	Gauge    prometheus.Gauge
	Interval time.Duration
	Logger   *slog.Logger
}

// Run reads the lag until ctx ends.
func (w *LagWatch) Run(ctx context.Context) error {
	tick := time.NewTicker(w.Interval)
	defer tick.Stop()
	failing := false
	for {
		readCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		lag, err := w.Progress.Lag(readCtx)
		cancel()
		switch {
		case err == nil:
			w.Gauge.Set(float64(lag))
			failing = false
		case ctx.Err() == nil && !failing:
			w.Logger.Warn("consumer lag: reading it failed; the metric keeps its last value", "group", w.Progress.Group, "err", err)
			failing = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
)

// GroupReader is what the loop needs of a consumer-group reader
// (*kafka.Reader).
type GroupReader interface {
	FetchMessage(ctx context.Context) (kafka.Message, error)
	CommitMessages(ctx context.Context, msgs ...kafka.Message) error
}

var _ GroupReader = (*kafka.Reader)(nil)

// Consumer is the project's one consumer loop: fetch a batch, handle it,
// commit its offsets after the handler's side effects are done. A batch
// whose handling fails is retried with backoff until it succeeds or the
// consumer stops: never skipped, never committed before it is handled.
//
// It runs in three stages joined by channels of one batch, so that the
// next batch is fetched while the current one is handled and the previous
// one is committed meanwhile.
type Consumer struct {
	Name   string // in the logs
	Reader GroupReader
	// Handle does a batch's side effects. An error means "not done, try
	// again": it must be safe to run a batch twice (a redelivery after a
	// crash does the same).
	Handle    func(ctx context.Context, batch []kafka.Message) error
	BatchSize int           // at most this many messages a batch; 1 when zero
	BatchWait time.Duration // how long a batch waits to fill after its first message
	Logger    *slog.Logger
	// Backoff is the wait between tries of a failing fetch, batch or
	// commit; nil means exponential from 100 ms to 5 s, without end.
	Backoff func() backoff.BackOff
	// A batch still failing StuckAfter (DefaultStuckAfter when zero)
	// after its first try is logged with its offsets and counted in Stuck
	// (when set), once: what holds its partition is then for an operator
	// to see, while the tries go on.
	StuckAfter time.Duration
	Stuck      prometheus.Counter
}

// DefaultStuckAfter is how long a batch may fail before it is reported.
const DefaultStuckAfter = time.Minute

// NewStuckMetric registers on reg the count of batches reported stuck, by
// consumer name: a Consumer's Stuck is one of its children.
func NewStuckMetric(reg prometheus.Registerer) *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_consumer_batches_stuck_total",
		Help: "Batches still failing StuckAfter after their first try (each holds its partition)."}, []string{"consumer"})
	reg.MustRegister(v)
	return v
}

// CommitGrace bounds the commits of batches already handled when the
// consumer stops; a batch whose commit did not happen is delivered again.
const CommitGrace = 5 * time.Second

// Run consumes until ctx ends or a stage fails for good. On shutdown the
// batch being handled is abandoned (its handler sees ctx end) and
// delivered again later; the batches already handled are still committed.
func (c *Consumer) Run(parent context.Context) error {
	// A commit stage that fails for good stops the other two through ctx.
	ctx, stop := context.WithCancel(parent)
	defer stop()
	fetched := make(chan []kafka.Message, 1)
	handled := make(chan []kafka.Message, 1)
	fetchCtx, stopFetching := context.WithCancel(ctx)
	defer stopFetching()
	fetcherDone := make(chan struct{})
	go func() { defer close(fetcherDone); c.fetchLoop(fetchCtx, fetched) }()
	committerDone := make(chan error, 1)
	go func() { committerDone <- c.commitLoop(ctx, handled, stop) }()

	err := c.handleLoop(ctx, fetched, handled)
	stopFetching()
	close(handled)
	<-fetcherDone
	return errors.Join(err, <-committerDone)
}

// policy is custom's backoff, or the default: exponential from 100 ms to
// 250 ms, without end. The cap is what a batch waits past a server's
// return: a Redis master failing over fails every batch for its 3-4 s,
// and with a cap of 5 s the writer slept up to 1.7 s past the promotion
// before it wrote again, while the failed master's sales waited for it to
// catch up to be reconciled. A try is one batch against servers that
// refuse it at once or time out: four a second cost nothing.
func policy(custom func() backoff.BackOff) backoff.BackOff {
	if custom != nil {
		return custom()
	}
	return backoff.NewExponentialBackOff(backoff.WithInitialInterval(100*time.Millisecond),
		backoff.WithMaxInterval(250*time.Millisecond), backoff.WithMaxElapsedTime(0))
}

// retry runs op until it succeeds, the policy gives up or ctx ends,
// logging (when logger is set) the first failure of a streak and the
// recovery after it, with attrs.
func retry(ctx context.Context, logger *slog.Logger, custom func() backoff.BackOff, what string, op func() error, attrs ...any) error {
	failed := false
	err := backoff.Retry(func() error {
		err := op()
		if err != nil && !failed && ctx.Err() == nil {
			if logger != nil {
				logger.Error(what+" failed; retrying with backoff, nothing skipped", append(attrs, "err", err)...)
			}
			failed = true
		}
		return err
	}, backoff.WithContext(policy(custom), ctx))
	if err == nil && failed && logger != nil {
		logger.Info(what+" succeeds again", attrs...)
	}
	return err
}

func (c *Consumer) retry(ctx context.Context, what string, op func() error) error {
	return retry(ctx, c.Logger, c.Backoff, what, op, "consumer", c.Name)
}

func (c *Consumer) fetchLoop(ctx context.Context, fetched chan<- []kafka.Message) {
	defer close(fetched)
	for {
		var batch []kafka.Message
		err := c.retry(ctx, "fetching messages", func() (err error) {
			batch, err = c.fetch(ctx)
			return err
		})
		if err != nil {
			return
		}
		select {
		case fetched <- batch:
		case <-ctx.Done():
			return
		}
	}
}

// fetch blocks for a first message, then takes what arrives within
// BatchWait, up to BatchSize.
func (c *Consumer) fetch(ctx context.Context) ([]kafka.Message, error) {
	first, err := c.Reader.FetchMessage(ctx)
	if err != nil {
		return nil, err
	}
	batch := []kafka.Message{first}
	if c.BatchSize <= 1 {
		return batch, nil
	}
	fill, cancel := context.WithTimeout(ctx, c.BatchWait)
	defer cancel()
	for len(batch) < c.BatchSize {
		m, err := c.Reader.FetchMessage(fill)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			break
		}
		batch = append(batch, m)
	}
	return batch, nil
}

func (c *Consumer) handleLoop(ctx context.Context, fetched <-chan []kafka.Message, handled chan<- []kafka.Message) error {
	stuckAfter := cmp.Or(c.StuckAfter, DefaultStuckAfter)
	for batch := range fetched {
		start, reported := time.Now(), false
		handle := func() error {
			err := c.Handle(ctx, batch)
			if err != nil && !reported && ctx.Err() == nil && time.Since(start) >= stuckAfter {
				reported = true
				c.reportStuck(batch, time.Since(start), err)
			}
			return err
		}
		if err := c.retry(ctx, "handling a batch", handle); err != nil {
			return nil // stopping: the batch is delivered again
		}
		select {
		case handled <- batch:
		case <-ctx.Done():
			// Its side effects are done: commit it anyway, so that a
			// restart does not deliver it again.
			handled <- batch
			return nil
		}
	}
	return nil
}

func (c *Consumer) reportStuck(batch []kafka.Message, failing time.Duration, err error) {
	if c.Stuck != nil {
		c.Stuck.Inc()
	}
	if c.Logger == nil {
		return
	}
	first, last := batch[0], batch[len(batch)-1]
	c.Logger.Error("a batch keeps failing and holds its partition; still retrying", "consumer", c.Name,
		"failing_for", failing.Round(time.Millisecond), "topic", first.Topic, "partition", first.Partition,
		"first_offset", first.Offset, "last_offset", last.Offset, "messages", len(batch), "err", err)
}

// commitLoop commits the handled batches in order. When it has to give
// up, it stops the consumer and still drains handled, so that the handle
// stage never blocks on a send nobody reads.
func (c *Consumer) commitLoop(ctx context.Context, handled <-chan []kafka.Message, stop context.CancelFunc) error {
	for batch := range handled {
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if ctx.Err() != nil {
			cctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), CommitGrace)
		}
		err := c.retry(cctx, "committing offsets", func() error { return c.Reader.CommitMessages(cctx, batch...) })
		cancel()
		if err != nil {
			shuttingDown := ctx.Err() != nil
			stop()
			for range handled {
			}
			if shuttingDown {
				return nil
			}
			return fmt.Errorf("%s: commit %d messages: %w", c.Name, len(batch), err)
		}
	}
	return nil
}

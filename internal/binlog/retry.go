package binlog

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/codes"

	"github.com/seckill/seckill/internal/broker"
)

// Retrier handles the retry topic (as a broker.Consumer's handler): it
// waits for each key's next attempt, deletes it, and on failure queues it
// again with a longer wait, until MaxAttempts; then the key goes to the
// dead-letter topic, an error log and a metric. A message's value is the
// key; its attempt is the forwarded message's header.
type Retrier struct {
	Retry, DLQ    *broker.Forwarder
	Redis         redis.UniversalClient
	MaxAttempts   int
	DeleteTimeout time.Duration
	Logger        *slog.Logger
	Metrics       *Metrics
}

// errUndecodable parks a retry message without a key or an attempt.
var errUndecodable = errors.New("undecodable retry: want the cache key as the value and an attempt header")

// Handle takes each message of a batch in turn; an error (only on
// shutdown) leaves the batch uncommitted.
func (r *Retrier) Handle(ctx context.Context, batch []kafka.Message) error {
	for _, m := range batch {
		if err := r.handle(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// handle is a span of its own, linked to the trace of the invalidation
// that queued the key.
func (r *Retrier) handle(ctx context.Context, m kafka.Message) (err error) {
	ctx, span := broker.StartProcess(ctx, m.Topic, []kafka.Message{m})
	defer func() {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	key, attempt := string(m.Value), broker.Attempt(m)
	if key == "" || attempt < 1 {
		return r.DLQ.Forward(ctx, m, attempt, errUndecodable)
	}
	// The wait before attempt n+1 counts from when attempt n was queued.
	if wait := time.Until(m.Time.Add(retryDelay(attempt))); wait > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	r.Metrics.retries.Inc()
	dctx, cancel := context.WithTimeout(ctx, r.DeleteTimeout)
	failed := r.Redis.Del(dctx, key).Err()
	cancel()
	if failed == nil {
		r.Metrics.deletes.Inc()
		return nil
	}
	attempt++
	if attempt > r.MaxAttempts {
		r.Metrics.deadLets.Inc()
		r.Logger.ErrorContext(ctx, "cache key could not be deleted; giving up, sent to the dead-letter topic", "key", key, "tries", attempt, "err", failed)
		return r.DLQ.Forward(ctx, m, attempt, failed)
	}
	return r.Retry.Forward(ctx, m, attempt, failed)
}

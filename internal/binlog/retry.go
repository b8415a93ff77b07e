package binlog

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
)

// Retrier consumes the retry topic: it waits for each key's next-attempt
// time, deletes it, and on failure queues it again with a longer wait,
// until MaxAttempts; then the key goes to the dead-letter topic, an error
// log and a metric.
type Retrier struct {
	Reader        *kafka.Reader
	Retry, DLQ    *kafka.Writer
	Redis         *redis.Client
	MaxAttempts   int
	DeleteTimeout time.Duration
	Logger        *slog.Logger
	Metrics       *Metrics
}

// Run consumes until ctx ends. A message is committed only once its key is
// deleted, queued again or dead-lettered.
func (r *Retrier) Run(ctx context.Context) error {
	for {
		m, err := r.Reader.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.Logger.Warn("fetching retries failed; retrying", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
			continue
		}
		if err := r.handle(ctx, m); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := r.Reader.CommitMessages(ctx, m); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.Logger.Warn("committing a retry failed; it will be retried again, harmlessly", "err", err)
		}
	}
}

func (r *Retrier) handle(ctx context.Context, m kafka.Message) error {
	var msg RetryMessage
	if err := json.Unmarshal(m.Value, &msg); err != nil || msg.Key == "" {
		return r.publish(ctx, r.DLQ, kafka.Message{Key: m.Key, Value: m.Value,
			Headers: []kafka.Header{{Key: "error", Value: fmt.Appendf(nil, "undecodable retry: %v", err)}}})
	}
	if wait := time.Until(time.UnixMilli(msg.NotBefore)); wait > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	r.Metrics.retries.Inc()
	dctx, cancel := context.WithTimeout(ctx, r.DeleteTimeout)
	err := r.Redis.Del(dctx, msg.Key).Err()
	cancel()
	if err == nil {
		r.Metrics.deletes.Inc()
		return nil
	}
	msg.Attempt++
	msg.Error = err.Error()
	b, _ := json.Marshal(msg)
	if msg.Attempt > r.MaxAttempts {
		r.Metrics.deadLets.Inc()
		r.Logger.Error("cache key could not be deleted; giving up, sent to the dead-letter topic", "key", msg.Key, "attempts", msg.Attempt-1, "err", err)
		return r.publish(ctx, r.DLQ, kafka.Message{Key: []byte(msg.Key), Value: b})
	}
	msg.NotBefore = time.Now().Add(retryDelay(msg.Attempt)).UnixMilli()
	b, _ = json.Marshal(msg)
	return r.publish(ctx, r.Retry, kafka.Message{Key: []byte(msg.Key), Value: b})
}

func (r *Retrier) publish(ctx context.Context, w *kafka.Writer, m kafka.Message) error {
	policy := backoff.WithContext(backoff.NewExponentialBackOff(backoff.WithMaxElapsedTime(0), backoff.WithMaxInterval(5*time.Second)), ctx)
	return backoff.Retry(func() error {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return w.WriteMessages(wctx, m)
	}, policy)
}

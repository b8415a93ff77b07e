// Package ratelimit limits requests per user and per client IP with
// counters in Redis (GCRA, go-redis/redis_rate), so the limits hold across
// every API instance that shares the Redis.
package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/apperr"
)

var (
	// ErrExceeded is a request over its limit; it carries when the next
	// request may pass.
	ErrExceeded = apperr.New(apperr.RateLimited, "too many requests")
	// ErrUnavailable means the limiter could not reach Redis and its
	// policy fails closed.
	ErrUnavailable = apperr.New(apperr.Unavailable, "service temporarily unavailable: retry shortly").Retry(time.Second)
)

// Limit is Rate requests per Period, with bursts up to Rate. The zero Limit
// is "no limit".
type Limit struct {
	Rate   int
	Period time.Duration
}

// Off reports whether the limit lets everything through.
func (l Limit) Off() bool { return l.Rate == 0 }

func (l Limit) String() string {
	if l.Off() {
		return "off"
	}
	return fmt.Sprintf("%d/%s", l.Rate, l.Period)
}

// ParseLimit reads "N/period" ("5/1s", "20/1m", "10/24h") or "off".
func ParseLimit(s string) (Limit, error) {
	if strings.TrimSpace(s) == "off" {
		return Limit{}, nil
	}
	rate, period, ok := strings.Cut(s, "/")
	if !ok {
		return Limit{}, fmt.Errorf("want N/period (e.g. 5/1s, 20/1m) or off")
	}
	n, err := strconv.Atoi(strings.TrimSpace(rate))
	if err != nil || n < 1 {
		return Limit{}, fmt.Errorf("rate %q: want a whole number of at least 1", rate)
	}
	d, err := time.ParseDuration(strings.TrimSpace(period))
	if err != nil || d < time.Millisecond {
		return Limit{}, fmt.Errorf("period %q: want a duration of at least 1ms, like 1s or 1m", period)
	}
	return Limit{Rate: n, Period: d}, nil
}

// Limiter checks limits against counters in Redis under one key prefix.
type Limiter struct {
	rl     *redis_rate.Limiter
	prefix string
	logger *slog.Logger
	// down remembers that Redis was unreachable, so that the log says so
	// once per outage rather than once per request.
	down atomic.Bool
}

// New is a limiter whose counters live under prefix (all API instances of
// one deployment must share it).
func New(rdb redis.UniversalClient, prefix string, logger *slog.Logger) *Limiter {
	return &Limiter{rl: redis_rate.NewLimiter(rdb), prefix: prefix, logger: logger}
}

// Check is one request against one limit, counted under key. It returns
// ErrExceeded, detailed with who, when the limit is reached. When Redis
// cannot be reached it lets the request through if failOpen, and otherwise
// returns ErrUnavailable.
func (l *Limiter) Check(ctx context.Context, key string, limit Limit, failOpen bool, who string) error {
	if limit.Off() {
		return nil
	}
	res, err := l.rl.Allow(ctx, l.prefix+key, redis_rate.Limit{Rate: limit.Rate, Burst: limit.Rate, Period: limit.Period})
	if err != nil {
		if !l.down.Swap(true) {
			l.logger.ErrorContext(ctx, "rate limiter cannot reach Redis; limits fail open or closed per route until it answers",
				"err", err)
		}
		if failOpen {
			return nil
		}
		return ErrUnavailable.Wrap(err)
	}
	if l.down.Swap(false) {
		l.logger.InfoContext(ctx, "rate limiter reaches Redis again")
	}
	if res.Allowed == 0 {
		return ErrExceeded.With("%s: slow down and retry later", who).Retry(res.RetryAfter)
	}
	return nil
}

package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// ReplicationID is the master_replid of the Redis rdb talks to. Redis
// draws a new one whenever its data may have moved under it: a restart
// (whatever it loaded: AOF, a backup, nothing), a replica promoted by a
// failover. A sale's state in Redis is stamped with the id it was built
// under; under another id it may be missing acknowledged writes, so the
// gate does not sell it until it is reconciled from MySQL.
func ReplicationID(ctx context.Context, rdb redis.Cmdable) (string, error) {
	info, err := rdb.Info(ctx, "replication").Result()
	if err != nil {
		return "", fmt.Errorf("redis replication id: %w", err)
	}
	for line := range strings.Lines(info) {
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "master_replid:"); ok && id != "" {
			return id, nil
		}
	}
	return "", errors.New("redis replication id: INFO replication has no master_replid")
}

// ReplicationID is the replication id of the store's Redis now.
func (s *Store) ReplicationID(ctx context.Context) (string, error) { return ReplicationID(ctx, s.rdb) }

// Epoch follows the replication id of the Redis a program talks to, so
// that the gate can refuse a sale whose state was built under another
// one without asking for it on every attempt.
type Epoch struct {
	rdb      redis.Cmdable
	interval time.Duration
	logger   *slog.Logger
	current  atomic.Pointer[string]
	// Changes, when set, counts the changes seen (not the first read).
	Changes prometheus.Counter
	// OnChange, when set, runs after every read that found another id than
	// the last one read, the first successful read included (a program
	// that starts during an outage cannot know the id before it): the
	// order-writer checks every sale then.
	OnChange func(ctx context.Context)
}

// NewEpoch reads rdb's replication id every interval.
func NewEpoch(rdb redis.Cmdable, interval time.Duration, logger *slog.Logger) *Epoch {
	return &Epoch{rdb: rdb, interval: interval, logger: logger}
}

// CountChanges counts the changes e sees in reg's
// seckill_redis_replication_id_changes_total.
func (e *Epoch) CountChanges(reg prometheus.Registerer) *Epoch {
	e.Changes = prometheus.NewCounter(prometheus.CounterOpts{Name: "seckill_redis_replication_id_changes_total",
		Help: "Times Redis's replication id changed (a restart, a restore, a failover: writes may be lost); sales built under the old id pause until reconciled."})
	reg.MustRegister(e.Changes)
	return e
}

// Current is the last id read; "" before the first read succeeded.
func (e *Epoch) Current() string {
	if id := e.current.Load(); id != nil {
		return *id
	}
	return ""
}

// Refresh reads the id now and reports whether it changed since the last
// read (the first read is no change).
func (e *Epoch) Refresh(ctx context.Context) (bool, error) {
	id, err := ReplicationID(ctx, e.rdb)
	if err != nil {
		return false, err
	}
	old := e.current.Swap(&id)
	if old != nil && *old == id {
		return false, nil
	}
	if old != nil {
		if e.Changes != nil {
			e.Changes.Inc()
		}
		e.logger.Warn("Redis has a new replication id (a restart, a restore or a failover): it may have lost writes; "+
			"each sale pauses until it is reconciled from MySQL", "old", *old, "new", id)
	}
	if e.OnChange != nil {
		e.OnChange(ctx)
	}
	return old != nil, nil
}

// Run refreshes every interval until ctx ends; a failed read is retried
// at the next one.
func (e *Epoch) Run(ctx context.Context) error {
	t := time.NewTicker(e.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, max(e.interval, time.Second))
		if _, err := e.Refresh(rctx); err != nil && ctx.Err() == nil {
			e.logger.Debug("redis replication id: read failed; trying again", "err", err)
		}
		cancel()
	}
}

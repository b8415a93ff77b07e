// Package replid follows the replication id of every Redis master: the
// order-writer's worker that hears at once that a master's data may have
// moved under it (a restart, a restore, a failover), so that the sales it
// holds are checked and reconciled now rather than at the next round.
package replid

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/redisconn"
)

// Watcher follows the replication id of every Redis master (the one node, or
// each master of a cluster). Redis draws a new id whenever a server's data
// may have moved under it: a restart (whatever it loaded), a replica
// promoted by a failover. A sale is stamped with the id of the server that
// holds it, and the gate itself compares the stamp with its server's id;
// Watcher is how the order-writer hears of a change at once and checks the
// sales (the sales of the shard that changed are the ones it reconciles),
// rather than at its next round.
type Watcher struct {
	rdb      redis.UniversalClient
	interval time.Duration
	logger   *slog.Logger

	mu   sync.Mutex
	last map[string]string // master address -> replication id
	// Changes, when set, counts the changes seen (not the first read).
	Changes prometheus.Counter
	// OnChange, when set, runs after every read that found another id than
	// the last one read on some master, a master that was not there before
	// included, and after the first successful read (a program that starts
	// during an outage cannot know the ids before it).
	OnChange func(ctx context.Context)
}

// NewWatcher reads the masters' replication ids every interval.
func NewWatcher(rdb redis.UniversalClient, interval time.Duration, logger *slog.Logger) *Watcher {
	return &Watcher{rdb: rdb, interval: interval, logger: logger}
}

// CountChanges counts the changes e sees in reg's
// seckill_redis_replication_id_changes_total.
func (e *Watcher) CountChanges(reg prometheus.Registerer) *Watcher {
	e.Changes = prometheus.NewCounter(prometheus.CounterOpts{Name: "seckill_redis_replication_id_changes_total",
		Help: "Times a Redis master's replication id changed (a restart, a restore, a failover: writes may be lost); the sales it holds pause until reconciled."})
	reg.MustRegister(e.Changes)
	return e
}

// Current is the replication id of each master as last read, by address.
func (e *Watcher) Current() map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.last)
}

// Refresh reads the ids now and reports whether any changed since the
// last read (the first read is no change). A master that cannot be read
// (one shard failing over) leaves its last id in place; the others are
// compared.
func (e *Watcher) Refresh(ctx context.Context) (bool, error) {
	ids, err := redisconn.ReplicationIDs(ctx, e.rdb)
	if len(ids) == 0 {
		return false, err
	}
	e.mu.Lock()
	first := e.last == nil
	var moved []any
	if first {
		e.last = map[string]string{}
	}
	for addr, id := range ids {
		if old, ok := e.last[addr]; ok && old != id || !ok && !first {
			moved = append(moved, addr, old+" -> "+id)
		}
		e.last[addr] = id
	}
	e.mu.Unlock()
	if len(moved) > 0 {
		if e.Changes != nil {
			e.Changes.Inc()
		}
		e.logger.Warn("a Redis master has a new replication id (a restart, a restore or a failover): it may have lost writes; "+
			"each sale it holds pauses until it is reconciled from MySQL", moved...)
	}
	if (first || len(moved) > 0) && e.OnChange != nil {
		e.OnChange(ctx)
	}
	return len(moved) > 0, err
}

// Run refreshes every interval until ctx ends; a failed read is retried
// at the next one.
func (e *Watcher) Run(ctx context.Context) error {
	t := time.NewTicker(e.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		// A master slower than this is read again at the next round: the
		// others' ids, a promoted replica's among them, are not held back.
		rctx, cancel := context.WithTimeout(ctx, max(e.interval, 500*time.Millisecond))
		if _, err := e.Refresh(rctx); err != nil && ctx.Err() == nil {
			e.logger.Debug("redis replication ids: a read failed; trying again", "err", err)
		}
		cancel()
	}
}

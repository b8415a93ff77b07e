// Package idgen makes 64-bit, time-ordered ids that are unique across
// processes and restarts, as in the course (黑马点评's RedisIdWorker): a zero sign bit,
// 31 bits of seconds since Epoch, 32 bits of a per-day sequence kept in
// Redis. Unlike the course it does not INCR once per id: it leases a block
// of sequence numbers with one INCRBY and hands them out locally.
package idgen

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
)

// Epoch is second zero of the ids: 2026-01-01 UTC. 31 bits of seconds last
// until 2094.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const seqBits = 32

// Generator hands out ids of one kind ("order"). Safe for concurrent use.
type Generator struct {
	rdb   redis.Cmdable
	kind  string
	block int64
	now   func() time.Time
	stamp bool

	mu   sync.Mutex
	day  string // the day the current block was leased for
	next int64  // next sequence number to hand out
	end  int64  // one past the block's last
}

// New leases blocks of block sequence numbers per Redis round trip.
func New(rdb redis.Cmdable, kind string, block int64) *Generator {
	return &Generator{rdb: rdb, kind: kind, block: block, now: time.Now}
}

// LeaseMargin is how many sequence numbers a lease under a new replication
// id skips: about a million, far more than this system leases in the
// second or two of writes Redis can lose.
const LeaseMargin = 1 << 20

// WithReplicationStamp stamps each lease with the replication id of the
// Redis that leases it (read by the script itself); the first lease under
// a new one skips LeaseMargin numbers, in case the counter rolled back
// with the writes Redis lost.
func (g *Generator) WithReplicationStamp() *Generator {
	g.stamp = true
	return g
}

// Above makes sure no id up to id plus margin is handed out again on id's
// day: the day's counter is raised past them (never lowered). After Redis
// lost writes the counter may have rolled back below ids already in use;
// margin covers those leased meanwhile that no store has seen yet (blocks
// held by API instances, orders still in flight). Blocks leased before the
// call stay valid; new leases start above the floor.
func (g *Generator) Above(ctx context.Context, id, margin int64) error {
	secs, seq := id>>seqBits, id&(1<<seqBits-1)
	day := Epoch.Add(time.Duration(secs) * time.Second).UTC().Format("20060102")
	floor := min(seq+1+margin, 1<<seqBits)
	if err := lua.IDFloor.Run(ctx, g.rdb, []string{"id:" + g.kind + ":" + day}, floor).Err(); err != nil {
		return fmt.Errorf("idgen: raise the %s counter of %s: %w", g.kind, day, err)
	}
	return nil
}

// yesterday is the day before day, both as "20060102".
func yesterday(day string) string {
	t, _ := time.Parse("20060102", day)
	return t.AddDate(0, 0, -1).Format("20060102")
}

// Next is a new id.
func (g *Generator) Next(ctx context.Context) (int64, error) {
	now := g.now().UTC()
	day := now.Format("20060102")
	g.mu.Lock()
	defer g.mu.Unlock()
	// A block belongs to the day it was leased for: each day's counter
	// starts at zero, so yesterday's block used after midnight could repeat
	// a sequence number of today's counter within the same second.
	if day != g.day || g.next >= g.end {
		if err := g.lease(ctx, day); err != nil {
			return 0, err
		}
	}
	seq := g.next
	g.next++
	secs := now.Unix() - Epoch.Unix()
	if secs < 0 || secs >= 1<<31 {
		return 0, fmt.Errorf("idgen: clock %v outside the id range", now)
	}
	return secs<<seqBits | seq, nil
}

func (g *Generator) lease(ctx context.Context, day string) error {
	key := "id:" + g.kind + ":" + day
	stamp := ""
	if g.stamp {
		stamp = "1"
	}
	end, err := lua.IDLease.Run(ctx, g.rdb, []string{key, "{" + key + "}:epoch"}, g.block, stamp, LeaseMargin).Int64()
	if err != nil {
		return fmt.Errorf("idgen: lease a block of %s ids: %w", g.kind, err)
	}
	if end > 1<<seqBits {
		return fmt.Errorf("idgen: %s sequence for %s exhausted", g.kind, day)
	}
	// Yesterday's counter, done counting, expires (a day's own has none
	// while it counts: see id_lease.lua).
	if day != g.day {
		if err := g.rdb.Expire(ctx, "id:"+g.kind+":"+yesterday(day), 48*time.Hour).Err(); err != nil {
			return fmt.Errorf("idgen: expire yesterday's %s counter: %w", g.kind, err)
		}
	}
	g.day, g.next, g.end = day, end-g.block, end
	return nil
}

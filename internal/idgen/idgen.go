// Package idgen makes 64-bit, time-ordered ids that are unique across
// processes and restarts, as in the course (黑马点评's RedisIdWorker): a zero sign bit,
// 31 bits of seconds since Epoch, 32 bits of a per-day sequence kept in
// Redis. Unlike the course it does not INCR once per id: it leases a block
// of sequence numbers with one INCRBY and hands them out locally.
//
// The day's sequence is split into Counters ranges, each kept by a counter
// of its own in its own part of the slot space, so spread over a
// cluster's masters (at least two of three; see counterKey): a generator
// leases from one, and when that one's master cannot answer (it
// fails over) from the next. One counter would stop every order of every
// sale, whatever master the sale is on, once the blocks leased before its
// master failed are spent.
package idgen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/redisconn"
	"github.com/seckill/seckill/lua"
)

// Epoch is second zero of the ids: 2026-01-01 UTC. 31 bits of seconds last
// until 2094.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const seqBits = 32

// Counters is how many counters share a day's sequence, each a range of
// 2^rangeBits numbers (a billion a day each).
const (
	Counters  = 4
	rangeBits = seqBits - 2
)

// Generator hands out ids of one kind ("order"). Safe for concurrent use.
type Generator struct {
	rdb   redis.Cmdable
	kind  string
	block int64
	now   func() time.Time
	stamp bool

	mu    sync.Mutex
	first int    // the counter this generator leases from first
	day   string // the day the current block was leased for
	base  int64  // the current block's counter's range: counter << rangeBits
	next  int64  // next sequence number to hand out, within the range
	end   int64  // one past the block's last
}

// New leases blocks of block sequence numbers per Redis round trip.
func New(rdb redis.Cmdable, kind string, block int64) *Generator {
	return &Generator{rdb: rdb, kind: kind, block: block, now: time.Now, first: rand.IntN(Counters)}
}

// From makes the generator lease from counter k first (0 to Counters-1; a
// new generator draws one at random, which spreads the leases of many
// instances over the counters).
func (g *Generator) From(k int) *Generator {
	g.first = k % Counters
	return g
}

// CounterKey is counter k of kind's sequence on day (0 to Counters-1).
func CounterKey(kind, day string, k int) string { return counterKey(kind, day, k) }

// counterKey is counter k of kind's sequence on day. Counter 0 is the key
// a single counter had, so that a generator of an older release and one of
// this share it through an upgrade; the others carry a hash tag that puts
// each in its own quarter of the slot space (the second, third and
// fourth: on three masters, counters 2 and 3 share the third).
func counterKey(kind, day string, k int) string {
	key := "id:" + kind + ":" + day
	if k == 0 {
		return key
	}
	return key + ":{" + redisconn.TagIn("idgen-counter-"+strconv.Itoa(k), k, Counters) + "}"
}

// stampKey is where counter key's last lease stamp lives, on its slot.
func stampKey(key string, k int) string {
	if k == 0 {
		return "{" + key + "}:epoch"
	}
	return key + ":epoch"
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

// Above makes sure no sequence number of id's range up to id's plus margin
// is handed out again on id's day: the counter of that range is raised
// past them (never lowered). After Redis lost writes the counter may have
// rolled back below ids already in use; margin covers those leased
// meanwhile that no store has seen yet (blocks held by API instances,
// orders still in flight). Blocks leased before the call stay valid; new
// leases start above the floor. The other counters are not raised: a
// counter that lost writes lost them with a new replication id, and its
// next lease under the stamp skips LeaseMargin (WithReplicationStamp).
func (g *Generator) Above(ctx context.Context, id, margin int64) error {
	secs, seq := id>>seqBits, id&(1<<seqBits-1)
	day := Epoch.Add(time.Duration(secs) * time.Second).UTC().Format("20060102")
	k := int(seq >> rangeBits)
	floor := min(seq&(1<<rangeBits-1)+1+margin, 1<<rangeBits)
	if err := lua.IDFloor.Run(ctx, g.rdb, []string{counterKey(g.kind, day, k)}, floor).Err(); err != nil {
		return fmt.Errorf("idgen: raise the %s counter %d of %s: %w", g.kind, k, day, err)
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
	seq := g.base | g.next
	g.next++
	secs := now.Unix() - Epoch.Unix()
	if secs < 0 || secs >= 1<<31 {
		return 0, fmt.Errorf("idgen: clock %v outside the id range", now)
	}
	return secs<<seqBits | seq, nil
}

func (g *Generator) lease(ctx context.Context, day string) error {
	stamp := ""
	if g.stamp {
		stamp = "1"
	}
	var errs []error
	// Each counter in turn, each for leaseWait; then, all of them slow (a
	// loaded Redis rather than a stalled master), the first again with
	// the caller's whole deadline.
	for i := range Counters + 1 {
		k, wait := (g.first+i)%Counters, time.Duration(0)
		if i < Counters {
			wait = leaseWait
		}
		key := counterKey(g.kind, day, k)
		end, err := g.leaseFrom(ctx, wait, []string{key, stampKey(key, k)}, stamp)
		switch {
		case err != nil:
			// A lease whose answer did not come may have been made: its
			// numbers are skipped, never handed out twice.
			errs = append(errs, fmt.Errorf("counter %d: %w", k, err))
			if ctx.Err() != nil {
				return fmt.Errorf("idgen: lease a block of %s ids: %w", g.kind, errors.Join(errs...))
			}
			continue
		case end > 1<<rangeBits:
			errs = append(errs, fmt.Errorf("counter %d: exhausted for %s", k, day))
			continue
		}
		if day != g.day {
			g.expireYesterday(ctx, day)
		}
		// The next lease tries this counter first: the one that answers.
		g.first, g.day, g.base, g.next, g.end = k, day, int64(k)<<rangeBits, end-g.block, end
		return nil
	}
	return fmt.Errorf("idgen: lease a block of %s ids: %w", g.kind, errors.Join(errs...))
}

// errLeaseSlow is a lease not answered within its wait.
var errLeaseSlow = errors.New("no answer within the lease's wait: the next counter is asked")

// leaseFrom leases a block from the counter at keys, waiting at most wait
// for it (0: as long as ctx lets). go-redis does not cut a read short at
// its context's deadline (its ContextTimeoutEnabled is off: a command
// waits its read timeout), so the lease runs on its own and is left
// behind when the wait is over; it ends within the client's timeouts.
func (g *Generator) leaseFrom(ctx context.Context, wait time.Duration, keys []string, stamp string) (int64, error) {
	type leased struct {
		end int64
		err error
	}
	done := make(chan leased, 1)
	go func() {
		end, err := lua.IDLease.Run(ctx, g.rdb, keys, g.block, stamp, LeaseMargin).Int64()
		done <- leased{end, err}
	}()
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case r := <-done:
		return r.end, r.err
	case <-timeout:
		return 0, errLeaseSlow
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// leaseWait bounds a lease from one counter before the next is asked: far
// above a lease's round trip, far below what the client spends on a
// master that does not answer (its read timeout, per try, times its
// tries: seconds), which Next — holding the generator while it leases —
// would take from every order of the instance, whatever their sales'
// masters.
const leaseWait = 300 * time.Millisecond

// expireYesterday gives yesterday's counters, done counting, an expiry (a
// day's own have none while they count: see id_lease.lua). Best effort: a
// counter whose master cannot answer now keeps counting nothing, and the
// next day's first lease tries again.
func (g *Generator) expireYesterday(ctx context.Context, day string) {
	for k := range Counters {
		_ = g.rdb.Expire(ctx, counterKey(g.kind, yesterday(day), k), 48*time.Hour).Err()
	}
}

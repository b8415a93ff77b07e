package salestate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/redisconn"
	"github.com/seckill/seckill/internal/sale"
)

// A sale of one voucher is sold from N stock buckets (docs/design.md,
// "One hot item across masters"). N = 1 is the layout every sale had before
// buckets: one key set under the tag {id}. With N > 1 each bucket is a whole
// key set of its own under the tag {id.b.s}, where s is the first salt that
// puts the tag's slot in the b-th of N equal slot ranges: Redis Cluster
// deals slots to its masters in equal contiguous ranges, so with N masters
// the buckets land on N different ones. The tags depend on the id and N
// only, so every process computes them alike, with no directory to lose. A
// resharding moves slots, not tags: buckets may then share a master, which
// costs only their spread (TestBucketsLandOnDifferentMasters says where they
// are). With N > 1, the key set under {id} holds only the voucher hash, a
// directory with the field "buckets" = N, which the gate reads on the way to
// a bucket the first time a process sees the voucher.

// Layout is where a voucher's sale lives: its buckets' hash tags, bucket b
// at Tags[b].
type Layout struct {
	VoucherID int64
	Tags      []string // without braces
}

// LayoutOf is the layout of voucherID's sale in n buckets.
func LayoutOf(voucherID int64, n int) Layout {
	id := strconv.FormatInt(voucherID, 10)
	if n <= 1 {
		return Layout{VoucherID: voucherID, Tags: []string{id}}
	}
	tags := make([]string, n)
	for b := range n {
		tags[b] = redisconn.TagIn(id+"."+strconv.Itoa(b), b, n)
	}
	return Layout{VoucherID: voucherID, Tags: tags}
}

// N is how many buckets the sale has.
func (l Layout) N() int { return len(l.Tags) }

// Home is the bucket of userID: where the user's buyer record and
// reservation live and where the user's attempts take their unit. The same
// function partitions a reconcile's buyers (Store.Rebuild).
func (l Layout) Home(userID int64) int { return Home(userID, l.N()) }

// Home is userID's bucket among n: a mix of the id's bits, so that ids
// handed out in strides spread as well as random ones.
func Home(userID int64, n int) int {
	if n <= 1 {
		return 0
	}
	x := uint64(userID)
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return int(x % uint64(n))
}

// keys are bucket b's keys under prefix.
func (l Layout) keys(prefix string, b int) Keys { return keysWithTag(prefix, l.Tags[b]) }

// layouts remembers the layout of each voucher the store has met, tags
// computed: the gate reads it on every attempt. A sale's N is fixed for its
// life, and the gate script checks the caller's N against the bucket's on
// every attempt (OtherLayout). What a bucket cannot tell is that the sale it
// belonged to was made anew under the same id with fewer buckets: it
// answers "no such voucher" if it is gone (the gate then reads the
// directory again at once), and sells the old sale's units if it is still
// there. So a layout is remembered for layoutTTL only, then read again:
// one more round trip per voucher and instance every layoutTTL.
type layouts struct {
	m     sync.Map // voucher id -> remembered
	clock func() time.Time
}

// layoutTTL is how long a remembered layout is used without reading the
// sale's directory again.
const layoutTTL = 10 * time.Second

type remembered struct {
	Layout
	at time.Time
}

func (c *layouts) now() time.Time {
	if c.clock != nil {
		return c.clock()
	}
	return time.Now()
}

// get is voucherID's remembered layout, if read within layoutTTL.
func (c *layouts) get(voucherID int64) (Layout, bool) {
	v, ok := c.m.Load(voucherID)
	if !ok {
		return Layout{}, false
	}
	r := v.(remembered)
	if c.now().Sub(r.at) >= layoutTTL {
		return Layout{}, false
	}
	return r.Layout, true
}

// put remembers voucherID's sale in n buckets, as of now, and returns its
// layout.
func (c *layouts) put(voucherID int64, n int) Layout {
	l := LayoutOf(voucherID, n)
	if v, ok := c.m.Load(voucherID); ok && v.(remembered).N() == n {
		l = v.(remembered).Layout // its tags computed already
	}
	c.m.Store(voucherID, remembered{Layout: l, at: c.now()})
	return l
}

// readWithin reports whether voucherID's layout was read from Redis
// within d.
func (c *layouts) readWithin(voucherID int64, d time.Duration) bool {
	v, ok := c.m.Load(voucherID)
	return ok && c.now().Sub(v.(remembered).at) < d
}

// forget drops voucherID's remembered layout.
func (c *layouts) forget(voucherID int64) { c.m.Delete(voucherID) }

// Remembered is voucherID's layout as the store remembers it, if read
// within the last ten seconds: the gate's way to a bucket without a read.
func (s *Store) Remembered(voucherID int64) (Layout, bool) { return s.layouts.get(voucherID) }

// Remember remembers voucherID's sale in n buckets, as of now, and returns
// its layout.
func (s *Store) Remember(voucherID int64, n int) Layout { return s.layouts.put(voucherID, n) }

// ReadWithin reports whether voucherID's layout was read from Redis within
// d.
func (s *Store) ReadWithin(voucherID int64, d time.Duration) bool {
	return s.layouts.readWithin(voucherID, d)
}

// Forget drops voucherID's remembered layout.
func (s *Store) Forget(voucherID int64) { s.layouts.forget(voucherID) }

// LayoutOf is voucherID's layout as Redis has it: the directory's N, or 1
// when there is none (a sale in one bucket, or none at all).
func (s *Store) LayoutOf(ctx context.Context, voucherID int64) (Layout, error) {
	if l, ok := s.layouts.get(voucherID); ok {
		return l, nil
	}
	v, err := s.rdb.HMGet(ctx, s.KeysOf(voucherID).Voucher, FieldBuckets, FieldStock).Result()
	if err != nil {
		return Layout{}, fmt.Errorf("layout of voucher %d: %w", voucherID, err)
	}
	n := 1
	switch {
	case v[0] != nil:
		if n, err = strconv.Atoi(fmt.Sprint(v[0])); err != nil || n < 1 || n > sale.MaxBuckets {
			return Layout{}, fmt.Errorf("layout of voucher %d: %d buckets", voucherID, n)
		}
	case v[1] == nil:
		if l, ok := s.DirectoryLost(ctx, voucherID); ok {
			return l, nil
		}
		// No sale: not remembered, as one warmed later may have buckets.
		return LayoutOf(voucherID, 1), nil
	}
	return s.layouts.put(voucherID, n), nil
}

// LayoutToRepair is voucherID's layout for a reconcile. It is the
// directory's, or, when Redis lost the directory while buckets survived (a
// failover of the master of the voucher's own tag), the N that bucket 0 of
// some layout records: a reconcile must freeze and read the buckets that
// hold reservations, not take the sale for one bucket.
func (s *Store) LayoutToRepair(ctx context.Context, voucherID int64) (Layout, error) {
	lay, err := s.LayoutOf(ctx, voucherID)
	if err != nil || lay.N() > 1 {
		return lay, err
	}
	if _, known := s.layouts.get(voucherID); known {
		return lay, nil
	}
	live, retired, err := s.bucketsRecorded(ctx, voucherID)
	switch {
	case err != nil:
		return lay, err
	case len(live) > 0:
		return LayoutOf(voucherID, live[0]), nil
	case len(retired) > 0:
		return LayoutOf(voucherID, retired[0]), nil
	}
	return lay, nil
}

// bucketsRecorded are the Ns, from 2 up, whose bucket 0 of a layout of
// voucherID's sale in N buckets records N: live (no expiry) and retired
// (an ended sale's keys, waiting for their keep's expiry) apart. A sale
// made anew under the same id in another N leaves the old buckets beside
// the new until then.
func (s *Store) bucketsRecorded(ctx context.Context, voucherID int64) (live, retired []int, err error) {
	type probe struct {
		n   *redis.StringCmd
		ttl *redis.DurationCmd
	}
	probes := make([]probe, sale.MaxBuckets+1)
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for n := 2; n <= sale.MaxBuckets; n++ {
			k := BucketKeys(s.prefix, voucherID, n, 0).Voucher
			probes[n] = probe{p.HGet(ctx, k, FieldBuckets), p.PTTL(ctx, k)}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, fmt.Errorf("layout of voucher %d: its buckets: %w", voucherID, err)
	}
	for n := 2; n <= sale.MaxBuckets; n++ {
		if got, err := probes[n].n.Int(); err != nil || got != n {
			continue
		}
		if probes[n].ttl.Val() > 0 {
			retired = append(retired, n)
		} else {
			live = append(live, n)
		}
	}
	return live, retired, nil
}

// DirectoryLost looks for the buckets of a sale whose directory is gone
// (a failover of its master lost the write) and remembers their layout:
// the buckets sell on until a reconcile rewrites the directory. Only one
// live layout is taken: beside a sale made anew, or none, the voucher
// stays unknown until the reconcile. Every unknown voucher would cost a
// probe of MaxBuckets-1 keys, which a crowd of made-up ids could turn into
// a load on Redis: the probes are limited per instance, and concurrent
// ones of a voucher share one.
func (s *Store) DirectoryLost(ctx context.Context, voucherID int64) (Layout, bool) {
	v, _, _ := s.probing.Do(strconv.FormatInt(voucherID, 10), func() (any, error) {
		if l, ok := s.layouts.get(voucherID); ok {
			return l, nil
		}
		if !s.probes.Allow() {
			return nil, nil
		}
		live, _, err := s.bucketsRecorded(ctx, voucherID)
		if err != nil || len(live) != 1 {
			return nil, nil
		}
		return s.layouts.put(voucherID, live[0]), nil
	})
	l, ok := v.(Layout)
	return l, ok
}

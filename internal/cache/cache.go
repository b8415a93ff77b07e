// Package cache is cache-aside over Redis for values loaded from MySQL, with
// the protections of the 黑马点评 course's cache chapter: a null marker for missing
// rows (penetration), TTL jitter (avalanche), one rebuild per key across
// goroutines and processes (breakdown), logical expiry for hot keys, and
// an owner check on write-back so a slow reader cannot put a stale row
// back after an invalidation.
package cache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/seckill/seckill/lua"
)

// Strategy is how one key family is cached.
type Strategy struct {
	TTL     time.Duration // a found value's lifetime (plain mode)
	Jitter  time.Duration // up to this much is added to TTL, at random
	NullTTL time.Duration // a missing row's marker lives this long
	// Logical, when set, is hot-key mode: values never expire in Redis;
	// after Logical they are stale, served while one background rebuild
	// runs.
	Logical time.Duration
	Lease   time.Duration // how long one rebuild may hold the key
	Wait    time.Duration // how long a caller waits for another's rebuild
}

// Loader reads the value from the database; found is false when the row
// does not exist.
type Loader[T any] func(ctx context.Context) (value T, found bool, err error)

// Metrics count what the caches do, by family.
type Metrics struct {
	lookups *prometheus.CounterVec
	loads   *prometheus.CounterVec
}

// NewMetrics registers the cache metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_cache_lookups_total",
			Help: "Cache lookups by family and state (fresh, stale, stale-rebuild, rebuild, wait)."}, []string{"family", "state"}),
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_cache_loads_total",
			Help: "Loads from the database by family: one per rebuild."}, []string{"family"}),
	}
	reg.MustRegister(m.lookups, m.loads)
	return m
}

// Cache caches values of one key family.
type Cache[T any] struct {
	rdb     redis.UniversalClient
	family  string
	key     func(id string) string
	s       Strategy
	group   singleflight.Group
	logger  *slog.Logger
	metrics *Metrics
	// Now is the clock of the wait for another's rebuild and of a logical
	// expiry; nil: time.Now.
	Now func() time.Time
	// callers counts the callers of each key's flight, so that a test can
	// wait until a caller has joined one.
	callers sync.Map // key -> *atomic.Int32
}

func (c *Cache[T]) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// New is the cache of family, whose key for id is key(id).
func New[T any](rdb redis.UniversalClient, family string, key func(id string) string, s Strategy, logger *slog.Logger, m *Metrics) *Cache[T] {
	return &Cache[T]{rdb: rdb, family: family, key: key, s: s, logger: logger, metrics: m}
}

// Get returns id's value (found false for a missing row), from Redis when
// it is there and otherwise loading it with load, once per key across
// this process (singleflight) and across processes (the entry's owner).
func (c *Cache[T]) Get(ctx context.Context, id string, load Loader[T]) (T, bool, error) {
	key := c.key(id)
	type result struct {
		v     T
		found bool
	}
	// The flight is shared: it runs on a deadline of its own, with the
	// first caller's values (its request id) but not its cancellation, so
	// that one caller hanging up does not fail every caller sharing it.
	// Each caller still stops waiting when its own context ends.
	n, _ := c.callers.LoadOrStore(key, new(atomic.Int32))
	n.(*atomic.Int32).Add(1)
	defer n.(*atomic.Int32).Add(-1)
	flight := c.group.DoChan(key, func() (any, error) {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.s.Wait+c.s.Lease)
		defer cancel()
		v, found, err := c.get(fctx, key, load)
		return result{v, found}, err
	})
	var zero T
	select {
	case <-ctx.Done():
		return zero, false, ctx.Err()
	case r := <-flight:
		if r.Err != nil {
			return zero, false, r.Err
		}
		res := r.Val.(result)
		return res.v, res.found, nil
	}
}

func (c *Cache[T]) get(ctx context.Context, key string, load Loader[T]) (T, bool, error) {
	var zero T
	owner := token()
	deadline := c.now().Add(c.s.Wait)
	for {
		res, err := lua.CacheGet.Run(ctx, c.rdb, []string{key}, owner, c.s.Lease.Milliseconds()).Slice()
		if err != nil {
			return zero, false, fmt.Errorf("cache %s: read: %w", key, err)
		}
		state, _ := res[1].(string)
		c.count(state)
		raw, _ := res[0].(string)
		switch state {
		case "fresh", "stale":
			return c.decode(key, raw)
		case "stale-rebuild":
			go c.rebuildInBackground(key, owner, load)
			return c.decode(key, raw)
		case "rebuild":
			return c.rebuild(ctx, key, owner, load)
		}
		// Someone else rebuilds: wait for the value, a bounded time, then
		// load it ourselves rather than fail.
		if c.now().After(deadline) {
			c.logger.WarnContext(ctx, "cache: waited too long for another rebuild; loading directly", "key", key)
			c.countLoad()
			return load(ctx)
		}
		select {
		case <-ctx.Done():
			return zero, false, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (c *Cache[T]) decode(key, raw string) (T, bool, error) {
	var v T
	if raw == "" {
		return v, false, nil
	}
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return v, false, fmt.Errorf("cache %s: decode: %w", key, err)
	}
	return v, true, nil
}

// rebuild loads the value and writes it back if the entry is still ours.
func (c *Cache[T]) rebuild(ctx context.Context, key, owner string, load Loader[T]) (T, bool, error) {
	c.countLoad()
	v, found, err := load(ctx)
	if err != nil {
		return v, false, err
	}
	raw, ttl, exp := "", c.s.NullTTL, int64(0)
	if found {
		b, err := json.Marshal(v)
		if err != nil {
			return v, found, fmt.Errorf("cache %s: encode: %w", key, err)
		}
		raw = string(b)
		ttl = c.s.TTL
		if c.s.Jitter > 0 {
			ttl += mrand.N(c.s.Jitter)
		}
		if c.s.Logical > 0 {
			ttl, exp = 0, c.now().Add(c.s.Logical).UnixMilli()
		}
	}
	written, err := lua.CacheSet.Run(ctx, c.rdb, []string{key}, owner, raw, ttl.Milliseconds(), exp).Int()
	if err != nil {
		return v, found, fmt.Errorf("cache %s: write back: %w", key, err)
	}
	if written == 0 {
		// Invalidated (or taken over) while we loaded: what we read may be
		// older than the change, so it stays out of the cache. The caller
		// still gets it: it was current when its request began.
		c.logger.DebugContext(ctx, "cache: write-back refused, the entry changed meanwhile", "key", key)
	}
	return v, found, nil
}

func (c *Cache[T]) rebuildInBackground(key, owner string, load Loader[T]) {
	ctx, cancel := context.WithTimeout(context.Background(), c.s.Lease)
	defer cancel()
	if _, _, err := c.rebuild(ctx, key, owner, load); err != nil {
		c.logger.Warn("cache: background rebuild failed; the stale value stays until the lease ends", "key", key, "err", err)
	}
}

// Invalidate deletes the entries of ids: the next read rebuilds them, and
// a rebuild already under way cannot write back.
func (c *Cache[T]) Invalidate(ctx context.Context, ids ...string) error {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = c.key(id)
	}
	// One DEL per key: on Redis Cluster the entries sit in different slots,
	// which one multi-key DEL refuses (CROSSSLOT); the pipeline sends them
	// to each key's master together.
	_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Del(ctx, k)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("invalidate %v: %w", keys, err)
	}
	return nil
}

func (c *Cache[T]) count(state string) {
	if c.metrics != nil {
		c.metrics.lookups.WithLabelValues(c.family, state).Inc()
	}
}

func (c *Cache[T]) countLoad() {
	if c.metrics != nil {
		c.metrics.loads.WithLabelValues(c.family).Inc()
	}
}

func token() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

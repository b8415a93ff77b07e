package daemon

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/redisconn"
)

// redisMemory exports, at each scrape, every master's memory in use, its
// limit and the keys it has evicted, read from INFO: the headroom that
// decides when Redis starts evicting (sessions among the keys with an
// expiry) and then refusing writes. Each program reads the masters it
// uses; alerts take the largest reading per master.
type redisMemory struct {
	rdb                  redis.UniversalClient
	used, limit, evicted *prometheus.Desc
}

// WatchRedisMemory registers the Redis memory metrics of rdb on reg.
func WatchRedisMemory(reg prometheus.Registerer, rdb redis.UniversalClient) {
	reg.MustRegister(&redisMemory{rdb: rdb,
		used: prometheus.NewDesc("seckill_redis_memory_used_bytes",
			"Memory a Redis master uses (INFO used_memory).", []string{"master"}, nil),
		limit: prometheus.NewDesc("seckill_redis_memory_limit_bytes",
			"A Redis master's maxmemory: past it, it evicts keys with an expiry (volatile-lru), then refuses writes; 0 when it has none.", []string{"master"}, nil),
		evicted: prometheus.NewDesc("seckill_redis_evicted_keys_total",
			"Keys a Redis master has evicted since it started (INFO evicted_keys): caches, and sessions and login codes too.", []string{"master"}, nil),
	})
}

func (m *redisMemory) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.used
	ch <- m.limit
	ch <- m.evicted
}

// Collect reads each master within a scrape's patience; a master that
// does not answer is left out of this scrape (seckill_dependency_up says
// why).
func (m *redisMemory) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var mu sync.Mutex
	_ = redisconn.EachMaster(ctx, m.rdb, func(ctx context.Context, master *redis.Client) error {
		mem, err := master.Info(ctx, "memory").Result()
		if err != nil {
			return err
		}
		stats, err := master.Info(ctx, "stats").Result()
		if err != nil {
			return err
		}
		addr := master.Options().Addr
		mu.Lock()
		defer mu.Unlock()
		for _, v := range []struct {
			desc  *prometheus.Desc
			kind  prometheus.ValueType
			value string
		}{
			{m.used, prometheus.GaugeValue, redisconn.InfoField(mem, "used_memory")},
			{m.limit, prometheus.GaugeValue, redisconn.InfoField(mem, "maxmemory")},
			{m.evicted, prometheus.CounterValue, redisconn.InfoField(stats, "evicted_keys")},
		} {
			if n, err := strconv.ParseFloat(v.value, 64); err == nil {
				ch <- prometheus.MustNewConstMetric(v.desc, v.kind, n, addr)
			}
		}
		return nil
	})
}

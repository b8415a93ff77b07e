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
// limit and the keys it has evicted, read from INFO: the headroom left
// before the sale's Redis (noeviction) refuses writes, and the evictions
// that say it runs an evicting policy instead. Each program reads the
// masters it uses; alerts take the largest reading per master.
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
			"A Redis master's maxmemory: past it, it refuses writes (noeviction, as the sale's Redis runs); 0 when it has none.", []string{"master"}, nil),
		evicted: prometheus.NewDesc("seckill_redis_evicted_keys_total",
			"Keys a Redis master has evicted since it started (INFO evicted_keys): none under noeviction; under an evicting policy sessions and login codes too.", []string{"master"}, nil),
	})
}

func (m *redisMemory) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.used
	ch <- m.limit
	ch <- m.evicted
}

// Collect reads each master (INFO memory and stats, one call) and waits
// for the answers at most collectWait: a frozen master would otherwise hold
// the scrape for the client's timeouts and retries (go-redis does not cut
// a read short at its context's deadline). A master not answered in time
// is left out of this scrape; seckill_dependency_up says why.
func (m *redisMemory) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectWait)
	defer cancel()
	var mu sync.Mutex
	var metrics []prometheus.Metric
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = redisconn.EachMaster(ctx, m.rdb, func(ctx context.Context, master *redis.Client) error {
			info, err := master.Info(ctx, "memory", "stats").Result()
			if err != nil {
				return err
			}
			addr := master.Options().Addr
			mu.Lock()
			defer mu.Unlock()
			for _, v := range []struct {
				desc  *prometheus.Desc
				kind  prometheus.ValueType
				field string
			}{
				{m.used, prometheus.GaugeValue, "used_memory"},
				{m.limit, prometheus.GaugeValue, "maxmemory"},
				{m.evicted, prometheus.CounterValue, "evicted_keys"},
			} {
				if n, err := strconv.ParseFloat(redisconn.InfoField(info, v.field), 64); err == nil {
					metrics = append(metrics, prometheus.MustNewConstMetric(v.desc, v.kind, n, addr))
				}
			}
			return nil
		})
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	for _, metric := range metrics {
		ch <- metric
	}
	metrics = nil // a master answering late adds to nothing sent
}

// collectWait bounds a scrape's wait for the masters' INFO.
const collectWait = 2 * time.Second

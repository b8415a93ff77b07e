package loadgen

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/internal/redisconn"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/lua"
)

// GateCeiling is what the gate script by EVALSHA reaches on one voucher
// sold from buckets: one redis-benchmark per bucket, each on its bucket's
// master with its own clients, all at once, random users and order ids,
// stock that never runs out.
type GateCeiling struct {
	Buckets, Masters int
	PerSecond        float64 // every bucket's EVALSHA together
	PerBucket        []float64
}

// RedisBench measures the gate's ceiling for one voucher in buckets
// buckets: requests EVALSHA in all, each bucket its share, from clients
// clients per bucket. The same requests whatever the buckets: the same
// buyers and reservations left in Redis until the run's end.
func (s *Sale) RedisBench(ctx context.Context, buckets, requests, clients int) (GateCeiling, error) {
	voucher := 1<<50 + rand.Int64N(1<<40)
	if err := s.Store.WarmBuckets(ctx, voucher, 1<<40, buckets, time.Now().Add(-time.Minute), time.Now().Add(time.Hour)); err != nil {
		return GateCeiling{}, err
	}
	prefix := s.KeyPrefix
	defer func() {
		for b := range buckets {
			s.Redis.Del(context.Background(), salestate.BucketKeys(prefix, voucher, buckets, b).List()...)
		}
		s.Redis.Del(context.Background(), s.Store.KeysOf(voucher).Voucher)
		s.Redis.SRem(context.Background(), s.Store.ActiveVouchers(), voucher)
	}()
	if err := lua.Seckill.Load(ctx, s.Redis).Err(); err != nil {
		return GateCeiling{}, err
	}
	c := GateCeiling{Buckets: buckets, PerBucket: make([]float64, buckets)}
	share := requests / buckets
	masters := map[string]bool{}
	var g errgroup.Group
	for b := range buckets {
		keys := salestate.BucketKeys(prefix, voucher, buckets, b).List()
		addr, err := redisconn.MasterFor(ctx, s.Redis, keys[0])
		if err != nil {
			return c, err
		}
		masters[addr] = true
		g.Go(func() error {
			rps, err := redisBenchmark(ctx, addr, share, clients, keys, buckets)
			c.PerBucket[b] = rps
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return c, err
	}
	c.Masters = len(masters)
	// Together: every request over the longest of the runs.
	var longest float64
	for _, rps := range c.PerBucket {
		longest = max(longest, float64(share)/rps)
	}
	c.PerSecond = float64(share*buckets) / longest
	t, err := s.Store.Totals(ctx, voucher)
	if err != nil {
		return c, err
	}
	if t.Pending == 0 {
		return c, fmt.Errorf("redis-benchmark: the script accepted no order: wrong keys or arguments")
	}
	return c, nil
}

// redisBenchmark runs redis-benchmark on addr: the gate script by EVALSHA
// on keys, and returns its requests per second.
func redisBenchmark(ctx context.Context, addr string, requests, clients int, keys []string, buckets int) (float64, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	args := []string{"-h", host, "-p", port, "-c", strconv.Itoa(clients), "-n", strconv.Itoa(requests), "-r", "1000000000", "--csv",
		"EVALSHA", lua.Seckill.Hash(), strconv.Itoa(len(keys))}
	args = append(args, keys...)
	// One attempt per call: the script's ceiling unbatched, the worst case
	// (a crowd small enough that its attempts never meet in flight).
	args = append(args, strconv.Itoa(buckets), "__rand_int__", "__rand_int__", "")
	out, err := exec.CommandContext(ctx, "redis-benchmark", args...).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return 0, fmt.Errorf("redis-benchmark on %s: %w: %s%s", addr, err, exit.Stderr, out)
		}
		return 0, fmt.Errorf("redis-benchmark on %s: %w", addr, err)
	}
	records, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
	if err != nil || len(records) < 2 || len(records[1]) < 2 {
		return 0, fmt.Errorf("redis-benchmark output: %q", out)
	}
	rps, err := strconv.ParseFloat(records[1][1], 64)
	if err != nil {
		return 0, fmt.Errorf("redis-benchmark rps %q: %w", records[1][1], err)
	}
	return rps, nil
}

package loadgen

import (
	"context"
	"encoding/csv"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/redisconn"
	"github.com/seckill/seckill/lua"
)

// RedisBench runs the gate script by EVALSHA under redis-benchmark, with
// random users and order ids against a voucher of unbounded stock, and
// returns its requests per second. addr "" is the master that holds the
// voucher (on a cluster, the one that owns its slot).
func (s *Sale) RedisBench(ctx context.Context, addr string, requests, clients int) (float64, error) {
	voucher := 1<<50 + rand.Int64N(1<<40)
	if err := s.Store.Warm(ctx, voucher, 1<<40, time.Now().Add(-time.Minute), time.Now().Add(time.Hour)); err != nil {
		return 0, err
	}
	k := s.Store.KeysOf(voucher)
	if addr == "" {
		var err error
		if addr, err = redisconn.MasterFor(ctx, s.Redis, k.Voucher); err != nil {
			return 0, err
		}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	defer s.Redis.Del(context.Background(), k.Voucher, k.Buyers, k.Pending, k.PendingAt)
	defer s.Redis.SRem(context.Background(), s.Store.ActiveVouchers(), voucher)
	if err := lua.Seckill.Load(ctx, s.Redis).Err(); err != nil {
		return 0, err
	}
	args := []string{"-h", host, "-p", port, "-c", strconv.Itoa(clients), "-n", strconv.Itoa(requests), "-r", "1000000000", "--csv",
		"EVALSHA", lua.Seckill.Hash(), "4", k.Voucher, k.Buyers, k.Pending, k.PendingAt, "__rand_int__", "__rand_int__"}
	out, err := exec.CommandContext(ctx, "redis-benchmark", args...).Output()
	if err != nil {
		return 0, fmt.Errorf("redis-benchmark: %w", err)
	}
	records, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
	if err != nil || len(records) < 2 || len(records[1]) < 2 {
		return 0, fmt.Errorf("redis-benchmark output: %q", out)
	}
	rps, err := strconv.ParseFloat(records[1][1], 64)
	if err != nil {
		return 0, fmt.Errorf("redis-benchmark rps %q: %w", records[1][1], err)
	}
	accepted := s.Redis.HLen(ctx, k.Pending).Val()
	if accepted == 0 {
		return rps, fmt.Errorf("redis-benchmark: the script accepted no order: wrong keys or arguments")
	}
	return rps, nil
}

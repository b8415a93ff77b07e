package testsupport

import (
	"context"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/redisconn"
)

// MustProductionClient is a client of the Redis at addr configured as the
// programs configure theirs (timeouts, retries), with a connection open as
// a serving program has: what a stall test must go through.
func MustProductionClient(tb testing.TB, addr string) *redis.Client {
	tb.Helper()
	client, err := redisconn.New(redisconn.Config{Addr: addr})
	if err != nil {
		tb.Fatal(err)
	}
	rdb := client.(*redis.Client)
	tb.Cleanup(func() { rdb.Close() })
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		tb.Fatal(err)
	}
	return rdb
}

// MustPrivateRedis runs a redis-server of the test's own, stopped when the
// test ends: for tests that stall, stop or kill their Redis, which must not
// disturb the tests sharing the stack's. The process is returned for those
// that stop it. args are more redis-server options, after the defaults
// (no persistence), which they override.
//
// A cluster-enabled node gets its bus port from FreeAddr too: Redis's
// default, the port plus 10000, lands in the kernel's ephemeral range, where
// an outgoing connection may hold it, and the node then exits at start (CI
// saw this).
func MustPrivateRedis(tb testing.TB, args ...string) (*Redis, *exec.Cmd) {
	tb.Helper()
	if slices.Contains(args, "--cluster-enabled") && !slices.Contains(args, "--cluster-port") {
		args = append(args, "--cluster-port", port(FreeAddr(tb)))
	}
	return mustRedisOn(tb, port(FreeAddr(tb)), args...)
}

func port(addr string) string { return addr[strings.LastIndex(addr, ":")+1:] }

// mustRedisOn is MustPrivateRedis on port.
func mustRedisOn(tb testing.TB, port string, args ...string) (*Redis, *exec.Cmd) {
	tb.Helper()
	return mustRedisAt(tb, "127.0.0.1", port, args...)
}

// mustRedisAt is MustPrivateRedis on host:port, a loopback address; its
// own connections to other servers leave from host too, so that a test can
// cut it off from them by address (Cluster.Partition).
func mustRedisAt(tb testing.TB, host, port string, args ...string) (*Redis, *exec.Cmd) {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Fatal("redis-server is not installed: this test runs a Redis of its own (deploy/local/stack.sh install puts it there)")
	}
	addr := net.JoinHostPort(host, port)
	// Protected mode takes only 127.0.0.1 for loopback, and would refuse a
	// replica on another loopback address; the server listens on loopback
	// alone either way.
	cmd := exec.Command(bin, append([]string{"--port", port, "--bind", host, "--bind-source-addr", host, "--protected-mode", "no",
		"--save", "", "--appendonly", "no", "--dir", tb.TempDir()}, args...)...)
	out := &SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	tb.Cleanup(func() { c.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			tb.Fatalf("redis-server on %s did not answer:\n%s", addr, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &Redis{Client: c, Addr: addr}, cmd
}

// busyWait keeps Redis's only thread busy for ARGV[1] ms: nothing else runs
// meanwhile, as during an AOF fsync stall, a fork of a large dataset or a
// starved core.
const busyWait = `local t = redis.call('TIME')
local start = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
while true do
  t = redis.call('TIME')
  if tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000 - start >= tonumber(ARGV[1]) then
    return 1
  end
end`

// StallRedis makes the Redis at addr (a private one: MustPrivateRedis)
// stall for d, from a connection of its
// own, and returns once the stall has begun; the returned channel closes
// when it is over. Commands sent meanwhile wait, and run when it ends, in
// the order Redis read them: a client whose read timed out and that sent
// its command again sees both run.
func StallRedis(tb testing.TB, addr string, d time.Duration) <-chan struct{} {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: d + 5*time.Second, MaxRetries: -1})
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		tb.Fatalf("stall: Redis at %s: %v", addr, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer c.Close()
		if err := c.Eval(ctx, busyWait, nil, d.Milliseconds()).Err(); err != nil {
			tb.Errorf("stall: %v", err)
		}
	}()
	// The script is on its way when Redis stops answering others.
	probe := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 50 * time.Millisecond, MaxRetries: -1})
	defer probe.Close()
	for probe.Ping(ctx).Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	return done
}

// UsedMemory is what the Redis of client uses (INFO used_memory), the
// figure its maxmemory is compared with.
func UsedMemory(tb testing.TB, client redis.Cmdable) int64 {
	tb.Helper()
	return InfoInt(tb, client, "memory", "used_memory")
}

// InfoInt is the integer field of the Redis of client's INFO section.
func InfoInt(tb testing.TB, client redis.Cmdable, section, field string) int64 {
	tb.Helper()
	info, err := client.Info(context.Background(), section).Result()
	if err != nil {
		tb.Fatal(err)
	}
	n, err := strconv.ParseInt(redisconn.InfoField(info, field), 10, 64)
	if err != nil {
		tb.Fatalf("%s: %v", field, err)
	}
	return n
}

// fillMargin is how far below what Redis holds FillToTheLimit leaves its
// limit once Redis refuses a write.
const fillMargin = 128 << 10

// FillToTheLimit sets r's maxmemory to what it holds plus headroom and
// writes 1 KB keys with ttl (0: none) until Redis refuses one (OOM), then
// lowers the limit fillMargin below what Redis holds: with ttl 0 nothing
// it wrote is left for a volatile policy to evict. It
// returns how many it wrote; one that was evicted on the way counts too.
func FillToTheLimit(tb testing.TB, r *Redis, headroom int64, ttl time.Duration) int {
	tb.Helper()
	ctx := context.Background()
	if err := r.Client.ConfigSet(ctx, "maxmemory", strconv.FormatInt(UsedMemory(tb, r.Client)+headroom, 10)).Err(); err != nil {
		tb.Fatal(err)
	}
	value := strings.Repeat("x", 1024)
	limit := int(headroom>>10) * 4 // an evicting Redis never refuses: stop well past its room
	for i := 0; ; i++ {
		err := r.Client.Set(ctx, r.Key("filler:"+strconv.Itoa(i)), value, ttl).Err()
		switch {
		case redisconn.OutOfMemory(err):
			// Refused just past the limit, Redis's figure still moves by
			// tens of KB as clients' buffers come and go (an INFO reply is
			// several KB); a limit this far below what it holds keeps a
			// small write refused through such a dip.
			under := UsedMemory(tb, r.Client) - fillMargin
			if err := r.Client.ConfigSet(ctx, "maxmemory", strconv.FormatInt(under, 10)).Err(); err != nil {
				tb.Fatal(err)
			}
			return i
		case err != nil:
			tb.Fatalf("filling Redis to its limit: %d keys, %v", i, err)
		case i+1 == limit && ttl == 0:
			tb.Fatalf("filling Redis to its limit: %d keys that do not expire and no write refused", limit)
		case i+1 == limit:
			return limit
		}
	}
}

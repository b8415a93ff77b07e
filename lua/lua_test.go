package lua_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/redisconn"
	"github.com/seckill/seckill/internal/testsupport"
	"github.com/seckill/seckill/lua"
)

// The script runs by EVALSHA, and after SCRIPT FLUSH (what a Redis restart
// also does) go-redis gets NOSCRIPT, falls back to EVAL and the script is
// cached again.
func TestScriptRunsByEVALSHAAndSurvivesScriptFlush(t *testing.T) {
	r := testsupport.MustRedis(t)
	ctx := context.Background()
	key := r.Key("lock:{flush}")

	if err := lua.LockExtend.Load(ctx, r.Client).Err(); err != nil {
		t.Fatal(err)
	}
	before := evalshaCalls(t, r.Client)
	r.Client.HSet(ctx, key, "owner", "me")
	if n, err := lua.LockExtend.Run(ctx, r.Client, []string{key}, "me", 60000).Int64(); err != nil || n != 1 {
		t.Fatalf("run before flush = %d, %v", n, err)
	}
	if after := evalshaCalls(t, r.Client); after <= before {
		t.Fatalf("evalsha calls %d -> %d: the script did not run by EVALSHA", before, after)
	}

	if err := r.Client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if n := testsupport.ScriptCachedOn(t, r.Client, lua.LockExtend); n != 0 {
		t.Fatalf("script still cached on %d masters after SCRIPT FLUSH", n)
	}
	if n, err := lua.LockExtend.Run(ctx, r.Client, []string{key}, "me", 60000).Int64(); err != nil || n != 1 {
		t.Fatalf("run after flush = %d, %v", n, err)
	}
	if n := testsupport.ScriptCachedOn(t, r.Client, lua.LockExtend); n != 1 {
		t.Fatalf("script cached on %d masters after the NOSCRIPT fallback, want 1: the one that ran it", n)
	}
}

// LoadAll caches every script on every master (and on a cluster, every
// replica, which a failover may promote).
func TestLoadAllCachesEveryScriptOnEveryMaster(t *testing.T) {
	r := testsupport.MustRedis(t)
	ctx := context.Background()
	if err := r.Client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := lua.LoadAll(ctx, r.Client); err != nil {
		t.Fatal(err)
	}
	ids, err := redisconn.ReplicationIDs(ctx, r.Client)
	if err != nil {
		t.Fatal(err)
	}
	masters := len(ids)
	for _, s := range []*redis.Script{lua.Seckill, lua.WarmSale, lua.ReconcileSale, lua.IDLease, lua.CacheGet, lua.VerifyCode} {
		if n := testsupport.ScriptCachedOn(t, r.Client, s); n != masters {
			t.Fatalf("script %s cached on %d of %d masters", s.Hash(), n, masters)
		}
	}
	if len(r.Cluster) > 0 {
		if cached, err := r.Client.ScriptExists(ctx, lua.Seckill.Hash()).Result(); err != nil || !cached[0] {
			t.Fatalf("SCRIPT EXISTS over every node: %v %v; want the gate cached on replicas too", cached, err)
		}
	}
}

func evalshaCalls(t *testing.T, c redis.UniversalClient) int64 {
	t.Helper()
	var mu sync.Mutex
	var calls int64
	err := redisconn.EachMaster(context.Background(), c, func(ctx context.Context, m *redis.Client) error {
		n := commandCalls(m.Info(ctx, "commandstats").Val(), "evalsha")
		mu.Lock()
		calls += n
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return calls
}

// commandCalls is the calls= count of command in INFO commandstats.
func commandCalls(info, command string) int64 {
	for line := range strings.Lines(info) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+command+":")
		if !ok {
			continue
		}
		for field := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(field, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
	}
	return 0
}

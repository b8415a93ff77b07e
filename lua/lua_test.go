package lua_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

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
	if cached := r.Client.ScriptExists(ctx, lua.LockExtend.Hash()).Val(); cached[0] {
		t.Fatal("script still cached after SCRIPT FLUSH")
	}
	if n, err := lua.LockExtend.Run(ctx, r.Client, []string{key}, "me", 60000).Int64(); err != nil || n != 1 {
		t.Fatalf("run after flush = %d, %v", n, err)
	}
	if cached := r.Client.ScriptExists(ctx, lua.LockExtend.Hash()).Val(); !cached[0] {
		t.Fatal("the NOSCRIPT fallback did not load the script again")
	}
}

func evalshaCalls(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info := c.Info(context.Background(), "commandstats").Val()
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") {
			continue
		}
		for _, field := range strings.Split(strings.TrimPrefix(line, "cmdstat_evalsha:"), ",") {
			if v, ok := strings.CutPrefix(field, "calls="); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				return n
			}
		}
	}
	return 0
}

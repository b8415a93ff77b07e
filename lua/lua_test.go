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

func TestUnlock(t *testing.T) {
	r := testsupport.MustRedis(t)
	ctx := context.Background()
	tests := []struct {
		name      string
		holder    string // "" means the key does not exist
		caller    string
		want      int64
		keyRemain bool
	}{
		{"OwnerReleases", "owner-a", "owner-a", 1, false},
		{"NonOwnerDoesNothing", "owner-a", "owner-b", 0, true},
		{"MissingKey", "", "owner-a", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := r.Key("lock:{" + tt.name + "}")
			if tt.holder != "" {
				r.Client.Set(ctx, key, tt.holder, 0)
			}
			got, err := lua.Unlock.Run(ctx, r.Client, []string{key}, tt.caller).Int64()
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("unlock = %d, want %d", got, tt.want)
			}
			exists := r.Client.Exists(ctx, key).Val() == 1
			if exists != tt.keyRemain {
				t.Fatalf("key exists = %v, want %v", exists, tt.keyRemain)
			}
			if tt.keyRemain && r.Client.Get(ctx, key).Val() != tt.holder {
				t.Fatal("a non-owner's release changed the holder's value")
			}
		})
	}
}

// The script runs by EVALSHA, and after SCRIPT FLUSH (what a Redis restart
// also does) go-redis gets NOSCRIPT, falls back to EVAL and the script is
// cached again.
func TestScriptRunsByEVALSHAAndSurvivesScriptFlush(t *testing.T) {
	r := testsupport.MustRedis(t)
	ctx := context.Background()
	key := r.Key("lock:{flush}")

	if err := lua.Unlock.Load(ctx, r.Client).Err(); err != nil {
		t.Fatal(err)
	}
	before := evalshaCalls(t, r.Client)
	r.Client.Set(ctx, key, "me", 0)
	if n, err := lua.Unlock.Run(ctx, r.Client, []string{key}, "me").Int64(); err != nil || n != 1 {
		t.Fatalf("run before flush = %d, %v", n, err)
	}
	if after := evalshaCalls(t, r.Client); after <= before {
		t.Fatalf("evalsha calls %d -> %d: the script did not run by EVALSHA", before, after)
	}

	if err := r.Client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if cached := r.Client.ScriptExists(ctx, lua.Unlock.Hash()).Val(); cached[0] {
		t.Fatal("script still cached after SCRIPT FLUSH")
	}
	r.Client.Set(ctx, key, "me", 0)
	if n, err := lua.Unlock.Run(ctx, r.Client, []string{key}, "me").Int64(); err != nil || n != 1 {
		t.Fatalf("run after flush = %d, %v", n, err)
	}
	if cached := r.Client.ScriptExists(ctx, lua.Unlock.Hash()).Val(); !cached[0] {
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

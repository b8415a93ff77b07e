package lua_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/redisconn"
	"github.com/seckill/seckill/internal/testsupport"
	"github.com/seckill/seckill/lua"
)

// The script runs by EVALSHA, and after SCRIPT FLUSH (what a Redis restart
// also does) go-redis gets NOSCRIPT and falls back to EVAL on the one node
// that runs it.
func TestScriptRunsByEVALSHAAndSurvivesScriptFlush(t *testing.T) {
	r := testsupport.MustRedis(t)
	ctx := context.Background()
	key := r.Key("lock:{flush}")
	client := r.NewClient(t)
	sent := &testsupport.ScriptLog{}
	client.AddHook(sent)

	if err := lua.LockExtend.Load(ctx, client).Err(); err != nil {
		t.Fatal(err)
	}
	client.HSet(ctx, key, "owner", "me")
	sent.Reset()
	if n, err := lua.LockExtend.Run(ctx, client, []string{key}, "me", 60000).Int64(); err != nil || n != 1 {
		t.Fatalf("run before flush = %d, %v", n, err)
	}
	if calls := sent.Calls(); len(calls) == 0 || calls[0].Name != "evalsha" {
		t.Fatalf("the run sent %+v: not by EVALSHA", calls)
	}

	// The script cache is the servers', shared with the packages testing
	// beside this one: one of them may load the scripts again between the
	// flush and the run, and then that round had nothing to fall back from.
	for round := 1; ; round++ {
		if err := client.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		sent.Reset()
		if n, err := lua.LockExtend.Run(ctx, client, []string{key}, "me", 60000).Int64(); err != nil || n != 1 {
			t.Fatalf("run after flush = %d, %v", n, err)
		}
		calls := sent.Calls()
		if len(calls) > 0 && calls[0] == (testsupport.ScriptCall{Name: "evalsha"}) && round < 3 {
			continue
		}
		// No SCRIPT LOAD, which a cluster client sends to every node.
		want := []testsupport.ScriptCall{{Name: "evalsha", NoScript: true}, {Name: "eval"}}
		if !slices.Equal(calls, want) {
			t.Fatalf("round %d: the run sent %+v after the flush, want %+v", round, calls, want)
		}
		return
	}
}

// LoadAll caches every script on every master (and on a cluster, every
// replica, which a failover may promote).
func TestLoadAllCachesEveryScriptOnEveryMaster(t *testing.T) {
	r := testsupport.MustRedis(t)
	ctx := context.Background()
	ids, err := redisconn.ReplicationIDs(ctx, r.Client)
	if err != nil {
		t.Fatal(err)
	}
	masters := len(ids)
	// A package testing beside this one may flush the script cache between
	// the load and the count: a round short of a script is tried again, and
	// a LoadAll that misses a node falls short in every round.
	var short string
	for round := 1; round <= 3; round++ {
		if err := r.Client.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := lua.LoadAll(ctx, r.Client); err != nil {
			t.Fatal(err)
		}
		short = ""
		for _, s := range []*redis.Script{lua.Seckill, lua.WarmSale, lua.ReconcileSale, lua.IDLease, lua.CacheGet, lua.VerifyCode} {
			if n := testsupport.ScriptCachedOn(t, r.Client, s); n != masters {
				short = fmt.Sprintf("script %s cached on %d of %d masters", s.Hash(), n, masters)
				break
			}
		}
		if short == "" && len(r.Cluster) > 0 {
			if cached, err := r.Client.ScriptExists(ctx, lua.Seckill.Hash()).Result(); err != nil || !cached[0] {
				short = fmt.Sprintf("SCRIPT EXISTS over every node: %v %v; want the gate cached on replicas too", cached, err)
			}
		}
		if short == "" {
			return
		}
	}
	t.Fatal(short)
}

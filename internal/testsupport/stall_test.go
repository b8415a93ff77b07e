package testsupport_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/seckill/seckill/internal/testsupport"
)

// A private cluster node's bus port is not Redis's default (port + 10000,
// inside the kernel's ephemeral range, where an outgoing connection can hold
// it and the node exits at start).
func TestPrivateClusterNodeBusIsBelowTheEphemeralRange(t *testing.T) {
	node, _ := testsupport.MustPrivateRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	got, err := node.Client.ConfigGet(context.Background(), "cluster-port").Result()
	if err != nil {
		t.Fatal(err)
	}
	bus, _ := strconv.Atoi(got["cluster-port"])
	if bus < 23000 || bus >= 27000 {
		t.Fatalf("cluster-port %q; want one of FreeAddr's (23000–26999)", got["cluster-port"])
	}
}

// A Redis filled to its limit stays there when its memory dips a little
// (a client's buffers shrinking, an INFO reply sent, filler keys freed): CI's
// TestRedisAtItsMemoryLimitIsAnAnswer saw a code's write taken after the
// fill, which stopped at the first refusal, just past the limit.
func TestFillToTheLimitHoldsThroughASmallDip(t *testing.T) {
	for _, policy := range []string{"noeviction", "volatile-lru"} {
		t.Run(policy, func(t *testing.T) {
			r, _ := testsupport.MustPrivateRedis(t, "--maxmemory-policy", policy)
			ctx := context.Background()
			if n := testsupport.FillToTheLimit(t, r, 256<<10, 0); n == 0 {
				t.Fatal("nothing written before the limit")
			}
			for i := range 32 {
				if err := r.Client.Del(ctx, r.Key("filler:"+strconv.Itoa(i))).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.Client.Set(ctx, r.Key("after-the-dip"), "code", 0).Err(); err == nil {
				t.Errorf("a write taken after 32 KB freed at the limit: the fill left no margin past it")
			}
		})
	}
}

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

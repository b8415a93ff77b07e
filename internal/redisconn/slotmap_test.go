package redisconn

import (
	"reflect"
	"testing"

	"github.com/redis/go-redis/v9"
)

// CLUSTER NODES as three nodes of a 3+3 cluster told it while master A
// (epoch 1) was failed over to its replica D (epoch 7).
const (
	staleView = `a 127.0.0.1:7001@17001 master,fail - 0 0 1 disconnected 0-5460
b 127.0.0.1:7002@17002 myself,master - 0 0 2 connected 5461-10922
c 127.0.0.1:7003@17003 master - 0 0 3 connected 10923-16383 [10923->-f]
d 127.0.0.1:7004@17004 slave a 0 0 1 connected
e 127.0.0.1:7005@17005 slave b 0 0 2 connected
f 127.0.0.1:7006@17006 slave c 0 0 3 connected
`
	promotedView = `a 127.0.0.1:7001@17001 master,fail - 0 0 1 disconnected
b 127.0.0.1:7002@17002 master - 0 0 2 connected 5461-10922
c 127.0.0.1:7003@17003 master - 0 0 3 connected 10923-16383
d :7004@17004,node-d myself,master - 0 0 7 connected 0-5460
e 127.0.0.1:7005@17005 slave b 0 0 2 connected
f 127.0.0.1:7006@17006 slave c 0 0 3 connected
`
	// A master cut off from the others still names itself, at its old
	// epoch.
	cutOffView = `a 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460
b 127.0.0.1:7002@17002 master,fail? - 0 0 2 connected 5461-10922
c 127.0.0.1:7003@17003 master,fail? - 0 0 3 connected 10923-16383
d 127.0.0.1:7004@17004 slave,fail? a 0 0 1 connected
`
)

func TestMergeViewsKeepsTheHighestEpochsClaim(t *testing.T) {
	promoted := []redis.ClusterSlot{
		{Start: 0, End: 5460, Nodes: []redis.ClusterNode{{ID: "d", Addr: "127.0.0.1:7004"}}},
		{Start: 5461, End: 10922, Nodes: []redis.ClusterNode{{ID: "b", Addr: "127.0.0.1:7002"}, {ID: "e", Addr: "127.0.0.1:7005"}}},
		{Start: 10923, End: 16383, Nodes: []redis.ClusterNode{{ID: "c", Addr: "127.0.0.1:7003"}, {ID: "f", Addr: "127.0.0.1:7006"}}},
	}
	stale := []redis.ClusterSlot{
		{Start: 0, End: 5460, Nodes: []redis.ClusterNode{{ID: "a", Addr: "127.0.0.1:7001"}, {ID: "d", Addr: "127.0.0.1:7004"}}},
		promoted[1], promoted[2],
	}
	for _, c := range []struct {
		name  string
		views []string
		want  []redis.ClusterSlot
	}{
		{"the stale view alone", []string{staleView}, stale},
		{"the promoted replica's view beside stale ones", []string{staleView, promotedView, staleView}, promoted},
		{"the promoted view before a stale one", []string{promotedView, staleView}, promoted},
		{"a cut-off master's view beside the majority's", []string{cutOffView, promotedView}, promoted},
	} {
		t.Run(c.name, func(t *testing.T) {
			var answers []nodesAnswer
			for i, v := range c.views {
				answers = append(answers, nodesAnswer{addr: "127.0.0.1:700" + string(rune('1'+i)), nodes: v})
			}
			got, err := mergeViews(answers)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("slot map\n got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestParseClusterNodesRefusesWhatItCannotRead(t *testing.T) {
	for _, text := range []string{
		"a 127.0.0.1:7001@17001 master - 0 0\n",
		"a 127.0.0.1:7001@17001 master - 0 0 x connected 0-5460\n",
		"a 127.0.0.1:7001@17001 master - 0 0 1 connected 0-16384\n",
		"a 127.0.0.1:7001@17001 master - 0 0 1 connected 9-3\n",
	} {
		if _, err := parseClusterNodes("127.0.0.1:7001", text); err == nil {
			t.Errorf("%q read without an error", text)
		}
	}
	if _, err := mergeViews([]nodesAnswer{{addr: "x", nodes: "a 127.0.0.1:7001@17001 master - 0 0 1 connected\n"}}); err == nil {
		t.Error("a view with no slot assigned made a slot map")
	}
}

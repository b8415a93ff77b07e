package broker_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/broker"
)

func TestParseTopicList(t *testing.T) {
	for _, c := range []struct {
		list, err string
		want      []broker.Topic
	}{
		{list: "# a comment\n\na:3\nb:1 # the dead letters\n", want: []broker.Topic{{Name: "a", Partitions: 3}, {Name: "b", Partitions: 1}}},
		{list: "a", err: `line 1: "a" is not name:partitions`},
		{list: "a:0", err: "not name:partitions"},
		{list: ":2", err: "not name:partitions"},
		{list: "a:x", err: "not name:partitions"},
		{list: "a:1\na:2", err: "line 2: a is listed twice"},
		{list: "# only\n", err: "no topic"},
	} {
		got, err := broker.ParseTopicList(strings.NewReader(c.list))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want an error saying %q", c.list, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q = %v, %v; want %v", c.list, got, err, c.want)
		}
	}
}

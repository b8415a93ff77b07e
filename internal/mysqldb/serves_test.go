package mysqldb

import (
	"errors"
	"testing"
)

func TestServes(t *testing.T) {
	donor := func(desync, method string) map[string]string {
		return map[string]string{"wsrep_desync": desync, "wsrep_sst_method": method}
	}
	cases := []struct {
		name          string
		cluster, node string
		vars          map[string]string
		ok            bool
	}{
		{"synced", "Primary", "Synced", nil, true},
		{"donating by mariabackup", "Primary", donorState, donor("OFF", "mariabackup"), true},
		{"donating by rsync, which blocks", "Primary", donorState, donor("OFF", "rsync"), false},
		{"desynced by an operator", "Primary", donorState, donor("ON", "mariabackup"), false},
		{"joining", "Primary", "Joined", nil, false},
		{"receiving a snapshot", "Primary", "Joining: receiving State Transfer", nil, false},
		{"in a minority", "non-Primary", "Synced", nil, false},
		{"donor in a minority", "non-Primary", donorState, donor("OFF", "mariabackup"), false},
		{"variables not read", "Primary", donorState, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := serves(map[string]string{"wsrep_cluster_status": c.cluster, "wsrep_local_state_comment": c.node}, c.vars)
			if c.ok != (err == nil) {
				t.Fatalf("serves = %v, want ok %v", err, c.ok)
			}
			if err != nil && !errors.Is(err, ErrNodeNotReady) {
				t.Fatalf("serves = %v, want ErrNodeNotReady", err)
			}
		})
	}
}

package binlog

import (
	"path/filepath"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/prometheus/client_golang/prometheus"
)

// What a position names as its last transaction, table-driven over what
// canal hands the handler: a stop while the resumed transaction has not
// been seen again keeps the position resumed (canal's is one back and
// names none: the check would be lost); a stop half way through a
// transaction names the last one the set holds, not the one half read.
func TestThePositionNamesItsLastWholeTransaction(t *testing.T) {
	set := func(s string) mysql.GTIDSet {
		g, err := mysql.ParseMariadbGTIDSet(s)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	gtidEvent := func(seq uint64, at uint32) (*replication.EventHeader, *replication.MariadbGTIDEvent) {
		return &replication.EventHeader{ServerID: 1, Timestamp: at},
			&replication.MariadbGTIDEvent{GTID: mysql.MariadbGTID{DomainID: 1, SequenceNumber: seq}}
	}
	resumed := Position{GTID: set("1-1-10"), Last: Transaction{GTID: "1-1-10", At: 500}}
	// A step is a transaction's GTID event (seq, at) or, with synced set,
	// canal saving its position at that GTID set.
	type step struct {
		seq    uint64
		at     uint32
		synced string
	}
	seen := func(seq uint64, at uint32) step { return step{seq: seq, at: at} }
	saved := func(set string) step { return step{synced: set} }
	for _, c := range []struct {
		name   string
		steps  []step // the last save is forced, as Close's is
		saved  string // the GTID set saved
		last   string
		lastAt uint32
	}{
		{"stopped before the resumed transaction came again", []step{saved("1-1-9")}, "1-1-10", "1-1-10", 500},
		{"the resumed transaction seen again, then the next whole",
			[]step{seen(10, 500), saved("1-1-10"), seen(11, 600), saved("1-1-11")}, "1-1-11", "1-1-11", 600},
		{"stopped half way through the next transaction",
			[]step{seen(10, 500), saved("1-1-10"), seen(11, 600), saved("1-1-10")}, "1-1-10", "1-1-10", 500},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &PositionFile{Path: filepath.Join(t.TempDir(), "position.json")}
			inv := &Invalidator{Source: Source{Flavor: mysql.MariaDBFlavor}, Positions: f, Metrics: NewMetrics(prometheus.NewRegistry())}
			before, ok := oneBefore(resumed)
			if !ok || before.String() != "1-1-9" {
				t.Fatalf("oneBefore(%v) = %v, %v; want 1-1-9", resumed.GTID, before, ok)
			}
			check := resumed.Last
			h := &handler{inv: inv, check: &check, resumed: resumed}
			for i, st := range c.steps {
				var err error
				if st.synced == "" {
					err = h.OnGTID(gtidEvent(st.seq, st.at))
				} else {
					err = h.OnPosSynced(nil, mysql.Position{}, set(st.synced), i == len(c.steps)-1)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			pos, ok, err := f.Load(mysql.MariaDBFlavor)
			if err != nil || !ok {
				t.Fatalf("no position saved: %v", err)
			}
			if pos.GTID.String() != c.saved || pos.Last.GTID != c.last || pos.Last.At != c.lastAt {
				t.Fatalf("saved %s, last %+v; want %s, last %s at %d", pos.GTID, pos.Last, c.saved, c.last, c.lastAt)
			}
		})
	}
}

// Another transaction under the resumed GTID is another history.
func TestAnotherTransactionUnderTheResumedGTIDIsAFork(t *testing.T) {
	check := Transaction{GTID: "1-1-10", At: 500}
	h := &handler{check: &check, inv: &Invalidator{}}
	err := h.OnGTID(&replication.EventHeader{ServerID: 1, Timestamp: 900}, &replication.MariadbGTIDEvent{GTID: mysql.MariadbGTID{DomainID: 1, SequenceNumber: 10}})
	if _, forked := err.(*errForked); !forked {
		t.Fatalf("OnGTID on 1-1-10 at 900 after 1-1-10 at 500: %v; want errForked", err)
	}
}

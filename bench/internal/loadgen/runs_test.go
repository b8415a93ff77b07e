package loadgen

import (
	"path/filepath"
	"testing"
	"time"
)

// Each mode's run is added to the file; the table after a run shows every
// run so far, in order.
func TestAppendRunKeepsEveryRunInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs")
	want := []SessionFigures{{Label: "redis", RPS: 1, P99: time.Millisecond}, {Label: "jwt HS256", RPS: 2}, {Label: "jwt EdDSA", RPS: 3}}
	for i, f := range want {
		got, err := appendRun(path, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != i+1 || got[i].Label != f.Label || got[i].RPS != f.RPS || got[i].P99 != f.P99 {
			t.Fatalf("after run %d: %+v", i+1, got)
		}
	}
}

package salestate_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The jobs on the sale's state, each a package on this one.
var jobs = []string{"gate", "salerepair", "outbox", "salerecords", "drawstate"}

const module = "github.com/seckill/seckill/internal/"

// Each job depends on the base and on no other job, and stays readable: no
// file of it, or of the base, over 500 lines.
func TestEachJobStandsOnTheBaseAlone(t *testing.T) {
	for _, job := range jobs {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "../"+job).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", job, err)
		}
		deps := strings.Fields(string(out))
		if !slices.Contains(deps, module+"salestate") {
			t.Errorf("%s does not depend on the base", job)
		}
		for _, other := range jobs {
			if other != job && slices.Contains(deps, module+other) {
				t.Errorf("%s depends on %s", job, other)
			}
		}
	}
	for _, dir := range append([]string{"salestate"}, jobs...) {
		files, err := filepath.Glob("../" + dir + "/*.go")
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(src), "\n"); n > 500 {
				t.Errorf("%s has %d lines, over 500", f, n)
			}
		}
	}
}

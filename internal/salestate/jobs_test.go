package salestate_test

import (
	"errors"
	"fmt"
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
	args := []string{"list", "-deps", "-f", "{{.ImportPath}}"}
	for _, job := range jobs {
		deps, err := exec.Command("go", append(args, "../"+job)...).Output()
		if err != nil {
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				err = fmt.Errorf("%w: %s", err, exit.Stderr)
			}
			t.Fatalf("go list -deps %s: %v", job, err)
		}
		imported := strings.Fields(string(deps))
		if !slices.Contains(imported, module+"salestate") {
			t.Errorf("%s does not depend on the base", job)
		}
		for _, other := range jobs {
			if other != job && slices.Contains(imported, module+other) {
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

package gate_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/gate"
)

var voucherHash = regexp.MustCompile(`seckill:voucher:\{id\}\s+hash \{([^}]*)\}`)

// Every script header that describes the voucher hash names its fields,
// all of them: a header listing three of seven told a reader the others
// were not there.
func TestScriptHeadersNameEveryVoucherField(t *testing.T) {
	scripts, err := filepath.Glob("../../lua/*.lua")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	want := slices.Sorted(slices.Values(gate.VoucherFields))
	described := 0
	for _, path := range scripts {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range voucherHash.FindAllStringSubmatch(string(src), -1) {
			described++
			var got []string
			for _, f := range strings.Split(m[1], ",") {
				got = append(got, strings.TrimSpace(f))
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s: the voucher hash {%s}, want the fields %v", filepath.Base(path), m[1], gate.VoucherFields)
			}
		}
	}
	if described < 4 {
		t.Fatalf("%d script headers describe the voucher hash, want those of the scripts that take it", described)
	}
}

package config_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/config"
)

var variable = regexp.MustCompile(`SECKILL_[A-Z0-9_]*[A-Z0-9](_\*)?`)

// Every SECKILL_ variable the README and docs/ name is one the programs
// read (their configuration asks for it, in either session mode), or the
// Makefile, the scripts or the compose file use: a renamed variable cannot
// live on in the docs (docs/redis-cluster.md named SECKILL_SESSION_CACHE,
// which is SECKILL_SESSION_CACHE_TTL).
func TestDocsNameOnlyRealVariables(t *testing.T) {
	root := "../.."
	known := map[string]bool{}
	for _, mode := range []string{"redis", "jwt"} {
		asked := func(k string) (string, bool) {
			known[k] = true
			if k == "SECKILL_SESSION_MODE" {
				return mode, true
			}
			return "", false
		}
		_, _ = config.LoadAPI(asked)
		_, _ = config.LoadOrderWriter(asked)
		_, _ = config.LoadCacheInvalidator(asked)
		_, _ = config.LoadCtl(asked)
	}
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".stack" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		name := d.Name()
		if d.IsDir() || strings.HasSuffix(name, "_test.go") ||
			!(strings.HasSuffix(name, ".go") || strings.HasSuffix(name, ".sh") || name == "Makefile" || strings.HasSuffix(name, ".yml")) {
			return nil
		}
		for _, v := range variable.FindAllString(read(path), -1) {
			known[v] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, doc := range append(docs, filepath.Join(root, "README.md")) {
		for _, v := range variable.FindAllString(read(doc), -1) {
			if !realVariable(known, v) && !strings.HasPrefix(v, "SECKILL_TEST_") {
				t.Errorf("%s names %s, which nothing reads", filepath.Base(doc), v)
			}
		}
	}
}

// realVariable: v is known, or, written PREFIX_*, some known variable has
// that prefix.
func realVariable(known map[string]bool, v string) bool {
	prefix, wild := strings.CutSuffix(v, "*")
	if !wild {
		return known[v]
	}
	for k := range known {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

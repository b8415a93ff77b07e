package salestate_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/seckill/seckill/internal/salestate"
)

// prelude is lua/sale.lua, the head of every script of a sale's state.
func prelude(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("../../lua/sale.lua")
	if err != nil {
		t.Fatal(err)
	}
	return string(src)
}

// luaName is a Go name as the scripts spell it: PendingAt is PENDING_AT.
func luaName(goName string) string {
	var b strings.Builder
	for i, r := range goName {
		if i > 0 && unicode.IsUpper(r) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// goOutcomes are the names of outcome.go's Outcome constants by their
// values: the first is iota, and each after it takes the next (a blank
// one too). A block written otherwise fails the test rather than being
// misread.
func goOutcomes(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "outcome.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST || len(g.Specs) == 0 {
			continue
		}
		first := g.Specs[0].(*ast.ValueSpec)
		if typ, ok := first.Type.(*ast.Ident); !ok || typ.Name != "Outcome" {
			continue
		}
		var names []string
		for i, spec := range g.Specs {
			v := spec.(*ast.ValueSpec)
			first, isIdent := func() (*ast.Ident, bool) {
				if len(v.Values) != 1 {
					return nil, false
				}
				id, ok := v.Values[0].(*ast.Ident)
				return id, ok
			}()
			switch {
			case len(v.Names) != 1:
				t.Fatalf("outcome.go: %d names in one line of the Outcome block", len(v.Names))
			case i == 0 && (!isIdent || first.Name != "iota"):
				t.Fatal("outcome.go: the Outcome block does not start at iota")
			case i > 0 && (v.Type != nil || len(v.Values) > 0):
				t.Fatalf("outcome.go: %s has a value of its own; the outcomes are numbered by iota", v.Names[0].Name)
			}
			names = append(names, v.Names[0].Name)
		}
		return names
	}
	t.Fatal("outcome.go declares no Outcome block")
	return nil
}

// The gate's outcomes are declared once in each language, by name: the
// prelude's OUTCOME table and Go's Outcome constants. A new outcome, or
// two renumbered, in one and not the other fails here.
func TestOutcomesAgreeWithThePrelude(t *testing.T) {
	m := regexp.MustCompile(`(?s)local OUTCOME = \{(.*?)\n\}`).FindStringSubmatch(prelude(t))
	if m == nil {
		t.Fatal("lua/sale.lua declares no OUTCOME table")
	}
	lua := map[int]string{}
	for _, kv := range regexp.MustCompile(`(\w+) = (\d+)`).FindAllStringSubmatch(m[1], -1) {
		n, _ := strconv.Atoi(kv[2])
		if prev, dup := lua[n]; dup {
			t.Errorf("OUTCOME gives %d to %s and %s", n, prev, kv[1])
		}
		lua[n] = kv[1]
	}
	var names []string
	for _, name := range goOutcomes(t) {
		if name == "_" || !ast.IsExported(name) {
			break // the count past the last outcome
		}
		names = append(names, name)
	}
	if len(names) < 11 {
		t.Fatalf("outcome.go declares the outcomes %v: the parse missed some", names)
	}
	for i, name := range names {
		if lua[i] != luaName(name) {
			t.Errorf("outcome %d is %s in Go and %q in OUTCOME", i, name, lua[i])
		}
		o := salestate.Outcome(i)
		if !o.Known() {
			t.Errorf("outcome %d (%s) is not Known", i, name)
		}
		// An outcome without its error would read as an acceptance.
		if refusal := o != salestate.Accepted && o != salestate.OtherLayout; refusal != (o.Err() != nil) {
			t.Errorf("outcome %d (%s) has the error %v", i, name, o.Err())
		}
	}
	if len(lua) != len(names) {
		t.Errorf("OUTCOME has %d outcomes, Go %d", len(lua), len(names))
	}
	if salestate.Outcome(len(names)).Known() {
		t.Errorf("outcome %d, past the last, is Known", len(names))
	}

	// Every script answers by name, and only with names the table has: a
	// misspelt one is nil in Lua, which shifts every number after it.
	scripts, err := filepath.Glob("../../lua/*.lua")
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob("../gate/testdata/*.lua")
	if err != nil || len(more) == 0 {
		t.Fatalf("the gate's one-attempt twin (../gate/testdata): %v", err)
	}
	declared := map[string]bool{}
	for _, name := range lua {
		declared[name] = true
	}
	used := 0
	byName := regexp.MustCompile(`OUTCOME\.(\w+)`)
	byNumber := regexp.MustCompile(`\b(answer|all)\(\s*\d|return\s*\{\s*\d|OUTCOME\s*\[|OUTCOME\.\w+\s*=[^=]`)
	for _, path := range append(scripts, more...) {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range byName.FindAllStringSubmatch(string(src), -1) {
			used++
			if !declared[m[1]] {
				t.Errorf("%s: OUTCOME.%s is not in the table", filepath.Base(path), m[1])
			}
		}
		if strings.Contains(string(src), "OUTCOME.") && byNumber.MatchString(string(src)) {
			t.Errorf("%s answers an outcome other than by its name in OUTCOME: %q", filepath.Base(path), byNumber.FindString(string(src)))
		}
	}
	if used < 20 {
		t.Errorf("the scripts name %d outcomes: the gate's script and its one-attempt twin answer by name", used)
	}
}

// Every script of a sale's state receives the shared keys in one order,
// declared once in each language: the prelude's names over
// unpack(KEYS, 1, SHARED), and Keys.List. A script's own keys come after
// them, named from SHARED, never by a number.
func TestSharedKeysAgreeWithThePrelude(t *testing.T) {
	src := prelude(t)
	shared := regexp.MustCompile(`(?m)^local SHARED = (\d+)$`).FindStringSubmatch(src)
	names := regexp.MustCompile(`(?m)^local ([A-Z_, ]+) = unpack\(KEYS, 1, SHARED\)$`).FindStringSubmatch(src)
	if shared == nil || names == nil {
		t.Fatal("lua/sale.lua declares no SHARED count or no names over unpack(KEYS, 1, SHARED)")
	}
	var lua []string
	for _, n := range strings.Split(names[1], ",") {
		lua = append(lua, strings.TrimSpace(n))
	}
	k := salestate.KeysFor("", 1)
	field := map[string]string{}
	v := reflect.ValueOf(k)
	for i := range v.NumField() {
		field[v.Field(i).String()] = v.Type().Field(i).Name
	}
	var goOrder []string
	for _, key := range k.List() {
		goOrder = append(goOrder, luaName(field[key]))
	}
	if !slices.Equal(goOrder, lua) {
		t.Errorf("the shared keys are %v in Keys.List and %v in lua/sale.lua", goOrder, lua)
	}
	if n, _ := strconv.Atoi(shared[1]); n != len(lua) {
		t.Errorf("SHARED is %d, and the prelude names %d keys", n, len(lua))
	}

	byNumber := regexp.MustCompile(`KEYS\[\s*\d+\s*\]|unpack\(\s*KEYS`)
	for name, src := range saleScripts(t) {
		for line := range strings.SplitSeq(src, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(line), "--") && byNumber.MatchString(line) {
				t.Errorf("%s: %q names a key by its number: own keys are KEYS[SHARED + i]", name, line)
			}
		}
	}
}

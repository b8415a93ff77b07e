package salestate_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/salestate"
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
	want := slices.Sorted(slices.Values(salestate.VoucherFields))
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
				t.Errorf("%s: the voucher hash {%s}, want the fields %v", filepath.Base(path), m[1], salestate.VoucherFields)
			}
		}
	}
	if described < 1 {
		t.Fatal("no script header describes the voucher hash; the sale's prelude (sale.lua) does")
	}
}

// saleKeys are the names the sale's prelude gives the keys.
var saleKeys = regexp.MustCompile(`\b(VOUCHER|BUYERS|PENDING_AT|PENDING|CHANGES|SETTLED|TRANSFERS|ENTRANTS)\b`)

// Every script of a sale's state says in its header what it writes — the
// keys, and the voucher hash's fields — and says exactly that: the header
// is parsed, and so are the script's write commands.
func TestScriptHeadersNameWhatTheyWrite(t *testing.T) {
	scripts := saleScripts(t)
	for name, src := range scripts {
		header, code := splitHeader(src)
		writes, ok := headerWrites(header)
		if !ok {
			t.Errorf("%s: its header has no \"Writes:\" line", name)
			continue
		}
		saidKeys := slices.Sorted(slices.Values(unique(saleKeys.FindAllString(writes, -1))))
		var saidFields []string
		if m := regexp.MustCompile(`VOUCHER \{([^}]*)\}`).FindStringSubmatch(writes); m != nil {
			for f := range strings.SplitSeq(m[1], ",") {
				saidFields = append(saidFields, strings.TrimSpace(f))
			}
		}
		slices.Sort(saidFields)
		keys, fields, err := writesOf(code)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !slices.Equal(saidKeys, keys) {
			t.Errorf("%s: the header says it writes %v, the script writes %v", name, saidKeys, keys)
		}
		if !slices.Equal(saidFields, fields) {
			t.Errorf("%s: the header says it writes the voucher fields %v, the script writes %v", name, saidFields, fields)
		}
		for _, f := range fields {
			if !slices.Contains(salestate.VoucherFields, f) {
				t.Errorf("%s: writes the voucher field %q, which salestate.VoucherFields does not name", name, f)
			}
		}
	}
	src, err := os.ReadFile("../../lua/lua.go")
	if err != nil {
		t.Fatal(err)
	}
	if loaded := strings.Count(string(src), `mustLoadSale("`); len(scripts) != loaded {
		t.Fatalf("%d scripts of a sale's state; want the %d that lua.go loads behind sale.lua", len(scripts), loaded)
	}
}

// splitHeader is a script's leading comment and the rest.
func splitHeader(src string) (header, code string) {
	var h, c strings.Builder
	inHeader := true
	for line := range strings.Lines(src) {
		if inHeader && strings.HasPrefix(line, "--") {
			h.WriteString(line)
			continue
		}
		inHeader = false
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			c.WriteString(line)
		}
	}
	return h.String(), c.String()
}

// headerWrites is the text of the header's "Writes:" entry, continuation
// lines included.
func headerWrites(header string) (string, bool) {
	var b strings.Builder
	found := false
	for line := range strings.Lines(header) {
		body := strings.TrimPrefix(strings.TrimRight(line, "\n"), "--")
		switch {
		case strings.HasPrefix(body, " Writes:"):
			found = true
			b.WriteString(strings.TrimPrefix(body, " Writes:"))
		case found && strings.HasPrefix(body, "         "):
			b.WriteString(" " + strings.TrimSpace(body))
		case found:
			return b.String(), true
		}
	}
	return b.String(), found
}

// writesOf parses a script's write commands: the sale keys they write,
// and the voucher hash's fields.
func writesOf(code string) (keys, fields []string, err error) {
	writes := map[string]bool{"HSET": true, "HDEL": true, "HINCRBY": true, "ZADD": true, "ZREM": true, "DEL": true,
		"RENAME": true, "PEXPIRE": true, "SET": true}
	for rest := code; ; {
		i := strings.Index(rest, "redis.call(")
		if i < 0 {
			break
		}
		args, tail := callArgs(rest[i+len("redis.call("):])
		rest = tail
		if len(args) < 2 || !writes[strings.Trim(args[0], "'")] {
			continue
		}
		cmd := strings.Trim(args[0], "'")
		for _, a := range args[1:] {
			if saleKeys.MatchString(a) && saleKeys.FindString(a) == a {
				keys = append(keys, a)
			}
		}
		if args[1] != "VOUCHER" {
			continue
		}
		var named []string
		switch cmd {
		case "HSET":
			for j := 2; j < len(args); j += 2 {
				named = append(named, args[j])
			}
		case "HDEL":
			named = args[2:]
		case "HINCRBY":
			named = args[2:3]
		}
		for _, f := range named {
			if !strings.HasPrefix(f, "'") || !strings.HasSuffix(f, "'") {
				return nil, nil, fmt.Errorf("writes a voucher field named by %s, which the header cannot name", f)
			}
			fields = append(fields, strings.Trim(f, "'"))
		}
	}
	keys, fields = unique(keys), unique(fields)
	slices.Sort(keys)
	slices.Sort(fields)
	return keys, fields, nil
}

// callArgs splits the arguments of a call whose opening parenthesis is
// just before s, at the commas outside parentheses and quotes; the text
// after its closing parenthesis.
func callArgs(s string) (args []string, rest string) {
	depth, quote, start := 0, byte(0), 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '(' || c == '{' || c == '[':
			depth++
		case (c == ')' || c == '}' || c == ']') && depth > 0:
			depth--
		case c == ')':
			return append(args, strings.TrimSpace(s[start:i])), s[i+1:]
		case c == ',' && depth == 0:
			args = append(args, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	return args, ""
}

func unique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

var (
	argvUsed = regexp.MustCompile(`ARGV\[(\d+)\]`)
	// A header documents an argument by naming it, "ARGV[2]  …", or a run
	// of them, "ARGV[1..3]".
	argvSaid = regexp.MustCompile(`ARGV\[(\d+)(?:\.\.(\d+))?\]`)
)

// Every script's header documents each argument the script reads, and
// no other: a header that described three of the four arguments the gate
// receives told a reader the fourth was not there.
func TestScriptHeadersNameTheirArguments(t *testing.T) {
	scripts, err := filepath.Glob("../../lua/*.lua")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, path := range scripts {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		header, code := splitHeader(string(raw))
		var used, said []int
		for _, m := range argvUsed.FindAllStringSubmatch(code, -1) {
			used = append(used, atoi(t, m[1]))
		}
		for _, m := range argvSaid.FindAllStringSubmatch(header, -1) {
			from, to := atoi(t, m[1]), atoi(t, m[1])
			if m[2] != "" {
				to = atoi(t, m[2])
			}
			for i := from; i <= to; i++ {
				said = append(said, i)
			}
		}
		slices.Sort(used)
		slices.Sort(said)
		used, said = slices.Compact(used), slices.Compact(said)
		if !slices.Equal(used, said) {
			t.Errorf("%s: the header documents ARGV %v, the script reads ARGV %v", filepath.Base(path), said, used)
		}
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// designRows are the rows of docs/design.md's table of who writes a
// sale's keys: the key (or voucher field) each row is about, and the text
// of its "written by" column.
func designRows(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("../../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	keyOf := map[string]string{"seckill:buyers:{id}": "BUYERS", "seckill:pending:{id}": "PENDING", "seckill:pending-at:{id}": "PENDING_AT",
		"seckill:changes:{id}": "CHANGES", "seckill:settled:{id}": "SETTLED", "seckill:transfers:{id}": "TRANSFERS",
		"seckill:entrants:{id}": "ENTRANTS"}
	field := regexp.MustCompile("`(?:seckill:voucher:\\{id\\}` `|… )([a-z]+)`|, `… ([a-z]+)`")
	rows := map[string]string{}
	for line := range strings.Lines(string(raw)) {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		first, writers := strings.TrimSpace(cells[1]), cells[3]
		if k, ok := keyOf[strings.Trim(first, "`")]; ok {
			rows[k] = writers
			continue
		}
		for _, m := range field.FindAllStringSubmatch(first, -1) {
			rows["VOUCHER."+m[1]+m[2]] = writers
		}
	}
	return rows
}

// docs/design.md's table of who writes each key and field of a sale names
// every script whose header says it writes it.
func TestDesignTableNamesEveryWriter(t *testing.T) {
	rows := designRows(t)
	for _, f := range salestate.VoucherFields {
		if _, ok := rows["VOUCHER."+f]; !ok {
			t.Errorf("docs/design.md has no row for the voucher field %s", f)
		}
	}
	for file, src := range saleScripts(t) {
		name := strings.TrimSuffix(file, ".lua")
		header, _ := splitHeader(src)
		writes, _ := headerWrites(header)
		var written []string
		for _, k := range unique(saleKeys.FindAllString(writes, -1)) {
			if k != "VOUCHER" {
				written = append(written, k)
			}
		}
		if m := regexp.MustCompile(`VOUCHER \{([^}]*)\}`).FindStringSubmatch(writes); m != nil {
			for f := range strings.SplitSeq(m[1], ",") {
				written = append(written, "VOUCHER."+strings.TrimSpace(f))
			}
		}
		for _, w := range written {
			row, ok := rows[w]
			switch {
			case !ok:
				t.Errorf("docs/design.md has no row for %s, which %s writes", w, name)
			case !regexp.MustCompile("`" + name + "`").MatchString(row):
				t.Errorf("docs/design.md's row for %s does not name %s, which writes it", w, name)
			}
		}
	}
}

// saleScripts are the scripts of a sale's state by file name: those whose
// header says they receive the sale's keys. There are ten or more; fewer
// is a header that stopped saying so.
func saleScripts(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob("../../lua/*.lua")
	if err != nil {
		t.Fatal(err)
	}
	scripts := map[string]string{}
	for _, path := range paths {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), "-- KEYS     the sale's keys (sale.lua)") {
			scripts[filepath.Base(path)] = string(raw)
		}
	}
	if len(scripts) < 10 {
		t.Fatalf("%d scripts of a sale's state found; they say \"-- KEYS     the sale's keys (sale.lua)\"", len(scripts))
	}
	return scripts
}

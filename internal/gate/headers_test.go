package gate_test

import (
	"fmt"
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
	if described < 1 {
		t.Fatal("no script header describes the voucher hash; the sale's prelude (sale.lua) does")
	}
}

// saleKeys are the names the sale's prelude gives the keys.
var saleKeys = regexp.MustCompile(`\b(VOUCHER|BUYERS|PENDING_AT|PENDING|CHANGES|SETTLED|TRANSFERS)\b`)

// Every script of a sale's state says in its header what it writes — the
// keys, and the voucher hash's fields — and says exactly that: the header
// is parsed, and so are the script's write commands.
func TestScriptHeadersNameWhatTheyWrite(t *testing.T) {
	scripts, err := filepath.Glob("../../lua/*.lua")
	if err != nil {
		t.Fatal(err)
	}
	sale := 0
	for _, path := range scripts {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		src := string(raw)
		if !strings.Contains(src, "-- KEYS     the sale's keys (sale.lua)") {
			continue
		}
		sale++
		name := filepath.Base(path)
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
			if !slices.Contains(gate.VoucherFields, f) {
				t.Errorf("%s: writes the voucher field %q, which gate.VoucherFields does not name", name, f)
			}
		}
	}
	src, err := os.ReadFile("../../lua/lua.go")
	if err != nil {
		t.Fatal(err)
	}
	if loaded := strings.Count(string(src), `mustLoadSale("`); sale != loaded {
		t.Fatalf("%d scripts of a sale's state; want the %d that lua.go loads behind sale.lua", sale, loaded)
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

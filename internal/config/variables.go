package config

import (
	"fmt"
	"slices"
	"strings"
)

// Programs are the programs that read a configuration, in the order the
// page of variables names them.
var Programs = []string{"api", "order-writer", "cache-invalidator", "seckillctl"}

// Variable is one variable the programs read: its default in each
// program that reads it ("" when it has none).
type Variable struct {
	Name     string
	Defaults map[string]string // by program
}

// Variables are every variable the programs read, by name, with each
// program's default as its code has it: asked of the loaders themselves
// with nothing set, in either session mode.
func Variables() map[string]Variable {
	loaders := map[string]func(*Reader){
		"api":               func(r *Reader) { loadAPI(r) },
		"order-writer":      func(r *Reader) { loadOrderWriter(r) },
		"cache-invalidator": func(r *Reader) { loadCacheInvalidator(r) },
		"seckillctl":        func(r *Reader) { loadCtl(r) },
	}
	vars := map[string]Variable{}
	for _, program := range Programs {
		for _, mode := range []string{SessionsRedis, SessionsJWT} {
			r := &Reader{defaults: map[string]string{}, lookup: func(k string) (string, bool) {
				if k == "SECKILL_SESSION_MODE" && mode != SessionsRedis {
					return mode, true
				}
				return "", false
			}}
			loaders[program](r)
			for name, def := range r.defaults {
				v, ok := vars[name]
				if !ok {
					v = Variable{Name: name, Defaults: map[string]string{}}
					vars[name] = v
				}
				v.Defaults[program] = def
			}
		}
	}
	return vars
}

// Markdown is docs/configuration.md's table: every variable the programs
// read, in the page's order, with the programs that read it, its
// defaults and what it means. It fails on a variable read and not
// described, or described and not read.
func Markdown() (string, error) {
	vars := Variables()
	var b strings.Builder
	b.WriteString("| variable | programs | default | meaning |\n|---|---|---|---|\n")
	b.WriteString(otelRow + "\n")
	described := map[string]bool{}
	for _, d := range descriptions {
		v, ok := vars[d.name]
		if !ok {
			return "", fmt.Errorf("%s is described, and no program reads it", d.name)
		}
		described[d.name] = true
		if only, ok := usedBy[d.name]; ok {
			used := Variable{Name: v.Name, Defaults: map[string]string{}}
			for _, p := range only {
				def, read := v.Defaults[p]
				if !read {
					return "", fmt.Errorf("%s: said to be used by %s, which does not read it", d.name, p)
				}
				used.Defaults[p] = def
			}
			v = used
		}
		def := defaultsOf(v)
		if means, ok := standsFor[d.name]; ok {
			def += ": " + means
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", d.name, programsOf(v), def, d.meaning)
	}
	b.WriteString(devTLSRow + "\n")
	var missing []string
	for name := range vars {
		if !described[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return "", fmt.Errorf("read and not described (internal/config/describe.go): %s", strings.Join(missing, ", "))
	}
	return b.String(), nil
}

// programsOf names the programs that read v: "all daemons" for the
// three, seckillctl after them.
func programsOf(v Variable) string {
	var names []string
	for _, p := range Programs {
		if _, ok := v.Defaults[p]; ok {
			names = append(names, p)
		}
	}
	if len(names) >= 3 && names[0] == "api" && names[1] == "order-writer" && names[2] == "cache-invalidator" {
		names = append([]string{"all daemons"}, names[3:]...)
	}
	return strings.Join(names, ", ")
}

// defaultsOf writes v's default, or each program's where they differ.
func defaultsOf(v Variable) string {
	text := func(d string) string {
		if d == "" {
			return "empty"
		}
		return "`" + d + "`"
	}
	var first string
	same := true
	n := 0
	for _, p := range Programs {
		if d, ok := v.Defaults[p]; ok {
			if n == 0 {
				first = d
			} else if d != first {
				same = false
			}
			n++
		}
	}
	if same {
		return text(first)
	}
	var parts []string
	for _, p := range Programs {
		if d, ok := v.Defaults[p]; ok {
			parts = append(parts, text(d)+" ("+p+")")
		}
	}
	return strings.Join(parts, ", ")
}

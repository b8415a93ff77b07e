package config

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Reader reads typed settings from variables and collects every bad one
// by the variable's name: the values and the errors of one configuration
// load.
type Reader struct {
	lookup func(string) (string, bool)
	errs   []error
	// defaults, when set, records every variable asked for with its
	// default as the page of variables writes it (Variables).
	defaults map[string]string
}

// note records key's default: a typed read's wins over a bare look.
func (r *Reader) note(key, def string, typed bool) {
	if r.defaults == nil {
		return
	}
	if _, seen := r.defaults[key]; typed || !seen {
		r.defaults[key] = def
	}
}

// NewFrom reads through lookup; tests pass a map's lookup.
func NewFrom(lookup func(string) (string, bool)) *Reader { return &Reader{lookup: lookup} }

// Err is every problem found so far, or nil.
func (r *Reader) Err() error { return errors.Join(r.errs...) }

// Fail records a problem found by a caller's own validation.
func (r *Reader) Fail(key, value, reason string) {
	r.errs = append(r.errs, fmt.Errorf("invalid %s=%q: %s", key, value, reason))
}

func (r *Reader) raw(key string) (string, bool) {
	r.note(key, "", false)
	v, ok := r.lookup(key)
	if !ok {
		return "", false
	}
	v = strings.TrimSpace(v)
	return v, v != ""
}

// String is the variable's value, or def when it is unset or empty.
func (r *Reader) String(key, def string) string {
	defer r.note(key, def, true)
	if v, ok := r.raw(key); ok {
		return v
	}
	return def
}

// OneOf is String restricted to the given choices.
func (r *Reader) OneOf(key, def string, choices ...string) string {
	v := r.String(key, def)
	for _, c := range choices {
		if v == c {
			return v
		}
	}
	r.Fail(key, v, "must be one of "+strings.Join(choices, ", "))
	return def
}

// Int is an integer within [min, max].
func (r *Reader) Int(key string, def, min, max int) int {
	defer r.note(key, strconv.Itoa(def), true)
	v, ok := r.raw(key)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		r.Fail(key, v, "not an integer")
		return def
	}
	if n < min || n > max {
		r.Fail(key, v, fmt.Sprintf("must be between %d and %d", min, max))
		return def
	}
	return n
}

// Duration is a Go duration ("500ms", "10s") greater than zero.
func (r *Reader) Duration(key string, def time.Duration) time.Duration {
	defer r.note(key, shortDuration(def), true)
	v, ok := r.raw(key)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		r.Fail(key, v, `not a duration (examples: "500ms", "10s", "1m")`)
		return def
	}
	if d <= 0 {
		r.Fail(key, v, "must be greater than zero")
		return def
	}
	return d
}

// Bool accepts what strconv.ParseBool does (1, true, 0, false, ...).
func (r *Reader) Bool(key string, def bool) bool {
	defer r.note(key, strconv.FormatBool(def), true)
	v, ok := r.raw(key)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.Fail(key, v, "not a boolean (true or false)")
		return def
	}
	return b
}

// HostPort is a "host:port" address with a valid port; the host may be
// empty (listen on every interface).
func (r *Reader) HostPort(key, def string) string {
	v := r.String(key, def)
	if err := checkHostPort(v); err != nil {
		r.Fail(key, v, err.Error())
		return def
	}
	return v
}

// HostPorts is a comma-separated list of "host:port" addresses, at least one.
func (r *Reader) HostPorts(key, def string) []string {
	v := r.String(key, def)
	var out []string
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if err := checkHostPort(part); err != nil {
			r.Fail(key, v, err.Error())
			return nil
		}
		out = append(out, part)
	}
	if len(out) == 0 {
		r.Fail(key, v, "needs at least one host:port")
	}
	return out
}

func checkHostPort(v string) error {
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return errors.New("not a host:port address")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return errors.New("port must be a number from 0 to 65535")
	}
	return nil
}

// shortDuration writes d as the page does: 10m, not 10m0s; 0 as empty.
func shortDuration(d time.Duration) string {
	if d == 0 {
		return ""
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

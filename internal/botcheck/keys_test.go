package botcheck_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/botcheck"
)

func TestParseKeyFile(t *testing.T) {
	k := func(b byte) string {
		return base64.StdEncoding.EncodeToString([]byte(strings.Repeat(string(rune('a'+b)), 32)))
	}
	short := base64.StdEncoding.EncodeToString(make([]byte, 31))
	for name, tc := range map[string]struct {
		json    string
		current byte
		others  []byte // the other keys' ids, in the file's order
		err     string
	}{
		"one key":             {`{"current":1,"keys":[{"id":1,"key":"` + k(1) + `"}]}`, 1, nil, ""},
		"current and before":  {`{"current":3,"keys":[{"id":2,"key":"` + k(2) + `"},{"id":3,"key":"` + k(3) + `"}]}`, 3, []byte{2}, ""},
		"and the next staged": {`{"current":3,"keys":[{"id":3,"key":"` + k(3) + `"},{"id":2,"key":"` + k(2) + `"},{"id":4,"key":"` + k(4) + `"}]}`, 3, []byte{2, 4}, ""},
		"no keys":             {`{"current":1,"keys":[]}`, 0, nil, "0 keys"},
		"four keys":           {`{"current":1,"keys":[{"id":1,"key":"` + k(1) + `"},{"id":2,"key":"` + k(2) + `"},{"id":3,"key":"` + k(3) + `"},{"id":4,"key":"` + k(4) + `"}]}`, 0, nil, "4 keys"},
		"current missing":     {`{"current":5,"keys":[{"id":1,"key":"` + k(1) + `"}]}`, 0, nil, "current key id 5"},
		"id twice":            {`{"current":1,"keys":[{"id":1,"key":"` + k(1) + `"},{"id":1,"key":"` + k(2) + `"}]}`, 0, nil, "appears twice"},
		"id zero":             {`{"current":0,"keys":[{"id":0,"key":"` + k(1) + `"}]}`, 0, nil, "want 1 to 255"},
		"id too big":          {`{"current":256,"keys":[{"id":256,"key":"` + k(1) + `"}]}`, 0, nil, "want 1 to 255"},
		"short key":           {`{"current":1,"keys":[{"id":1,"key":"` + short + `"}]}`, 0, nil, "31 bytes"},
		"not base64":          {`{"current":1,"keys":[{"id":1,"key":"!!"}]}`, 0, nil, "not base64"},
		"unknown field":       {`{"current":1,"sign":1,"keys":[{"id":1,"key":"` + k(1) + `"}]}`, 0, nil, "unknown field"},
		"not JSON":            {`current=1`, 0, nil, "not the keys' JSON"},
	} {
		t.Run(name, func(t *testing.T) {
			ring, err := botcheck.ParseKeyFile([]byte(tc.json))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v; want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var others []byte
			for _, k := range ring.Others {
				others = append(others, k.ID)
			}
			if ring.Current.ID != tc.current || string(others) != string(tc.others) {
				t.Fatalf("ring %d/%v; want current %d, others %v", ring.Current.ID, others, tc.current, tc.others)
			}
		})
	}
}

// Keys from a file (a mounted Secret) never touch Redis; the file is read
// again within a second of a change: a rotation keeps the previous key's
// paths, a key removed from the file is refused, and a file that turns
// unreadable leaves the keys held for a few seconds, then no path at all.
func TestKeysFromAFile(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := f.clock.Now()
	id := f.sale(t, "path", now.Add(-time.Minute), now.Add(time.Hour))
	file := filepath.Join(t.TempDir(), "keys.json")
	first, err := botcheck.RotateKeyFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cfg := botcheck.DefaultConfig
	cfg.KeysFile = file
	s := botcheck.New(f.r.Client, f.r.Prefix, f.modes, f.gate.Records, cfg, nil)
	s.Now = f.clock.Now
	old, _, err := s.IssuePath(ctx, 7, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := pathKeyID(t, old); got != first.Current.ID {
		t.Fatalf("path under key %d; want the file's %d", got, first.Current.ID)
	}
	if n, err := f.r.Client.Exists(ctx, f.r.Key("botcheck:keys")).Result(); err != nil || n != 0 {
		t.Fatalf("keys in Redis with a keys file: %d, %v", n, err)
	}
	second, err := botcheck.RotateKeyFile(file)
	if err != nil {
		t.Fatal(err)
	}
	f.clock.add(time.Second)
	fresh, _, err := s.IssuePath(ctx, 8, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := pathKeyID(t, fresh); got != second.Current.ID {
		t.Fatalf("path after the rotation under key %d; want %d", got, second.Current.ID)
	}
	if err := s.CheckOrder(ctx, 7, id, old); err != nil {
		t.Fatalf("a path under the previous key: %v", err)
	}
	// The previous key leaves the file: refused within a second.
	only, err := json.Marshal(botcheck.KeyFile{Current: int(second.Current.ID),
		Keys: []botcheck.KeySpec{{ID: int(second.Current.ID), Key: base64.StdEncoding.EncodeToString(second.Current.Secret)}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, only, 0o600); err != nil {
		t.Fatal(err)
	}
	f.clock.add(time.Second)
	if err := s.CheckOrder(ctx, 7, id, old); !errors.Is(err, botcheck.ErrPathInvalid) {
		t.Fatalf("a path under a key removed from the file: %v; want invalid", err)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	f.clock.add(time.Second)
	if err := s.CheckOrder(ctx, 8, id, fresh); err != nil {
		t.Fatalf("a path while the file is gone for a second: %v; want the keys held to serve", err)
	}
	f.clock.add(5 * time.Second)
	if err := s.CheckOrder(ctx, 8, id, fresh); !errors.Is(err, botcheck.ErrUnavailable) {
		t.Fatalf("a path with the file gone for 6 s: %v; want unavailable", err)
	}
}

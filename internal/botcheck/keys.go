package botcheck

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
)

// A Key makes and checks order paths' MACs. Its id (1 to 255) travels in
// each path, so a path names the key it was made under and a verifier
// holding two keys tries one.
type Key struct {
	ID     byte
	Secret []byte
}

// minKeyBytes is the shortest key accepted: as long as the hash (RFC 2104).
const minKeyBytes = 32

// A Ring is the keys paths are checked under: the current one, which
// issues, and the one before it, which still checks the paths issued
// before a rotation until they expire. Nothing older is accepted.
type Ring struct {
	Current  Key
	Previous *Key
}

func (r Ring) key(id byte) (Key, bool) {
	switch {
	case r.Current.ID == id:
		return r.Current, true
	case r.Previous != nil && r.Previous.ID == id:
		return *r.Previous, true
	}
	return Key{}, false
}

// KeySource is where the ring is read from, at most once a second by each
// api instance: a file in production (a mounted Secret), Redis as the
// development default.
type KeySource interface {
	Ring(ctx context.Context) (Ring, error)
}

// RedisKeys keeps the ring in Redis under prefix+"botcheck:keys", made by
// the first api instance that finds none: every instance checks every
// other's paths with no configuration. Deleting the hash (or a key's
// field) takes the key back from every instance within a second.
type RedisKeys struct {
	rdb redis.Scripter
	key string
}

// NewRedisKeys keeps the ring under prefix.
func NewRedisKeys(rdb redis.Scripter, prefix string) RedisKeys {
	return RedisKeys{rdb: rdb, key: prefix + "botcheck:keys"}
}

// Ring reads the ring, making the first key when there is none.
func (k RedisKeys) Ring(ctx context.Context) (Ring, error) { return k.run(ctx, "ensure") }

// Rotate makes a new current key; the current one becomes the previous,
// and the one before that is dropped (seckillctl path-keys rotate).
func (k RedisKeys) Rotate(ctx context.Context) (Ring, error) { return k.run(ctx, "rotate") }

func (k RedisKeys) run(ctx context.Context, op string) (Ring, error) {
	fresh := make([]byte, minKeyBytes)
	if _, err := rand.Read(fresh); err != nil {
		return Ring{}, err
	}
	v, err := lua.PathKeys.Run(ctx, k.rdb, []string{k.key}, op, fresh).StringSlice()
	if err != nil {
		return Ring{}, fmt.Errorf("order paths' keys in Redis (%s): %w", k.key, err)
	}
	ring, err := redisRing(v)
	if err != nil {
		return Ring{}, fmt.Errorf("order paths' keys in Redis (%s): %w", k.key, err)
	}
	return ring, nil
}

// redisRing reads the hash's fields and values: "current" and each key
// by its id.
func redisRing(fields []string) (Ring, error) {
	var current string
	keys := map[string]string{}
	for i := 0; i+1 < len(fields); i += 2 {
		if fields[i] == "current" {
			current = fields[i+1]
		} else {
			keys[fields[i]] = fields[i+1]
		}
	}
	var specs []KeySpec
	for id, secret := range keys {
		n, err := strconv.Atoi(id)
		if err != nil {
			return Ring{}, fmt.Errorf("key id %q: not a number", id)
		}
		specs = append(specs, KeySpec{ID: n, Key: base64.StdEncoding.EncodeToString([]byte(secret))})
	}
	cur, err := strconv.Atoi(current)
	if err != nil {
		return Ring{}, fmt.Errorf("current key id %q: not a number", current)
	}
	return KeyFile{Current: cur, Keys: specs}.ring()
}

// KeyFile is the keys' file (SECKILL_BOTCHECK_KEYS_FILE): the current key
// and the previous one, each a base64 of 32 or more random bytes.
//
//	{"current": 2, "keys": [{"id": 2, "key": "..."}, {"id": 1, "key": "..."}]}
type KeyFile struct {
	Current int       `json:"current"`
	Keys    []KeySpec `json:"keys"`
}

// KeySpec is one key of a KeyFile.
type KeySpec struct {
	ID  int    `json:"id"`
	Key string `json:"key"`
}

func (f KeyFile) ring() (Ring, error) {
	if len(f.Keys) == 0 || len(f.Keys) > 2 {
		return Ring{}, fmt.Errorf("%d keys: want the current one and at most the previous one", len(f.Keys))
	}
	var r Ring
	found := false
	for i, spec := range f.Keys {
		if spec.ID < 1 || spec.ID > 255 {
			return Ring{}, fmt.Errorf("key id %d: want 1 to 255", spec.ID)
		}
		if i == 1 && spec.ID == f.Keys[0].ID {
			return Ring{}, fmt.Errorf("key id %d appears twice", spec.ID)
		}
		secret, err := base64.StdEncoding.DecodeString(spec.Key)
		if err != nil {
			return Ring{}, fmt.Errorf("key %d: not base64: %w", spec.ID, err)
		}
		if len(secret) < minKeyBytes {
			return Ring{}, fmt.Errorf("key %d: %d bytes, want at least %d", spec.ID, len(secret), minKeyBytes)
		}
		k := Key{ID: byte(spec.ID), Secret: secret}
		switch {
		case spec.ID == f.Current:
			r.Current, found = k, true
		case r.Previous != nil:
			return Ring{}, fmt.Errorf("key ids %d and %d: neither is the current %d", r.Previous.ID, spec.ID, f.Current)
		default:
			r.Previous = &k
		}
	}
	if !found {
		return Ring{}, fmt.Errorf("the current key id %d is not among the keys", f.Current)
	}
	return r, nil
}

// ParseKeyFile reads a KeyFile's JSON.
func ParseKeyFile(data []byte) (Ring, error) {
	var f KeyFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Ring{}, fmt.Errorf("order paths' keys: not the keys' JSON: %w", err)
	}
	r, err := f.ring()
	if err != nil {
		return Ring{}, fmt.Errorf("order paths' keys: %w", err)
	}
	return r, nil
}

// FileKeys reads the ring from a file, again at each read: a Secret
// mounted in a pod changes in place.
type FileKeys string

// Ring reads the file.
func (path FileKeys) Ring(context.Context) (Ring, error) {
	data, err := os.ReadFile(string(path))
	if err != nil {
		return Ring{}, fmt.Errorf("order paths' keys: %w", err)
	}
	r, err := ParseKeyFile(data)
	if err != nil {
		return Ring{}, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// RotateKeyFile writes a new current key into the file at path, keeps the
// current one as the previous and drops the one before: a missing file
// gets its first key. The file is replaced whole (a rename), so a reader
// sees the old ring or the new.
func RotateKeyFile(path string) (Ring, error) {
	next := KeyFile{Current: 1}
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		old, err := ParseKeyFile(data)
		if err != nil {
			return Ring{}, fmt.Errorf("%s: %w", path, err)
		}
		next.Current = int(old.Current.ID)%255 + 1
		next.Keys = append(next.Keys, KeySpec{ID: int(old.Current.ID), Key: base64.StdEncoding.EncodeToString(old.Current.Secret)})
	case !errors.Is(err, os.ErrNotExist):
		return Ring{}, fmt.Errorf("order paths' keys: %w", err)
	}
	fresh := make([]byte, minKeyBytes)
	if _, err := rand.Read(fresh); err != nil {
		return Ring{}, err
	}
	next.Keys = append([]KeySpec{{ID: next.Current, Key: base64.StdEncoding.EncodeToString(fresh)}}, next.Keys...)
	out, err := json.MarshalIndent(next, "", "  ")
	if err != nil {
		return Ring{}, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".keys-*")
	if err != nil {
		return Ring{}, fmt.Errorf("order paths' keys: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(out, '\n')); err != nil {
		tmp.Close()
		return Ring{}, fmt.Errorf("order paths' keys: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return Ring{}, fmt.Errorf("order paths' keys: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return Ring{}, fmt.Errorf("order paths' keys: %w", err)
	}
	return next.ring()
}

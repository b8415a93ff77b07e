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
	"syscall"

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
// issues, and at most two others that only check: the previous one, whose
// paths issued before a rotation live out their lifetime, and in a file
// the next one, staged before a rotation so that every instance accepts
// it before any issues under it. Nothing else is accepted.
type Ring struct {
	Current Key
	Others  []Key
}

// Key is the ring's key of that id, if it holds one.
func (r Ring) Key(id byte) (Key, bool) {
	if r.Current.ID == id {
		return r.Current, true
	}
	for _, k := range r.Others {
		if k.ID == id {
			return k, true
		}
	}
	return Key{}, false
}

// nextID is the id after id, 1 to 255 round.
func nextID(id byte) byte { return id%255 + 1 }

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
	rdb keysRedis
	key string
}

type keysRedis interface {
	redis.Scripter
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
}

// NewRedisKeys keeps the ring under prefix.
func NewRedisKeys(rdb keysRedis, prefix string) RedisKeys {
	return RedisKeys{rdb: rdb, key: prefix + "botcheck:keys"}
}

// Ring reads the ring, making the first key when there is none (or the
// current one was deleted).
func (k RedisKeys) Ring(ctx context.Context) (Ring, error) {
	fields, err := k.rdb.HGetAll(ctx, k.key).Result()
	if err != nil {
		return Ring{}, fmt.Errorf("order paths' keys in Redis (%s): %w", k.key, err)
	}
	if ring, err := redisRing(fields); err == nil {
		return ring, nil
	}
	return k.run(ctx, "ensure")
}

// Rotate makes a new current key; the current one becomes the previous,
// and the one before that is dropped (seckillctl path-keys rotate). Every
// instance reads Redis, so none needs the new key staged first.
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
	fields := map[string]string{}
	for i := 0; i+1 < len(v); i += 2 {
		fields[v[i]] = v[i+1]
	}
	ring, err := redisRing(fields)
	if err != nil {
		return Ring{}, fmt.Errorf("order paths' keys in Redis (%s): %w", k.key, err)
	}
	return ring, nil
}

// redisRing reads the hash: "current" and each key by its id.
func redisRing(fields map[string]string) (Ring, error) {
	cur, err := strconv.Atoi(fields["current"])
	if err != nil || cur < 1 || cur > 255 {
		return Ring{}, fmt.Errorf("current key id %q: not 1 to 255", fields["current"])
	}
	var r Ring
	found := false
	for id, secret := range fields {
		n, err := strconv.Atoi(id)
		if id == "current" {
			continue
		}
		if err != nil || n < 1 || n > 255 || len(secret) < minKeyBytes {
			return Ring{}, fmt.Errorf("key %q: not an id of 1 to 255 with %d bytes or more", id, minKeyBytes)
		}
		k := Key{ID: byte(n), Secret: []byte(secret)}
		if n == cur {
			r.Current, found = k, true
		} else {
			r.Others = append(r.Others, k)
		}
	}
	if !found {
		return Ring{}, fmt.Errorf("the current key %d is missing", cur)
	}
	return r, nil
}

// KeyFile is the keys' file (SECKILL_BOTCHECK_KEYS_FILE): the current key
// and at most two others (the previous, the next one staged), each a
// base64 of 32 or more random bytes.
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
	if len(f.Keys) == 0 || len(f.Keys) > 3 {
		return Ring{}, fmt.Errorf("%d keys: want the current one and at most two others (the previous, the next)", len(f.Keys))
	}
	var r Ring
	found := false
	seen := map[int]bool{}
	for _, spec := range f.Keys {
		if spec.ID < 1 || spec.ID > 255 {
			return Ring{}, fmt.Errorf("key id %d: want 1 to 255", spec.ID)
		}
		if seen[spec.ID] {
			return Ring{}, fmt.Errorf("key id %d appears twice", spec.ID)
		}
		seen[spec.ID] = true
		secret, err := base64.StdEncoding.DecodeString(spec.Key)
		if err != nil {
			return Ring{}, fmt.Errorf("key %d: not base64: %w", spec.ID, err)
		}
		if len(secret) < minKeyBytes {
			return Ring{}, fmt.Errorf("key %d: %d bytes, want at least %d", spec.ID, len(secret), minKeyBytes)
		}
		k := Key{ID: byte(spec.ID), Secret: secret}
		if spec.ID == f.Current {
			r.Current, found = k, true
		} else {
			r.Others = append(r.Others, k)
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

// StageKeyFile adds the next key to the file at path, accepted but not
// issuing: where each instance reads its own copy of the file (a mounted
// Secret, updated on each node in its own time), every copy must hold
// the next key before any instance issues under it. A key staged already
// stays as it is: it may have reached every copy. The current and the
// previous keys stay.
func StageKeyFile(path string) (Ring, error) {
	old, mode, err := readKeyFile(path)
	if err != nil {
		return Ring{}, err
	}
	next := nextID(old.Current.ID)
	if _, staged := old.Key(next); staged {
		return old, nil
	}
	f := KeyFile{Current: int(old.Current.ID), Keys: []KeySpec{spec(old.Current)}}
	for _, k := range old.Others {
		if k.ID != next {
			f.Keys = append(f.Keys, spec(k))
		}
	}
	fresh, err := freshKey(next)
	if err != nil {
		return Ring{}, err
	}
	f.Keys = append(f.Keys, spec(fresh))
	return writeKeyFile(path, f, mode)
}

// RotateKeyFile makes the next key current in the file at path: the one
// staged, or a new one when none is (where every instance reads the same
// file). The current key becomes the previous; any other is dropped. A
// missing file gets its first key.
func RotateKeyFile(path string) (Ring, error) {
	old, mode, err := readKeyFile(path)
	if errors.Is(err, os.ErrNotExist) {
		first, err := freshKey(1)
		if err != nil {
			return Ring{}, err
		}
		return writeKeyFile(path, KeyFile{Current: 1, Keys: []KeySpec{spec(first)}}, 0o600)
	}
	if err != nil {
		return Ring{}, err
	}
	next, staged := old.Key(nextID(old.Current.ID))
	if !staged || next.ID == old.Current.ID {
		if next, err = freshKey(nextID(old.Current.ID)); err != nil {
			return Ring{}, err
		}
	}
	return writeKeyFile(path, KeyFile{Current: int(next.ID), Keys: []KeySpec{spec(next), spec(old.Current)}}, mode)
}

func spec(k Key) KeySpec {
	return KeySpec{ID: int(k.ID), Key: base64.StdEncoding.EncodeToString(k.Secret)}
}

func freshKey(id byte) (Key, error) {
	secret := make([]byte, minKeyBytes)
	if _, err := rand.Read(secret); err != nil {
		return Key{}, err
	}
	return Key{ID: id, Secret: secret}, nil
}

// readKeyFile is the file's ring and its permissions, which a rewrite
// keeps: the api may read it as another user than the one rotating.
func readKeyFile(path string) (Ring, os.FileMode, error) {
	info, err := os.Stat(path)
	if err != nil {
		return Ring{}, 0, fmt.Errorf("order paths' keys: %w", err)
	}
	ring, err := FileKeys(path).Ring(context.Background())
	return ring, info.Mode().Perm(), err
}

// writeKeyFile replaces the file whole (a rename), so a reader sees the
// old ring or the new, never half of one; with the old file's mode and,
// where the writer may, its owner.
func writeKeyFile(path string, f KeyFile, mode os.FileMode) (Ring, error) {
	ring, err := f.ring()
	if err != nil {
		return Ring{}, err
	}
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return Ring{}, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".keys-*")
	if err != nil {
		return Ring{}, fmt.Errorf("order paths' keys: %w", err)
	}
	defer os.Remove(tmp.Name())
	if info, err := os.Stat(path); err == nil {
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			_ = tmp.Chown(int(st.Uid), int(st.Gid)) // best effort: only root may give a file away
		}
	}
	_, err = tmp.Write(append(out, '\n'))
	err = errors.Join(err, tmp.Chmod(mode), tmp.Sync(), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return Ring{}, fmt.Errorf("order paths' keys: %w", err)
	}
	return ring, nil
}

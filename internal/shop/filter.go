package shop

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
)

// Filter is a Bloom filter of the shop ids, kept in Redis as one bitmap of
// fixed size (no TTL, never evicted): the design notes' answer to cache
// penetration. An id it has never seen is answered "not found" before the
// cache, so strangers asking for random ids cannot fill Redis with null
// markers or reach MySQL. A shop is added when it is created (by the API,
// and by the binlog follower for rows written any other way); a deleted
// shop stays "maybe" and falls through to the cache's null marker.
//
// While the bitmap is missing (a new deployment, a Redis that lost it)
// every id is "maybe", and the first lookup rebuilds it from MySQL.
type Filter struct {
	rdb    redis.UniversalClient
	db     *sql.DB
	key    string
	m      uint64 // bits
	k      uint   // hashes per id
	logger *slog.Logger

	building atomic.Bool
}

// falsePositives is the filter's false-positive rate at its capacity.
const falsePositives = 0.01

// NewFilter sizes the filter for capacity shop ids at 1 % false positives
// (1,000,000 ids: 1.2 MB). Its key names its size, so that programs
// configured with different capacities can never set each other's bits
// at the wrong places.
func NewFilter(rdb redis.UniversalClient, db *sql.DB, keys Keys, capacity uint, logger *slog.Logger) *Filter {
	m, k := bloom.EstimateParameters(capacity, falsePositives)
	key := keys.Filter() + ":" + strconv.FormatUint(uint64(m), 10) + ":" + strconv.FormatUint(uint64(k), 10)
	return &Filter{rdb: rdb, db: db, key: key, m: uint64(m), k: k, logger: logger}
}

func (f *Filter) offsets(id int64) []uint64 {
	locs := bloom.Locations(strconv.AppendInt(nil, id, 10), f.k)
	for i := range locs {
		locs[i] %= f.m
	}
	return locs
}

// MayContain is false only for an id the filter has never seen.
func (f *Filter) MayContain(ctx context.Context, id int64) (bool, error) {
	args := make([]any, 0, 2+3*f.k)
	args = append(args, "BITFIELD_RO", f.key)
	for _, o := range f.offsets(id) {
		args = append(args, "GET", "u1", o)
	}
	var exists *redis.IntCmd
	var bits *redis.Cmd
	_, err := f.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		exists = p.Exists(ctx, f.key)
		bits = p.Do(ctx, args...)
		return nil
	})
	if err != nil {
		return true, fmt.Errorf("shop filter: %w", err)
	}
	if exists.Val() == 0 {
		f.rebuildInBackground()
		return true, nil
	}
	vals, err := bits.Int64Slice()
	if err != nil {
		return true, fmt.Errorf("shop filter: %w", err)
	}
	for _, v := range vals {
		if v == 0 {
			return false, nil
		}
	}
	return true, nil
}

// Add records a shop id; without a bitmap it does nothing (the rebuild
// reads every id from MySQL).
func (f *Filter) Add(ctx context.Context, id int64) error {
	offs := f.offsets(id)
	args := make([]any, len(offs))
	for i, o := range offs {
		args[i] = o
	}
	if err := lua.BloomAdd.Run(ctx, f.rdb, []string{f.key}, args...).Err(); err != nil {
		return fmt.Errorf("shop filter: add %d: %w", id, err)
	}
	return nil
}

func (f *Filter) rebuildInBackground() {
	if !f.building.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer f.building.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := f.Rebuild(ctx); err != nil {
			f.logger.Warn("shop filter: rebuild failed; every shop id passes to the cache until it succeeds", "err", err)
		}
	}()
}

// Rebuild makes the bitmap anew from MySQL's shop ids and puts it in place
// at once (a RENAME), then reads the ids again and ORs them in: a shop
// inserted while the bitmap was built, whose follower's add found no
// bitmap, is in the second read.
func (f *Filter) Rebuild(ctx context.Context) error {
	first, n, err := f.bitmap(ctx)
	if err != nil {
		return err
	}
	// The key in a hash tag: in f.key's slot on Redis Cluster, which a
	// RENAME and a BITOP between the two need.
	tmp := "{" + f.key + "}:building:" + rand.Text()
	if _, err := f.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, tmp, first, 0)
		p.Rename(ctx, tmp, f.key)
		return nil
	}); err != nil {
		return fmt.Errorf("shop filter: store: %w", err)
	}
	second, _, err := f.bitmap(ctx)
	if err != nil {
		return err
	}
	if _, err := f.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, tmp, second, 0)
		p.BitOpOr(ctx, f.key, f.key, tmp)
		p.Del(ctx, tmp)
		return nil
	}); err != nil {
		return fmt.Errorf("shop filter: store the second read: %w", err)
	}
	f.logger.Info("shop filter rebuilt from MySQL", "shops", n, "bits", f.m, "hashes", f.k)
	return nil
}

// bitmap is the filter of MySQL's shop ids as Redis stores a bitmap.
func (f *Filter) bitmap(ctx context.Context) ([]byte, int, error) {
	bitmap := make([]byte, (f.m+7)/8)
	n, err := f.eachID(ctx, func(id int64) {
		for _, o := range f.offsets(id) {
			bitmap[o/8] |= 0x80 >> (o % 8) // Redis numbers a byte's bits from the high one
		}
	})
	return bitmap, n, err
}

func (f *Filter) eachID(ctx context.Context, fn func(int64)) (int, error) {
	rows, err := f.db.QueryContext(ctx, "SELECT id FROM tb_shop")
	if err != nil {
		return 0, fmt.Errorf("shop filter: read shop ids: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return n, fmt.Errorf("shop filter: read shop ids: %w", err)
		}
		fn(id)
		n++
	}
	return n, rows.Err()
}

// Package salestate is the flash sale's state in Redis as every job on it
// sees it: the keys and their layout over stock buckets, the buckets'
// reads, the reservations' shape, the gate script's outcomes and the set of
// active sales. The jobs are packages of their own, each on this one: the
// buyer's path (gate), the repair from MySQL (salerepair), the outbox of
// accepted orders (outbox), the settled orders' records (salerecords) and
// the draw's entries (drawstate). The scripts are in lua/.
package salestate

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"

	"github.com/seckill/seckill/lua"
)

// Store is the flash sale's state in Redis. Every key starts with prefix,
// so that deployments (and tests) can share one Redis. The jobs of one
// process share one Store: its remembered layouts are theirs.
type Store struct {
	rdb     redis.UniversalClient
	prefix  string
	layouts layouts
	probes  *rate.Limiter // of unknown vouchers' buckets (DirectoryLost)
	probing singleflight.Group
}

// New keeps the flash sale under prefix ("" in production).
func New(rdb redis.UniversalClient, prefix string) *Store {
	return &Store{rdb: rdb, prefix: prefix, probes: rate.NewLimiter(probeRate, probeRate)}
}

// probeRate is how many unknown vouchers an instance looks for lost
// directories of, a second.
const probeRate = 20

// Redis is the client the state is read and written through.
func (s *Store) Redis() redis.UniversalClient { return s.rdb }

// Prefix is what every key of the state starts with.
func (s *Store) Prefix() string { return s.prefix }

// KeysOf is the keys under voucher id's own tag: the sale's, when it has
// one bucket; its directory's (the Voucher key), when it has more.
func (s *Store) KeysOf(voucherID int64) Keys { return KeysFor(s.prefix, voucherID) }

// Bucket is bucket b's keys of lay.
func (s *Store) Bucket(lay Layout, b int) Keys { return lay.keys(s.prefix, b) }

// ActiveVouchers is the set of voucher ids warmed in Redis: where the relay
// and order lookups look for reservations. It is one key of its own, read
// apart from the scripts, so it needs no hash tag.
func (s *Store) ActiveVouchers() string { return s.prefix + "seckill:vouchers" }

// Active is every voucher listed among the active sales (ActiveVouchers):
// those whose state may hold a reservation.
func (s *Store) Active(ctx context.Context) ([]int64, error) {
	members, err := s.rdb.SMembers(ctx, s.ActiveVouchers()).Result()
	if err != nil {
		return nil, fmt.Errorf("active vouchers: %w", err)
	}
	ids := make([]int64, 0, len(members))
	for _, m := range members {
		if id, err := strconv.ParseInt(m, 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// List puts voucherID among the active vouchers, and reports whether it
// was missing.
func (s *Store) List(ctx context.Context, voucherID int64) (bool, error) {
	n, err := s.rdb.SAdd(ctx, s.ActiveVouchers(), voucherID).Result()
	if err != nil {
		return false, fmt.Errorf("list voucher %d among the active vouchers: %w", voucherID, err)
	}
	return n == 1, nil
}

// Now is Redis's clock, the one that stamps reservations.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	t, err := s.rdb.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("redis time: %w", err)
	}
	return t, nil
}

// Open makes a sale whose buckets are in place findable: its directory
// under the voucher's own tag (n > 1), its layout remembered, the voucher
// among the active ones (another slot on a cluster: a step that a retry
// of the caller repeats harmlessly).
func (s *Store) Open(ctx context.Context, voucherID int64, n int) error {
	if n > 1 {
		if err := lua.WarmDirectory.Run(ctx, s.rdb, s.KeysOf(voucherID).List(), n).Err(); err != nil {
			return fmt.Errorf("its directory: %w", err)
		}
	}
	s.layouts.put(voucherID, n)
	if err := s.rdb.SAdd(ctx, s.ActiveVouchers(), voucherID).Err(); err != nil {
		return fmt.Errorf("among the active vouchers: %w", err)
	}
	return nil
}

// IsOutdatedLayout reports whether err is Redis refusing a command on a key
// of another type than today's code writes: a sale left by an earlier
// release (its buyers a set where they are now a hash).
func IsOutdatedLayout(err error) bool { return redis.HasErrorPrefix(err, "WRONGTYPE") }

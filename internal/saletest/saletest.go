// Package saletest is one process's sale state in Redis with every job on
// it, wired as the programs wire them: for tests that act on a sale as
// several jobs at once (sell it, repair it, settle its orders).
package saletest

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/drawstate"
	"github.com/seckill/seckill/internal/gate"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/outbox"
	"github.com/seckill/seckill/internal/salerecords"
	"github.com/seckill/seckill/internal/salerepair"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/testsupport"
)

// Sales is the base and each job on it, sharing its remembered layouts.
type Sales struct {
	*salestate.Store
	Gate    *gate.Store
	Repair  *salerepair.Store
	Outbox  *outbox.Store
	Records *salerecords.Store
	Draws   *drawstate.Store
}

// New is the sale state under prefix on rdb.
func New(rdb redis.UniversalClient, prefix string) *Sales {
	base := salestate.New(rdb, prefix)
	return &Sales{Store: base, Gate: gate.New(base), Repair: salerepair.New(base), Outbox: outbox.New(base),
		Records: salerecords.New(base), Draws: drawstate.New(base)}
}

// Warmed is a voucher of the test's own, on sale for the next hour with
// stock units, in a sale state under the test's key prefix.
func Warmed(tb testing.TB, stock int64) (*testsupport.Redis, *Sales, int64) {
	tb.Helper()
	r := testsupport.MustRedis(tb)
	s := New(r.Client, r.Prefix)
	return r, s, Warm(tb, s, stock)
}

// Warm puts a voucher of the test's own on sale in s for the next hour,
// with stock units.
func Warm(tb testing.TB, s *Sales, stock int64) (voucher int64) {
	tb.Helper()
	voucher = 1 + rand.Int64N(1<<40)
	if err := s.Gate.Warm(context.Background(), voucher, stock, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		tb.Fatal(err)
	}
	return voucher
}

// NoMySQL is MySQL for lookups that must not reach it: a read fails the
// test.
type NoMySQL struct{ TB testing.TB }

// FindSettled fails the test.
func (u NoMySQL) FindSettled(context.Context, int64) (order.Status, bool, error) {
	u.TB.Error("a lookup of a live sale read MySQL")
	return order.Status{}, false, nil
}

// FindSettledOf fails the test.
func (u NoMySQL) FindSettledOf(context.Context, int64, int64) (order.Status, bool, error) {
	u.TB.Error("a lookup of a live sale read MySQL")
	return order.Status{}, false, nil
}

// Stall is longer than the production client's read timeout, so go-redis
// gives up on a reply stalled that long and sends the command again: both
// then run.
const Stall = 1500 * time.Millisecond

// Stallable is a voucher on sale with stock units in a Redis of the test's
// own, which the test may stall for Stall, reached through a client
// configured as the programs configure theirs (timeouts, retries). The
// sale state is what newSales makes of that client, or New's when nil.
func Stallable(tb testing.TB, stock int64, newSales func(testing.TB, redis.UniversalClient, string) *Sales) (*testsupport.Redis, *Sales, int64) {
	tb.Helper()
	r, _ := testsupport.MustPrivateRedis(tb)
	if newSales == nil {
		newSales = func(_ testing.TB, rdb redis.UniversalClient, prefix string) *Sales { return New(rdb, prefix) }
	}
	s := newSales(tb, testsupport.MustProductionClient(tb, r.Addr), "")
	const voucher = 1
	if err := s.Gate.Warm(context.Background(), voucher, stock, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		tb.Fatal(err)
	}
	return r, s, voucher
}

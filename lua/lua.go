// Package lua holds the project's Redis scripts. Each .lua file is embedded
// and wrapped in a go-redis Script, so callers run it with EVALSHA and fall
// back to EVAL (which reloads it) after a NOSCRIPT, e.g. a Redis restart or
// SCRIPT FLUSH.
package lua

import (
	"context"
	"embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

//go:embed *.lua
var files embed.FS

// LockAcquire takes a re-entrant lock and returns its fencing token.
var LockAcquire = mustLoad("lock_acquire.lua")

// LockRelease releases one hold of a lock, only by its owner.
var LockRelease = mustLoad("lock_release.lua")

// LockFenceFloor raises a lock's fencing counter to at least a floor.
var LockFenceFloor = mustLoad("lock_fence_floor.lua")

// LockExtend extends a lock's TTL, only by its owner.
var LockExtend = mustLoad("lock_extend.lua")

// Seckill is the flash-sale gate: sale window, stock and one order per
// user, decided and recorded atomically.
var Seckill = mustLoadSale("seckill.lua")

// Draw begins and ends a sale's draw under the drawer's fencing token.
var Draw = mustLoadSale("draw.lua")

// AdjustVoucher changes a warmed voucher's stock by a delta, never below
// zero, and optionally its window.
var AdjustVoucher = mustLoadSale("adjust_voucher.lua")

// CacheGet reads a cache entry and hands its rebuild to one caller.
var CacheGet = mustLoad("cache_get.lua")

// CacheSet writes a rebuilt entry if the caller still owns the rebuild.
var CacheSet = mustLoad("cache_set.lua")

// IssueCode stores a new login code for a phone within the phone's cooldown
// and daily limit.
var IssueCode = mustLoad("issue_code.lua")

// VerifyCode checks a login code: single use, burned after too many wrong
// tries.
var VerifyCode = mustLoad("verify_code.lua")

// EndCodeHold spends or releases the hold VerifyCode put on a right code.
var EndCodeHold = mustLoad("end_code_hold.lua")

// RetireSale puts an expiry on an ended, settled sale's keys.
var RetireSale = mustLoadSale("retire_sale.lua")

// ReconcileSale puts a rebuilt sale in place and unfreezes it, once per
// reconcile, refusing a stale fencing token.
var ReconcileSale = mustLoadSale("reconcile_sale.lua")

// FreezeSale freezes or unfreezes a sale for a reconcile, refusing a stale
// fencing token.
var FreezeSale = mustLoadSale("freeze_sale.lua")

// IDLease leases a block of a day's id sequence, skipping a margin under
// a new replication id.
var IDLease = mustLoadServer("id_lease.lua")

// SaleWindow reads a sale's window and its server's clock together.
var SaleWindow = mustLoadServer("sale_window.lua")

// IDFloor raises an id counter to at least a floor.
var IDFloor = mustLoad("id_floor.lua")

// BloomAdd sets an item's bits in an existing Bloom filter.
var BloomAdd = mustLoad("bloom_add.lua")

// WarmDirectory puts the directory of a sale of several buckets under the
// voucher's own tag.
var WarmDirectory = mustLoadSale("warm_directory.lua")

// BucketTake and BucketDeposit are the two steps of moving units between
// the buckets of one sale; BucketRefund gives the units of a void deposit
// back.
var (
	BucketTake    = mustLoadSale("bucket_take.lua")
	BucketDeposit = mustLoadSale("bucket_deposit.lua")
	BucketRefund  = mustLoadSale("bucket_refund.lua")
	// BucketState reads one bucket as the movers need it: stock, net,
	// frozen, generation, window, and whether it may have lost writes.
	BucketState = mustLoadSale("bucket_state.lua")
)

// WarmSale puts a new voucher's sale in place, stamped with its server's
// replication id.
var WarmSale = mustLoadSale("warm_sale.lua")

// SaleSize reads a sale's stock, stamp and buyer count with its server's
// replication id.
var SaleSize = mustLoadSale("sale_size.lua")

// RecordSettled records settled orders' final status in a sale's state.
var RecordSettled = mustLoadSale("record_settled.lua")

// RefreshRotate rotates a refresh token family, tells an honest retry from
// a reuse, and deletes the family on a reuse.
var RefreshRotate = mustLoad("refresh_rotate.lua")

// RefreshIndex indexes a new refresh family under its user and reads the
// user's logout generation.
var RefreshIndex = mustLoad("refresh_index.lua")

// Revoke appends a revocation to the jwt feed and trims it by Redis's
// clock.
var Revoke = mustLoad("revoke.lua")

// RefreshLogoutUser raises a user's logout generation and empties the
// index of the user's refresh families.
var RefreshLogoutUser = mustLoad("refresh_logout_user.lua")

// PathKeys makes, reads and rotates the order paths' keys.
var PathKeys = mustLoad("path_keys.lua")

// all is every script, for LoadAll.
var all []*redis.Script

func mustLoad(name string) *redis.Script {
	s := redis.NewScript(mustRead(name))
	all = append(all, s)
	return s
}

// mustLoadSale loads a script of a sale's state behind the sale's prelude
// (sale.lua, after server.lua): the keys' one order and the helpers every
// such script uses.
func mustLoadSale(name string) *redis.Script {
	s := redis.NewScript(mustRead(serverPrelude) + mustRead(salePrelude) + mustRead(name))
	all = append(all, s)
	return s
}

// mustLoadServer loads a script behind the prelude of the scripts that
// read their server's clock or replication id (server.lua).
func mustLoadServer(name string) *redis.Script {
	s := redis.NewScript(mustRead(serverPrelude) + mustRead(name))
	all = append(all, s)
	return s
}

// The preludes, not scripts themselves.
const (
	serverPrelude = "server.lua"
	salePrelude   = "sale.lua"
)

func mustRead(name string) string {
	src, err := files.ReadFile(name)
	if err != nil {
		// The file is embedded at build time: failing here is a build defect.
		panic(fmt.Sprintf("lua: embedded script %s: %v", name, err))
	}
	return string(src)
}

// LoadAll puts every script in the script cache of every node: on Redis
// Cluster go-redis sends SCRIPT LOAD to each master and each replica, so a
// replica promoted later has them too. It saves the first call of each
// script on each node its NOSCRIPT round trip; a node that lost its cache
// since (a restart) gets each script again by EVALSHA's fallback to EVAL.
func LoadAll(ctx context.Context, rdb redis.Scripter) error {
	for _, s := range all {
		if err := s.Load(ctx, rdb).Err(); err != nil {
			return fmt.Errorf("load the Lua scripts: %w", err)
		}
	}
	return nil
}

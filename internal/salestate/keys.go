package salestate

import "strconv"

// The fields of a voucher's hash (Keys.Voucher; VOUCHER in the scripts).
// docs/design.md has the table of who writes each.
const (
	FieldStock      = "stock"      // units left to sell
	FieldBegin      = "begin"      // when the sale opens, ms
	FieldEnd        = "end"        // when it closes, ms
	FieldFrozen     = "frozen"     // there while a reconcile rebuilds the sale
	FieldEpoch      = "epoch"      // the replication id the state was built under
	FieldFence      = "fence"      // the largest reconcile fencing token seen
	FieldReconciled = "reconciled" // the id of the reconcile that built the state: its generation
	FieldBuckets    = "buckets"    // N, when the sale has N > 1 buckets (every bucket, and the directory)
	FieldGiven      = "given"      // units this bucket gave to others since it was built
	FieldReceived   = "received"   // units it received from others since it was built
	FieldDraw       = "draw"       // a draw's admission window, ms: entries until begin + draw
	FieldDrawn      = "drawn"      // when the draw was made, ms
	FieldDrawFence  = "drawfence"  // the fencing token of the draw's drawer
	FieldSeed       = "seed"       // the draw's seed, hex (MySQL keeps it too)
)

// VoucherFields are every field of a voucher's hash: the prelude's header
// names them all (TestScriptHeadersNameEveryVoucherField), and each
// script's header the ones it writes (TestScriptHeadersNameWhatTheyWrite).
var VoucherFields = []string{FieldStock, FieldBegin, FieldEnd, FieldFrozen, FieldEpoch, FieldFence, FieldReconciled,
	FieldBuckets, FieldGiven, FieldReceived, FieldDraw, FieldDrawn, FieldDrawFence, FieldSeed}

// Keys are the Redis keys of one bucket of a voucher's sale, all under the
// bucket's hash tag ({id} for a sale in one bucket).
type Keys struct {
	Voucher   string // hash {stock, begin, end, frozen, epoch, fence, reconciled, buckets, given, received, draw, drawn, drawfence, seed}
	Buyers    string // hash user id -> order id
	Pending   string // hash order id -> "userId:acceptedMs"
	PendingAt string // zset order id by acceptedMs
	Changes   string // hash stock change id -> stock after it
	// Settled is what the order-writer settled, for lookups while the
	// sale's state is in Redis: "o:<order id>" -> the order's final status,
	// "u:<user id>" -> the user's latest failed order.
	Settled string
	// Transfers are the units this bucket gave and the receiver has not
	// yet been seen to take: transfer id -> "receiver:units:the donor's
	// generation:the receiver's generation as read before the take:ms".
	Transfers string
	// Entrants are a draw's entries: user id -> the entry's order id. Not
	// among the keys every script receives: the gate's, the warm's and the
	// retirement's own.
	Entrants string
}

// KeysFor is voucher id's keys under prefix: the store's layout, for the
// tests and tools that look at a sale's state from outside the store.
func KeysFor(prefix string, voucherID int64) Keys {
	return keysWithTag(prefix, strconv.FormatInt(voucherID, 10))
}

// BucketKeys are bucket b's keys of voucher id's sale in n buckets, under
// prefix: for tests and tools, as KeysFor.
func BucketKeys(prefix string, voucherID int64, n, b int) Keys {
	return LayoutOf(voucherID, n).keys(prefix, b)
}

func keysWithTag(prefix, tag string) Keys {
	tag = "{" + tag + "}"
	return Keys{
		Voucher:   prefix + "seckill:voucher:" + tag,
		Buyers:    prefix + "seckill:buyers:" + tag,
		Pending:   prefix + "seckill:pending:" + tag,
		PendingAt: prefix + "seckill:pending-at:" + tag,
		Changes:   prefix + "seckill:changes:" + tag,
		Settled:   prefix + "seckill:settled:" + tag,
		Transfers: prefix + "seckill:transfers:" + tag,
		Entrants:  prefix + "seckill:entrants:" + tag,
	}
}

// VoucherPattern matches the voucher hash of every sale under prefix, for
// a SCAN's MATCH.
func VoucherPattern(prefix string) string { return prefix + "seckill:voucher:{*}" }

// List is the keys a script of the sale receives: the shared ones in the
// one order lua/sale.lua declares (TestSharedKeysAgreeWithThePrelude),
// then the script's own.
func (k Keys) List(own ...string) []string {
	return append([]string{k.Voucher, k.Buyers, k.Pending, k.PendingAt, k.Changes, k.Settled, k.Transfers}, own...)
}

// Package sale is the vocabulary of a flash sale that the stores
// (internal/salestate in Redis, internal/orderdb in MySQL) and the services
// above them (internal/voucher, internal/reconcile) share: what a sale may
// be refused for, its bounds, MySQL's truth and the plan Redis is rebuilt
// to, and the invariants a sale in Redis keeps against MySQL. It imports
// neither side, so each imports it and neither imports the other's users.
package sale

import (
	"time"

	"github.com/seckill/seckill/internal/apperr"
)

// MaxBuckets bounds a sale's stock buckets: one per master of the largest
// cluster worth splitting one item over.
const MaxBuckets = 16

// The refusals of a change to a sale in Redis, which callers branch on.
var (
	// ErrNotEnoughStock refuses a change that would take more units than
	// remain unsold.
	ErrNotEnoughStock = apperr.New(apperr.Conflict, "cannot remove more units than remain unsold")
	// ErrNotWarmed means the voucher has no sale in Redis.
	ErrNotWarmed = apperr.New(apperr.Conflict, "the voucher's sale is not in Redis: seckillctl reconcile <id> puts it there from MySQL")
	// ErrBucketAway refuses a change of a sale in stock buckets while one
	// of them cannot be read (its master failing over): nothing changed.
	ErrBucketAway = apperr.New(apperr.Unavailable, "a part of the sale cannot be reached right now: try again in a moment").Retry(2 * time.Second)
	// ErrFrozen refuses a change while the sale is being reconciled.
	ErrFrozen = apperr.New(apperr.Conflict, "the sale is being reconciled: try again in a moment").Retry(2 * time.Second)
	// ErrChangeUnknown: Redis did not answer whether it took a change (a
	// step's reply lost, and lost again when sent anew): it may hold it
	// in part. No refusal: the caller must not undo the change elsewhere
	// as if nothing had been made.
	ErrChangeUnknown = apperr.New(apperr.Unavailable, "Redis did not confirm the change, which it may hold in part")
	// ErrFenced: a newer reconcile of the voucher has written it since
	// this one's lock was taken (the lock expired while this one was
	// paused); this one's writes were refused.
	ErrFenced = apperr.New(apperr.Conflict, "reconcile: a newer reconcile of this voucher has run since this one's lock expired; nothing written")
)

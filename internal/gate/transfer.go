package gate

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/lua"
)

// Stock moves, users don't: a user's attempts always run in the user's home
// bucket, so one order per user stays one script on one slot. When that
// bucket runs dry while others have units, the attempt moves units to it,
// in two steps that are each idempotent by the transfer's id: a take on the
// donor (bucket_take.lua), which records the transfer, and a deposit on the
// receiver (bucket_deposit.lua); then the donor's record is deleted. A mover
// that dies between the steps leaves the record, and the units in no
// bucket: the sale can only undersell until the relay's sweep
// (FinishTransfers) deposits them.
//
// Whether a sale is sold out is read from each bucket's net stock, stock +
// given − received: a transfer changes neither bucket's (a take moves units
// from stock to given, a deposit from nothing to both stock and received),
// so reading the buckets one after another, on different masters, counts no
// transfer twice and misses none in transit. Only an accepted order (and a
// stock reduction) lowers a bucket's net stock, so reads taken at different
// moments add up to no less than what remains at the last of them: a sum of
// zero means sold out then.

// refilled is what refill found.
type refilled int

const (
	refillMoving  refilled = iota // nothing arrived: units in transit, or where they cannot be moved now
	refillDone                    // home has units now
	refillSoldOut                 // the sale is sold out
	refillPaused                  // home may have lost writes: it waits for its reconcile
)

// refill moves units to the dry bucket home from the bucket with the most,
// half of them: enough that the next attempts there find units, and some
// left where they were. The sale is sold out only when every bucket was
// read, none frozen or suspect, all of one generation (reads that straddle
// a rebuild add up parts of two different sales), and their net stock adds
// up to zero. A suspect home gets no units: it could not sell them.
func (s *Store) refill(ctx context.Context, lay salestate.Layout, home int) (refilled, error) {
	states, err := s.ReadBuckets(ctx, lay)
	if err != nil {
		return refillMoving, err
	}
	if states[home].Suspect {
		return refillPaused, nil
	}
	var net int64
	whole := true
	donor := -1
	for b, st := range states {
		if !st.Read || !st.Exists || st.Frozen || st.Suspect {
			// A bucket away, gone, being rebuilt or that may have lost
			// writes may hold units, and cannot give them now.
			whole = false
			continue
		}
		if st.Gen != states[home].Gen {
			whole = false
		}
		net += st.Net
		if b != home && st.Stock > 0 && (donor < 0 || st.Stock > states[donor].Stock) {
			donor = b
		}
	}
	switch {
	case whole && net <= 0:
		return refillSoldOut, nil
	case states[home].Stock > 0:
		// Another attempt refilled it meanwhile.
		return refillDone, nil
	case donor < 0:
		return refillMoving, nil
	}
	moved, err := s.transfer(ctx, lay, donor, home, (states[donor].Stock+1)/2, states[home].Gen)
	if err != nil || moved == 0 {
		return refillMoving, err
	}
	return refillDone, nil
}

// transferMemory is how long a receiver remembers a deposit's id: far
// longer than a sweep takes to finish a transfer.
const transferMemory = 24 * time.Hour

// transfer moves up to units from bucket from to bucket to, whose
// generation was toGen when read, and returns how many arrived.
func (s *Store) transfer(ctx context.Context, lay salestate.Layout, from, to int, units int64, toGen string) (int64, error) {
	id := rand.Text()
	taken, err := lua.BucketTake.Run(ctx, s.Redis(), s.Bucket(lay, from).List(), id, to, units, toGen).Int64()
	if err != nil {
		return 0, fmt.Errorf("move units of voucher %d from bucket %d: %w", lay.VoucherID, from, err)
	}
	if taken == 0 {
		return 0, nil
	}
	if s.AfterTake != nil {
		if err := s.AfterTake(); err != nil {
			return 0, err
		}
	}
	deposited, err := s.deposit(ctx, lay, from, to, id, taken, toGen)
	switch {
	case errors.Is(err, errNotNow):
		return 0, nil
	case err != nil || !deposited:
		return 0, err
	}
	return taken, nil
}

// errNotNow: a deposit that cannot be made now (its receiver is frozen or
// gone); its transfer stays recorded and a sweep tries again.
var errNotNow = errors.New("the receiving bucket is frozen or gone: the transfer waits for the sweep")

// deposit is a transfer's second step, and then the end of its record on
// the donor: deleted once the deposit is made (deposited), or with its
// units given back when the deposit was void (bucket_refund.lua). toGen is
// the receiver's generation as the mover read it.
func (s *Store) deposit(ctx context.Context, lay salestate.Layout, from, to int, id string, units int64, toGen string) (deposited bool, err error) {
	r, err := lua.BucketDeposit.Run(ctx, s.Redis(), s.Bucket(lay, to).List(), id, units, toGen, transferMemory.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("move %d units of voucher %d to bucket %d: %w", units, lay.VoucherID, to, err)
	}
	if r < 0 {
		return false, errNotNow
	}
	donor := s.Bucket(lay, from)
	if r == 0 {
		if err := lua.BucketRefund.Run(ctx, s.Redis(), donor.List(), id).Err(); err != nil {
			return false, fmt.Errorf("move units of voucher %d: give transfer %s back: %w", lay.VoucherID, id, err)
		}
		return false, nil
	}
	if err := s.Redis().HDel(ctx, donor.Transfers, id).Err(); err != nil {
		return false, fmt.Errorf("move units of voucher %d: forget transfer %s: %w", lay.VoucherID, id, err)
	}
	return true, nil
}

// FinishTransfers deposits the transfers of voucherID's sale taken before
// cutoff (Redis's clock) whose mover died between its two steps, and returns
// how many it finished. A transfer whose receiver is frozen waits for the
// next sweep; a bucket that cannot be read, or a transfer that cannot be
// finished now, is in the error, and the others are finished all the same.
func (s *Store) FinishTransfers(ctx context.Context, voucherID int64, cutoff time.Time) (int, error) {
	lay, err := s.LayoutOf(ctx, voucherID)
	if err != nil || lay.N() == 1 {
		return 0, err
	}
	done := 0
	var errs []error
	for from := range lay.N() {
		recs, err := s.Redis().HGetAll(ctx, s.Bucket(lay, from).Transfers).Result()
		if err != nil {
			errs = append(errs, fmt.Errorf("transfers of voucher %d's bucket %d: %w", voucherID, from, err))
			continue
		}
		for id, rec := range recs {
			// receiver:units:donor's generation:receiver's generation:ms
			parts := strings.Split(rec, ":")
			if len(parts) != 5 {
				errs = append(errs, fmt.Errorf("transfer %s of voucher %d: malformed %q", id, voucherID, rec))
				continue
			}
			to, err1 := strconv.Atoi(parts[0])
			units, err2 := strconv.ParseInt(parts[1], 10, 64)
			at, err3 := strconv.ParseInt(parts[4], 10, 64)
			if err1 != nil || err2 != nil || err3 != nil || to < 0 || to >= lay.N() {
				errs = append(errs, fmt.Errorf("transfer %s of voucher %d: malformed %q", id, voucherID, rec))
				continue
			}
			if at >= cutoff.UnixMilli() {
				continue
			}
			switch _, err := s.deposit(ctx, lay, from, to, id, units, parts[3]); {
			case errors.Is(err, errNotNow):
			case err != nil:
				errs = append(errs, err)
			default:
				done++
			}
		}
	}
	return done, errors.Join(errs...)
}

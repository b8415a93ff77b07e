// Package salerepair is the sale's state in Redis as a reconcile repairs
// it from MySQL: frozen, read, rebuilt and unfrozen under the reconcile's
// fencing token, and sized for the order-writer's checks.
package salerepair

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/lua"
)

// Store is the repair's side of the sale's state.
type Store struct {
	*salestate.Store

	// BeforeRebuildScript, when set, is called just before the last step
	// of each bucket's rebuild, and an error stops the rebuild there: a
	// test's seam.
	BeforeRebuildScript func(bucket int) error
}

// New is the repair of base's sales.
func New(base *salestate.Store) *Store { return &Store{Store: base} }

// Freeze makes the gate answer "paused" for voucherID, taking nothing,
// and stock changes wait; a voucher with no sale in Redis stays unknown.
// fence is the reconcile's fencing token (0: none): a token below one the
// voucher has seen is refused with sale.ErrFenced.
func (s *Store) Freeze(ctx context.Context, voucherID, fence int64) error {
	return s.freeze(ctx, voucherID, fence, "1")
}

// Unfreeze lets the gate decide for voucherID again, fenced as Freeze.
func (s *Store) Unfreeze(ctx context.Context, voucherID, fence int64) error {
	return s.freeze(ctx, voucherID, fence, "0")
}

// FreezeSuspect freezes the buckets of voucherID's sale that may have lost
// writes: those built under another replication id than their server's
// (a restart, a failover of their master), or gone. With none such (the
// reconcile has another reason: Redis's stock above MySQL's, a buyer lost)
// it freezes every bucket, as Freeze. Fenced as Freeze.
func (s *Store) FreezeSuspect(ctx context.Context, voucherID, fence int64) error {
	lay, err := s.LayoutToRepair(ctx, voucherID)
	if err != nil {
		return fmt.Errorf("freeze voucher %d: %w", voucherID, err)
	}
	if lay.N() == 1 {
		return s.freezeBuckets(ctx, lay, []int{0}, fence, "1")
	}
	suspect, _, err := s.suspects(ctx, lay)
	if err != nil {
		return fmt.Errorf("freeze voucher %d: %w", voucherID, err)
	}
	if len(suspect) == 0 {
		return s.freezeBuckets(ctx, lay, all(lay), fence, "1")
	}
	return s.freezeBuckets(ctx, lay, suspect, fence, "1")
}

// Stopped reports whether what FreezeSuspect would freeze of voucherID's
// sale sells nothing already: every bucket of it built under another
// replication id than its server's, or gone, which the gate pauses on its
// own. False when FreezeSuspect would freeze a part that sells (no part
// is suspect, or one is for another reason).
func (s *Store) Stopped(ctx context.Context, voucherID int64) (bool, error) {
	lay, err := s.LayoutToRepair(ctx, voucherID)
	if err != nil {
		return false, fmt.Errorf("voucher %d: %w", voucherID, err)
	}
	suspect, stopped, err := s.suspects(ctx, lay)
	if err != nil {
		return false, fmt.Errorf("voucher %d: %w", voucherID, err)
	}
	return len(suspect) > 0 && stopped, nil
}

// suspects are the buckets of lay that may have lost writes: gone, of an
// outdated layout, or built under another replication id than their
// server's. stopped: each of them is gone or of another replication id,
// so sells nothing until it is rebuilt.
func (s *Store) suspects(ctx context.Context, lay salestate.Layout) (suspect []int, stopped bool, err error) {
	stopped = true
	for b := range lay.N() {
		size, err := s.bucketSize(ctx, lay.VoucherID, s.Bucket(lay, b))
		if err != nil {
			return nil, false, err
		}
		paused := !size.Exists || size.Epoch != "" && size.Epoch != size.RedisNow
		if paused || size.Outdated {
			suspect = append(suspect, b)
			stopped = stopped && paused
		}
	}
	return suspect, stopped, nil
}

// SeenFence is the largest fencing token voucherID's sale has seen, in
// its directory or any bucket.
func (s *Store) SeenFence(ctx context.Context, voucherID int64) (int64, error) {
	lay, err := s.LayoutToRepair(ctx, voucherID)
	if err != nil {
		return 0, fmt.Errorf("fence of voucher %d: %w", voucherID, err)
	}
	keys := []string{s.KeysOf(voucherID).Voucher}
	for b := range lay.N() {
		keys = append(keys, s.Bucket(lay, b).Voucher)
	}
	cmds := make([]*redis.StringCmd, len(keys))
	// Each command's own error is read below: Pipelined returns only the
	// first, which may be a field that is not there.
	_, _ = s.Redis().Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.HGet(ctx, k, salestate.FieldFence)
		}
		return nil
	})
	var seen int64
	for i, c := range cmds {
		f, cerr := c.Int64()
		switch {
		case cerr == nil:
			seen = max(seen, f)
		case !errors.Is(cerr, redis.Nil):
			// A part that cannot be read may hold the largest fence.
			return 0, fmt.Errorf("fence of voucher %d: %s: %w", voucherID, keys[i], cerr)
		}
	}
	return seen, nil
}

// freeze freezes or unfreezes every bucket of the sale.
func (s *Store) freeze(ctx context.Context, voucherID, fence int64, on string) error {
	lay, err := s.LayoutToRepair(ctx, voucherID)
	if err != nil {
		return fmt.Errorf("%s voucher %d: %w", freezeVerb[on], voucherID, err)
	}
	if on == "0" && lay.N() > 1 {
		if err := s.wholeGeneration(ctx, lay); err != nil {
			return err
		}
	}
	return s.freezeBuckets(ctx, lay, all(lay), fence, on)
}

// ErrPartlyRebuilt refuses to unfreeze a sale whose buckets are of
// different generations: a rebuild stopped part way, and buckets rebuilt
// beside buckets that are not would add up to another net stock than the
// sale's. Only a reconcile that completes unfreezes it.
var ErrPartlyRebuilt = errors.New("the sale's buckets are part rebuilt: it stays frozen until a reconcile completes")

// wholeGeneration reports ErrPartlyRebuilt when the buckets of lay that
// exist and are not suspect are not all of one generation. A suspect
// bucket (built under another replication id than its server's: a
// failover may have lost its reconcile's write, leaving it a generation
// behind) sells nothing until a reconcile rebuilds it, so it cannot add a
// stale part to what the others sell, and it must not keep them frozen.
func (s *Store) wholeGeneration(ctx context.Context, lay salestate.Layout) error {
	states, err := s.ReadAllBuckets(ctx, lay)
	if err != nil {
		return fmt.Errorf("unfreeze voucher %d: %w", lay.VoucherID, err)
	}
	gen, seen := "", false
	for _, st := range states {
		if !st.Exists || st.Suspect {
			continue
		}
		if seen && st.Gen != gen {
			return fmt.Errorf("unfreeze voucher %d: %w", lay.VoucherID, ErrPartlyRebuilt)
		}
		gen, seen = st.Gen, true
	}
	return nil
}

// all is every bucket of lay.
func all(lay salestate.Layout) []int {
	b := make([]int, lay.N())
	for i := range b {
		b[i] = i
	}
	return b
}

var freezeVerb = map[string]string{"1": "freeze", "0": "unfreeze"}

func (s *Store) freezeBuckets(ctx context.Context, lay salestate.Layout, buckets []int, fence int64, on string) error {
	for _, b := range buckets {
		res, err := lua.FreezeSale.Run(ctx, s.Redis(), s.Bucket(lay, b).List(), fence, on, rebuiltTTL.Milliseconds()).Int()
		if err != nil {
			return fmt.Errorf("%s voucher %d: %w", freezeVerb[on], lay.VoucherID, err)
		}
		if res == -1 {
			return fmt.Errorf("%s voucher %d with fencing token %d: %w", freezeVerb[on], lay.VoucherID, fence, sale.ErrFenced)
		}
	}
	return nil
}

// Pending are voucherID's reservations, of every bucket.
func (s *Store) Pending(ctx context.Context, voucherID int64) ([]order.Event, error) {
	lay, err := s.LayoutToRepair(ctx, voucherID)
	if err != nil {
		return nil, err
	}
	all := map[string]string{}
	for b := range lay.N() {
		in, err := s.Redis().HGetAll(ctx, s.Bucket(lay, b).Pending).Result()
		if err != nil {
			return nil, fmt.Errorf("reservations of voucher %d: %w", voucherID, err)
		}
		maps.Copy(all, in)
	}
	events := make([]order.Event, 0, len(all))
	for id, v := range all {
		oid, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("reservations of voucher %d: order id %q", voucherID, id)
		}
		e, err := salestate.ParseReservation(voucherID, oid, v)
		if err != nil {
			return nil, err
		}
		events = append(events, e)
	}
	return events, nil
}

// rebuildChunk is how many buyers go to Redis per command.
const rebuildChunk = 1000

// rebuiltTTL bounds how long a reconcile's rebuilt buyers wait for its
// last step: past it, a reconcile paused that long finds them gone and
// changes nothing.
const rebuiltTTL = 10 * time.Minute

// Rebuild puts a reconcile's plan in place: the buyers (written aside,
// then moved in), the stock and window, the settled reservations dropped;
// then the voucher is unfrozen and among the active ones again. The last
// step runs once per call, whatever go-redis resends, and is refused with
// sale.ErrFenced when fence is below a token the voucher has seen.
//
// A sale of several buckets is rebuilt bucket by bucket, each with the
// buyers whose home it is (Layout.Home, as the gate), the stock in bucket 0
// and the others empty (the movers spread it); every bucket stays frozen
// until all are rebuilt, and only then are they unfrozen. A rebuild that
// stops part way leaves the sale frozen, to be rebuilt again: buckets
// rebuilt beside buckets that are not would add up to another net stock
// than the sale's, in either direction.
func (s *Store) Rebuild(ctx context.Context, voucherID int64, p sale.Plan, begin, end time.Time, fence int64) error {
	n := max(p.Buckets, 1)
	lay := salestate.LayoutOf(voucherID, n)
	buyers := make([]map[int64]int64, n)
	for b := range buyers {
		buyers[b] = map[int64]int64{}
	}
	for u, o := range p.Buyers {
		buyers[lay.Home(u)][u] = o
	}
	if err := s.Confirm(ctx, p.Settled); err != nil {
		return fmt.Errorf("rebuild voucher %d: %w", voucherID, err)
	}
	if n > 1 {
		// Every bucket of the plan, whatever the caller could freeze: a
		// reconcile that found neither the directory nor bucket 0 froze
		// the voucher's own tag only.
		if err := s.freezeBuckets(ctx, lay, all(lay), fence, "1"); err != nil {
			return fmt.Errorf("rebuild voucher %d: %w", voucherID, err)
		}
	}
	id := rand.Text()
	for b := n - 1; b >= 0; b-- {
		stock := int64(0)
		if b == 0 {
			stock = p.Stock
		}
		if err := s.rebuildBucket(ctx, lay, b, buyers[b], stock, n, begin, end, p.Draw, id, fence); err != nil {
			return err
		}
	}
	if n > 1 {
		if err := s.freezeBuckets(ctx, lay, all(lay), fence, "0"); err != nil {
			return fmt.Errorf("rebuild voucher %d: %w", voucherID, err)
		}
	}
	// The directory may be what Redis lost.
	if err := s.Open(ctx, voucherID, n); err != nil {
		return fmt.Errorf("rebuild voucher %d: %w", voucherID, err)
	}
	return nil
}

func (s *Store) rebuildBucket(ctx context.Context, lay salestate.Layout, b int, buyers map[int64]int64, stock int64, n int,
	begin, end time.Time, draw time.Duration, id string, fence int64) error {
	voucherID := lay.VoucherID
	k := s.Bucket(lay, b)
	rebuilt := s.Prefix() + "seckill:buyers-rebuilt:{" + lay.Tags[b] + "}:" + id
	_, err := s.Redis().Pipelined(ctx, func(pl redis.Pipeliner) error {
		chunk := make([]any, 0, 2*rebuildChunk)
		for u, o := range buyers {
			chunk = append(chunk, u, o)
			if len(chunk) == cap(chunk) {
				pl.HSet(ctx, rebuilt, chunk...)
				chunk = make([]any, 0, 2*rebuildChunk)
			}
		}
		if len(chunk) > 0 {
			pl.HSet(ctx, rebuilt, chunk...)
		}
		pl.PExpire(ctx, rebuilt, rebuiltTTL)
		return nil
	})
	if err != nil {
		return fmt.Errorf("rebuild voucher %d: buyers: %w", voucherID, err)
	}
	none := "0"
	if len(buyers) == 0 {
		none = "1"
	}
	if s.BeforeRebuildScript != nil {
		if err := s.BeforeRebuildScript(b); err != nil {
			return fmt.Errorf("rebuild voucher %d: %w", voucherID, err)
		}
	}
	res, err := lua.ReconcileSale.Run(ctx, s.Redis(), k.List(rebuilt),
		stock, begin.UnixMilli(), end.UnixMilli(), none, id, fence, n, draw.Milliseconds()).Int()
	switch {
	case err != nil:
		return fmt.Errorf("rebuild voucher %d: %w", voucherID, err)
	case res == -1:
		return fmt.Errorf("rebuild voucher %d with fencing token %d: %w", voucherID, fence, sale.ErrFenced)
	case res == -2:
		return fmt.Errorf("rebuild voucher %d: its rebuilt buyers expired before the last step (paused over %v)", voucherID, rebuiltTTL)
	}
	return nil
}

// Inspect reads what the order-writer checks after a batch: whether
// voucherID's sale is in Redis (every bucket of it), its stock (the sum of
// the buckets' net stock: transfer.go says why it counts no transfer twice)
// and which of users are missing from their home bucket's buyers.
func (s *Store) Inspect(ctx context.Context, voucherID int64, users []int64) (exists bool, stock int64, missing []int64, err error) {
	lay, err := s.LayoutOf(ctx, voucherID)
	if err != nil {
		return false, 0, nil, err
	}
	fields := make([][]string, lay.N())
	who := make([][]int64, lay.N())
	for _, u := range users {
		b := lay.Home(u)
		fields[b] = append(fields[b], strconv.FormatInt(u, 10))
		who[b] = append(who[b], u)
	}
	states, err := s.ReadAllBuckets(ctx, lay)
	if err != nil {
		return false, 0, nil, fmt.Errorf("inspect voucher %d: %w", voucherID, err)
	}
	for _, st := range states {
		if !st.Exists {
			return false, 0, nil, nil
		}
		stock += st.Net
	}
	buyers := make([]*redis.SliceCmd, lay.N())
	_, err = s.Redis().Pipelined(ctx, func(p redis.Pipeliner) error {
		for b, f := range fields {
			if len(f) > 0 {
				buyers[b] = p.HMGet(ctx, s.Bucket(lay, b).Buyers, f...)
			}
		}
		return nil
	})
	if err != nil {
		return false, 0, nil, fmt.Errorf("inspect voucher %d: buyers: %w", voucherID, err)
	}
	for b, c := range buyers {
		if c == nil {
			continue
		}
		for i, v := range c.Val() {
			if v == nil {
				missing = append(missing, who[b][i])
			}
		}
	}
	return true, stock, missing, nil
}

// Size is voucherID's sale as the periodic check reads it: whether it is in
// Redis, its stock, how many buyers it records and the replication id it
// was built under. A sale of several buckets adds up their net stock and
// buyers; its epoch is that of the first bucket whose server's id moved.
func (s *Store) Size(ctx context.Context, voucherID int64) (sale.Size, error) {
	lay, err := s.LayoutOf(ctx, voucherID)
	if err != nil {
		return sale.Size{}, err
	}
	var total sale.Size
	for b := range lay.N() {
		one, err := s.bucketSize(ctx, voucherID, s.Bucket(lay, b))
		if err != nil || !one.Exists || one.Outdated {
			return one, err
		}
		if b == 0 || total.Epoch == total.RedisNow {
			total.Epoch, total.RedisNow = one.Epoch, one.RedisNow
		}
		total.Exists = true
		total.FrozenFor = max(total.FrozenFor, one.FrozenFor)
		total.Stock += one.Stock
		total.Buyers += one.Buyers
	}
	return total, nil
}

func (s *Store) bucketSize(ctx context.Context, voucherID int64, k salestate.Keys) (sale.Size, error) {
	v, err := lua.SaleSize.Run(ctx, s.Redis(), k.List()).Slice()
	if salestate.IsOutdatedLayout(err) {
		return sale.Size{Exists: true, Outdated: true}, nil
	}
	if err != nil {
		return sale.Size{}, fmt.Errorf("size of voucher %d: %w", voucherID, err)
	}
	if len(v) != 5 {
		return sale.Size{}, fmt.Errorf("size of voucher %d: unknown answer %v", voucherID, v)
	}
	now, _ := v[3].(string)
	if v[0] == nil {
		return sale.Size{RedisNow: now}, nil
	}
	stock, err := strconv.ParseInt(fmt.Sprint(v[0]), 10, 64)
	if err != nil {
		return sale.Size{}, fmt.Errorf("size of voucher %d: stock %v", voucherID, v[0])
	}
	epoch, _ := v[1].(string)
	buyers, _ := v[2].(int64)
	frozen, _ := v[4].(int64)
	return sale.Size{Exists: true, Stock: stock, Buyers: buyers, Epoch: epoch, RedisNow: now,
		FrozenFor: time.Duration(frozen) * time.Millisecond}, nil
}

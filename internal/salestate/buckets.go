package salestate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
)

// BucketState is one bucket's stock as the movers read it. A bucket that
// could not be read (its master failing over) is not there to give, and
// may hold units.
type BucketState struct {
	Read, Exists, Frozen bool
	// Suspect: built under another replication id than its server's (it
	// may have lost writes): it neither gives nor receives, and its count
	// makes no "sold out".
	Suspect    bool
	Stock, Net int64
	Gen        string // the generation: who built it (FieldReconciled)
	Begin, End int64  // the window, ms
}

// ReadBuckets reads every bucket of lay, each on its own master and all at
// once: one that cannot be read is marked so, and the others are read all
// the same.
func (s *Store) ReadBuckets(ctx context.Context, lay Layout) ([]BucketState, error) {
	states := make([]BucketState, lay.N())
	errs := make([]error, lay.N())
	var wg sync.WaitGroup
	for b := range states {
		wg.Go(func() { states[b], errs[b] = s.readBucket(ctx, lay, b) })
	}
	wg.Wait()
	for _, err := range errs {
		if err == nil {
			return states, nil
		}
	}
	return nil, fmt.Errorf("stock of voucher %d's buckets: %w", lay.VoucherID, errors.Join(errs...))
}

// readBucket reads bucket b of lay (bucket_state.lua).
func (s *Store) readBucket(ctx context.Context, lay Layout, b int) (BucketState, error) {
	v, err := lua.BucketState.Run(ctx, s.rdb, s.Bucket(lay, b).List()).Slice()
	if err != nil {
		return BucketState{}, fmt.Errorf("bucket %d: %w", b, err)
	}
	if len(v) != 8 {
		return BucketState{}, fmt.Errorf("bucket %d: unknown answer %v", b, v)
	}
	num := func(i int) int64 {
		n, _ := v[i].(int64)
		return n
	}
	st := BucketState{Read: true, Frozen: num(3) == 1, Suspect: num(7) == 1, Begin: num(5), End: num(6)}
	st.Gen, _ = v[4].(string)
	if raw, ok := v[0].(string); ok {
		st.Exists = true
		if st.Stock, err = strconv.ParseInt(raw, 10, 64); err != nil {
			return BucketState{}, fmt.Errorf("bucket %d: stock %q", b, raw)
		}
	}
	st.Net = st.Stock + num(1) - num(2)
	return st, nil
}

// ReadAllBuckets is ReadBuckets for a caller that needs every bucket.
func (s *Store) ReadAllBuckets(ctx context.Context, lay Layout) ([]BucketState, error) {
	states, err := s.ReadBuckets(ctx, lay)
	if err != nil {
		return nil, err
	}
	for b, st := range states {
		if !st.Read {
			return nil, fmt.Errorf("stock of voucher %d's bucket %d: it could not be read", lay.VoucherID, b)
		}
	}
	return states, nil
}

// Totals are a sale's counts added up over its buckets, for audits (the
// tests', the bench's) that look at a sale from outside the store.
type Totals struct {
	Buckets                     int
	Stock, Pending, Buyers, Net int64 // Net: stock + units in transit
	Transfers                   int64 // transfers recorded and not yet seen deposited
}

// Totals reads voucherID's sale in every bucket.
func (s *Store) Totals(ctx context.Context, voucherID int64) (Totals, error) {
	lay, err := s.LayoutOf(ctx, voucherID)
	if err != nil {
		return Totals{}, err
	}
	states, err := s.ReadAllBuckets(ctx, lay)
	if err != nil {
		return Totals{}, err
	}
	t := Totals{Buckets: lay.N()}
	lens := make([][3]*redis.IntCmd, lay.N())
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b := range lens {
			k := s.Bucket(lay, b)
			lens[b] = [3]*redis.IntCmd{p.HLen(ctx, k.Pending), p.HLen(ctx, k.Buyers), p.HLen(ctx, k.Transfers)}
		}
		return nil
	})
	if err != nil {
		return Totals{}, fmt.Errorf("totals of voucher %d: %w", voucherID, err)
	}
	for b, st := range states {
		t.Stock += st.Stock
		t.Net += st.Net
		t.Pending += lens[b][0].Val()
		t.Buyers += lens[b][1].Val()
		t.Transfers += lens[b][2].Val()
	}
	return t, nil
}

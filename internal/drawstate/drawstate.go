// Package drawstate is a draw's side of the sale's state in Redis: its
// entries, where it stands, and its steps under the drawer's fencing
// token (lua/draw.lua), the winners served through the gate script.
package drawstate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/lua"
)

// Store is the draw's side of the sale's state.
type Store struct{ *salestate.Store }

// New is the draws of base's sales.
func New(base *salestate.Store) *Store { return &Store{base} }

var _ order.EntryFinder = (*Store)(nil)

// A draw's sale is in one bucket (voucher.Validate): its keys are the
// voucher's own.

// DrawState reads where voucherID's draw stands: DrawStates of one.
func (s *Store) DrawState(ctx context.Context, voucherID int64) (sale.DrawState, error) {
	st, err := s.DrawStates(ctx, []int64{voucherID})
	if err != nil {
		return sale.DrawState{}, err
	}
	return st[0], nil
}

// DrawStates reads where each voucher's draw stands, in one pipeline, with
// a clock of Redis's: on a cluster another master's (TIME has no key),
// close enough to say when to try; BeginDraw checks the window by the
// sale's own master. A voucher whose state cannot be read (its master
// away) reads as no draw, and is named in the error; the others are read
// all the same.
func (s *Store) DrawStates(ctx context.Context, voucherIDs []int64) ([]sale.DrawState, error) {
	fields := make([]*redis.SliceCmd, len(voucherIDs))
	var now *redis.TimeCmd
	_, _ = s.Redis().Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range voucherIDs {
			fields[i] = p.HMGet(ctx, s.KeysOf(id).Voucher, salestate.FieldBegin, salestate.FieldDraw, salestate.FieldDrawn)
		}
		now = p.Time(ctx)
		return nil
	})
	if err := now.Err(); err != nil {
		return nil, fmt.Errorf("draw states: redis time: %w", err)
	}
	out := make([]sale.DrawState, len(voucherIDs))
	var errs []error
	for i, f := range fields {
		if err := f.Err(); err != nil {
			errs = append(errs, fmt.Errorf("draw state of voucher %d: %w", voucherIDs[i], err))
			continue
		}
		out[i] = drawStateOf(f.Val())
		out[i].Now = now.Val()
	}
	return out, errors.Join(errs...)
}

// drawStateOf is a draw's state from its voucher fields begin, draw and
// drawn, as HMGET answers them.
func drawStateOf(v []any) sale.DrawState {
	var st sale.DrawState
	begin, ok1 := msField(v[0])
	window, ok2 := msField(v[1])
	if !ok1 || !ok2 {
		return st
	}
	st.Draw, st.At = true, time.UnixMilli(begin+window)
	if drawn, ok := msField(v[2]); ok {
		st.Drawn = time.UnixMilli(drawn)
	}
	return st
}

func msField(v any) (int64, bool) {
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// Entrants are voucherID's draw entries, in no order, read in steps so
// that a crowd's entries do not hold Redis in one reply.
func (s *Store) Entrants(ctx context.Context, voucherID int64) ([]sale.Entrant, error) {
	var out []sale.Entrant
	iter := s.Redis().HScan(ctx, s.KeysOf(voucherID).Entrants, 0, "", 1000).Iterator()
	for iter.Next(ctx) {
		user := iter.Val()
		if !iter.Next(ctx) {
			break
		}
		u, err1 := strconv.ParseInt(user, 10, 64)
		o, err2 := strconv.ParseInt(iter.Val(), 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("entrants of voucher %d: malformed entry %q -> %q", voucherID, user, iter.Val())
		}
		out = append(out, sale.Entrant{UserID: u, OrderID: o})
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("entrants of voucher %d: %w", voucherID, err)
	}
	return dedupe(out), nil
}

// dedupe drops the entries HSCAN returned twice (it may, across a rehash).
func dedupe(es []sale.Entrant) []sale.Entrant {
	seen := make(map[int64]bool, len(es))
	out := es[:0]
	for _, e := range es {
		if !seen[e.UserID] {
			seen[e.UserID] = true
			out = append(out, e)
		}
	}
	return out
}

// BeginDraw makes fence the draw's token and keeps its seed beside the
// sale, once the window has ended by the sale's own master's clock. made
// reports a draw already made (nothing to do). *sale.DrawFencedError: a
// larger token was seen; sale.ErrDrawNotDue: the window has not ended.
func (s *Store) BeginDraw(ctx context.Context, voucherID, fence int64, seed string) (made bool, err error) {
	return s.drawStep(ctx, voucherID, "begin", fence, seed)
}

// EndDraw records the draw as made, under the draw's token: the sale is
// first-come from then on.
func (s *Store) EndDraw(ctx context.Context, voucherID, fence int64) error {
	_, err := s.drawStep(ctx, voucherID, "done", fence, "")
	return err
}

func (s *Store) drawStep(ctx context.Context, voucherID int64, step string, fence int64, seed string) (made bool, err error) {
	res, err := lua.Draw.Run(ctx, s.Redis(), s.KeysOf(voucherID).List(), step, fence, seed).Int64Slice()
	if err != nil {
		return false, fmt.Errorf("draw of voucher %d, %s: %w", voucherID, step, err)
	}
	if len(res) != 2 {
		return false, fmt.Errorf("draw of voucher %d, %s: unknown answer %v", voucherID, step, res)
	}
	switch res[0] {
	case 1:
		return false, nil
	case 2:
		return true, nil
	case -2:
		return false, fmt.Errorf("draw of voucher %d, %s under token %d: %w", voucherID, step, fence, &sale.DrawFencedError{Seen: res[1]})
	case -3:
		return false, fmt.Errorf("draw of voucher %d: %w (it ends at %v)", voucherID, sale.ErrDrawNotDue, time.UnixMilli(res[1]).UTC())
	}
	return false, fmt.Errorf("draw of voucher %d, %s: %w", voucherID, step, sale.ErrNotWarmed)
}

// Admit runs the gate for entrants in the order given, under the draw's
// token: each is decided as an attempt of its own arriving in that order,
// and an accepted one leaves its reservation as any order does. A token
// that is not the draw's, or an entrant who did not enter with that order
// id, is answered order.ErrDrawing.
func (s *Store) Admit(ctx context.Context, voucherID, fence int64, entrants []sale.Entrant) ([]order.Decision, error) {
	keys := s.KeysOf(voucherID)
	out := make([]order.Decision, 0, len(entrants))
	for start := 0; start < len(entrants); start += salestate.MaxBatch {
		batch := entrants[start:min(len(entrants), start+salestate.MaxBatch)]
		args := make([]any, 0, 1+3*len(batch))
		args = append(args, "1:"+strconv.FormatInt(fence, 10))
		for _, e := range batch {
			args = append(args, e.UserID, e.OrderID, "")
		}
		res, err := lua.Seckill.Run(ctx, s.Redis(), keys.List(keys.Entrants), args...).Int64Slice()
		if err != nil {
			return out, fmt.Errorf("admit the draw's entrants of voucher %d: %w", voucherID, err)
		}
		if len(res) != 4*len(batch) {
			return out, fmt.Errorf("admit the draw's entrants of voucher %d: %d numbers for %d", voucherID, len(res), len(batch))
		}
		for i := range batch {
			r := res[4*i : 4*i+4]
			if o := salestate.Outcome(r[0]); !o.Known() || o == salestate.OtherLayout {
				return out, fmt.Errorf("admit the draw's entrants of voucher %d: unknown answer %v", voucherID, r)
			}
			out = append(out, order.Decision{Err: salestate.Outcome(r[0]).Err(), StockLeft: r[1], AcceptedAt: time.UnixMilli(r[2]), OrderID: r[3]})
		}
	}
	return out, nil
}

// FindEntry is userID's entry in voucherID's draw, and where the draw
// stands, in one round trip (buyers poll it): found is false for a buyer
// who did not enter.
func (s *Store) FindEntry(ctx context.Context, voucherID, userID int64) (order.DrawEntry, bool, error) {
	keys := s.KeysOf(voucherID)
	var entry *redis.StringCmd
	var fields *redis.SliceCmd
	_, err := s.Redis().Pipelined(ctx, func(p redis.Pipeliner) error {
		entry = p.HGet(ctx, keys.Entrants, strconv.FormatInt(userID, 10))
		fields = p.HMGet(ctx, keys.Voucher, salestate.FieldBegin, salestate.FieldDraw, salestate.FieldDrawn)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return order.DrawEntry{}, false, fmt.Errorf("entry of user %d in voucher %d's draw: %w", userID, voucherID, err)
	}
	id, err := entry.Int64()
	if errors.Is(err, redis.Nil) {
		return order.DrawEntry{}, false, nil
	}
	if err != nil {
		return order.DrawEntry{}, false, fmt.Errorf("entry of user %d in voucher %d's draw: %w", userID, voucherID, err)
	}
	st := drawStateOf(fields.Val())
	return order.DrawEntry{OrderID: id, DrawAt: st.At, Drawn: st.Drawn}, true, nil
}

// RestoreEntrants puts back the entries of es missing from voucherID's
// entrants: the state a failover lost, or a sale rebuilt from MySQL.
// After its window no entry is made, so a hash as long as es holds them
// all and is left as it is.
func (s *Store) RestoreEntrants(ctx context.Context, voucherID int64, es []sale.Entrant) error {
	key := s.KeysOf(voucherID).Entrants
	n, err := s.Redis().HLen(ctx, key).Result()
	if err != nil {
		return fmt.Errorf("entrants of voucher %d: %w", voucherID, err)
	}
	if n >= int64(len(es)) {
		return nil
	}
	const chunk = 1000
	for start := 0; start < len(es); start += chunk {
		_, err := s.Redis().Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, e := range es[start:min(len(es), start+chunk)] {
				p.HSetNX(ctx, key, strconv.FormatInt(e.UserID, 10), e.OrderID)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("restore the entrants of voucher %d: %w", voucherID, err)
		}
	}
	return nil
}

// Package salerecords answers order lookups while a sale runs from its
// state in Redis, and keeps there what the order-writer settled.
package salerecords

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/lua"
)

// Store is the records' side of the sale's state.
type Store struct{ *salestate.Store }

// New is the records of base's sales.
func New(base *salestate.Store) *Store { return &Store{base} }

var (
	_ order.SaleRecords     = (*Store)(nil)
	_ order.SettledRecorder = (*Store)(nil)
)

// Order lookups while a sale runs are answered from its state in Redis: a
// buyer's order from the buyer hash, a pending one from its reservation, a
// settled one from what the order-writer recorded in the sale's Settled
// hash. A crowd polling "did I get it?" then costs Redis reads only.

// A settled status in the Settled hash: "c:<user>:<ms>" confirmed,
// "f:<user>:<ms>:<reason>" failed.
func encodeStatus(s order.Status) string {
	kind := "c"
	if s.Status == order.StatusFailed {
		kind = "f"
	}
	v := kind + ":" + strconv.FormatInt(s.UserID, 10) + ":" + strconv.FormatInt(s.CreateTime.UnixMilli(), 10)
	if s.Status == order.StatusFailed {
		v += ":" + s.Reason
	}
	return v
}

func decodeStatus(orderID, voucherID int64, v string) (order.Status, error) {
	parts := strings.SplitN(v, ":", 4)
	if len(parts) < 3 {
		return order.Status{}, fmt.Errorf("settled order %d of voucher %d: malformed %q", orderID, voucherID, v)
	}
	user, err1 := strconv.ParseInt(parts[1], 10, 64)
	ms, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return order.Status{}, fmt.Errorf("settled order %d of voucher %d: malformed %q", orderID, voucherID, v)
	}
	s := order.Status{ID: orderID, UserID: user, VoucherID: voucherID, CreateTime: time.UnixMilli(ms).UTC()}
	switch {
	case parts[0] == "c" && len(parts) == 3:
		s.Status = order.StatusConfirmed
	case parts[0] == "f" && len(parts) == 4:
		s.Status, s.Reason = order.StatusFailed, parts[3]
	default:
		return order.Status{}, fmt.Errorf("settled order %d of voucher %d: malformed %q", orderID, voucherID, v)
	}
	return s, nil
}

func orderField(orderID int64) string { return "o:" + strconv.FormatInt(orderID, 10) }
func userField(userID int64) string   { return "u:" + strconv.FormatInt(userID, 10) }

// RecordSettled records the final status of settled orders in their sales'
// state, one script per voucher (a batch's orders are of a few vouchers:
// the events are keyed by voucher). A sale no longer in Redis records
// nothing: its lookups read MySQL.
//
// An order is recorded in its buyer's home bucket, where the buyer's
// lookups read it.
func (s *Store) RecordSettled(ctx context.Context, statuses []order.Status) error {
	type bucket struct {
		voucher int64
		keys    salestate.Keys
	}
	fields := map[bucket][]any{}
	for _, st := range statuses {
		lay, err := s.LayoutOf(ctx, st.VoucherID)
		if err != nil {
			return err
		}
		b := bucket{st.VoucherID, s.Bucket(lay, lay.Home(st.UserID))}
		fields[b] = append(fields[b], orderField(st.ID), encodeStatus(st))
		if st.Status == order.StatusFailed {
			fields[b] = append(fields[b], userField(st.UserID), st.ID)
		}
	}
	for b, f := range fields {
		if err := lua.RecordSettled.Run(ctx, s.Redis(), b.keys.List(), f...).Err(); err != nil {
			return fmt.Errorf("record %d settled orders of voucher %d: %w", len(f)/2, b.voucher, err)
		}
	}
	return nil
}

// FindInSales is order orderID as an active sale records it: pending (its
// reservation) or settled (the writer's record). The reservation is read
// before the record, in one pipeline: the writer records an order before it
// removes the reservation, so an order on its way is in one of them.
func (s *Store) FindInSales(ctx context.Context, orderID int64) (order.Status, bool, error) {
	ids, err := s.Active(ctx)
	if err != nil {
		return order.Status{}, false, err
	}
	if len(ids) == 0 {
		return order.Status{}, false, nil
	}
	id := strconv.FormatInt(orderID, 10)
	type reads struct {
		voucher          int64
		pending, settled *redis.StringCmd
	}
	var keys []salestate.Keys
	var vouchers []int64
	for _, v := range ids {
		lay, err := s.LayoutOf(ctx, v)
		if err != nil {
			return order.Status{}, false, err
		}
		for b := range lay.N() {
			keys = append(keys, s.Bucket(lay, b))
			vouchers = append(vouchers, v)
		}
	}
	rs := make([]reads, len(keys))
	_, err = s.Redis().Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			rs[i].voucher = vouchers[i]
			rs[i].pending = p.HGet(ctx, k.Pending, id)
			rs[i].settled = p.HGet(ctx, k.Settled, orderField(orderID))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return order.Status{}, false, fmt.Errorf("find order %d in the sales: %w", orderID, err)
	}
	for _, r := range rs {
		if v, err := r.pending.Result(); err == nil {
			e, err := salestate.ParseReservation(r.voucher, orderID, v)
			if err != nil {
				return order.Status{}, false, err
			}
			return order.Status{ID: orderID, UserID: e.UserID, VoucherID: e.VoucherID, Status: order.StatusPending,
				CreateTime: time.UnixMilli(e.AcceptedAt).UTC()}, true, nil
		}
		if v, err := r.settled.Result(); err == nil {
			st, err := decodeStatus(orderID, r.voucher, v)
			return st, err == nil, err
		}
	}
	return order.Status{}, false, nil
}

// FindBuyerOrder is the order voucherID's sale records for userID: the one
// the gate took for the user, else the user's latest failed one. live
// reports whether the sale's state is in Redis at all: while it is, a user
// it records nothing of has no order for the voucher. Only the user's home
// bucket is read.
func (s *Store) FindBuyerOrder(ctx context.Context, voucherID, userID int64) (orderID int64, found, live bool, err error) {
	lay, err := s.LayoutOf(ctx, voucherID)
	if err != nil {
		return 0, false, false, err
	}
	k := s.Bucket(lay, lay.Home(userID))
	var bought, failed *redis.StringCmd
	var exists *redis.IntCmd
	_, err = s.Redis().Pipelined(ctx, func(p redis.Pipeliner) error {
		bought = p.HGet(ctx, k.Buyers, strconv.FormatInt(userID, 10))
		failed = p.HGet(ctx, k.Settled, userField(userID))
		exists = p.Exists(ctx, k.Voucher)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, false, false, fmt.Errorf("buyer %d of voucher %d: %w", userID, voucherID, err)
	}
	live = exists.Val() == 1
	for _, c := range []*redis.StringCmd{bought, failed} {
		if id, err := c.Int64(); err == nil {
			return id, true, live, nil
		}
	}
	return 0, false, live, nil
}

// Window is voucherID's sale window and the clock of the Redis server
// that holds it, read together: the gate decides by that clock, and so
// must whoever decides "open" ahead of it. order.ErrUnknownVoucher when
// there is no sale.
func (s *Store) Window(ctx context.Context, voucherID int64) (begin, end, now time.Time, err error) {
	lay, err := s.LayoutOf(ctx, voucherID)
	if err != nil {
		return time.Time{}, time.Time{}, time.Time{}, err
	}
	v, err := lua.SaleWindow.Run(ctx, s.Redis(), []string{s.Bucket(lay, 0).Voucher}).Slice()
	if err != nil || len(v) != 3 {
		return time.Time{}, time.Time{}, time.Time{}, fmt.Errorf("window of voucher %d: %v %w", voucherID, v, err)
	}
	if v[0] == nil || v[1] == nil {
		return time.Time{}, time.Time{}, time.Time{}, order.ErrUnknownVoucher
	}
	b, errB := strconv.ParseInt(fmt.Sprint(v[0]), 10, 64)
	e, errE := strconv.ParseInt(fmt.Sprint(v[1]), 10, 64)
	n, ok := v[2].(int64)
	if errB != nil || errE != nil || !ok {
		return time.Time{}, time.Time{}, time.Time{}, fmt.Errorf("window of voucher %d: %q to %q at %v", voucherID, v[0], v[1], v[2])
	}
	return time.UnixMilli(b), time.UnixMilli(e), time.UnixMilli(n), nil
}

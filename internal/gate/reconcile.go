package gate

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/lua"
)

var _ reconcile.Sale = (*Store)(nil)

// beforeRebuildScript is a test's seam: what happens to Redis just before
// a rebuild's last step.
var beforeRebuildScript = func() {}

// Freeze makes the gate answer "paused" for voucherID, taking nothing,
// and stock changes wait; a voucher with no sale in Redis stays unknown.
// fence is the reconcile's fencing token (0: none): a token below one the
// voucher has seen is refused with reconcile.ErrFenced.
func (s *Store) Freeze(ctx context.Context, voucherID, fence int64) error {
	return s.freeze(ctx, voucherID, fence, "1")
}

// Unfreeze lets the gate decide for voucherID again, fenced as Freeze.
func (s *Store) Unfreeze(ctx context.Context, voucherID, fence int64) error {
	return s.freeze(ctx, voucherID, fence, "0")
}

func (s *Store) freeze(ctx context.Context, voucherID, fence int64, on string) error {
	what := map[string]string{"1": "freeze", "0": "unfreeze"}[on]
	res, err := lua.FreezeSale.Run(ctx, s.rdb, s.KeysOf(voucherID).list(), fence, on).Int()
	if err != nil {
		return fmt.Errorf("%s voucher %d: %w", what, voucherID, err)
	}
	if res == -1 {
		return fmt.Errorf("%s voucher %d with fencing token %d: %w", what, voucherID, fence, reconcile.ErrFenced)
	}
	return nil
}

// Pending are voucherID's reservations.
func (s *Store) Pending(ctx context.Context, voucherID int64) ([]order.Event, error) {
	all, err := s.rdb.HGetAll(ctx, s.KeysOf(voucherID).Pending).Result()
	if err != nil {
		return nil, fmt.Errorf("reservations of voucher %d: %w", voucherID, err)
	}
	events := make([]order.Event, 0, len(all))
	for id, v := range all {
		oid, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("reservations of voucher %d: order id %q", voucherID, id)
		}
		e, err := parseReservation(voucherID, oid, v)
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
// reconcile.ErrFenced when fence is below a token the voucher has seen.
func (s *Store) Rebuild(ctx context.Context, voucherID int64, p reconcile.Plan, begin, end time.Time, fence int64) error {
	k := s.KeysOf(voucherID)
	id := rand.Text()
	rebuilt := s.prefix + "seckill:buyers-rebuilt:{" + strconv.FormatInt(voucherID, 10) + "}:" + id
	_, err := s.rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
		chunk := make([]any, 0, 2*rebuildChunk)
		for u, o := range p.Buyers {
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
	if err := s.Confirm(ctx, p.Settled); err != nil {
		return fmt.Errorf("rebuild voucher %d: %w", voucherID, err)
	}
	none := "0"
	if len(p.Buyers) == 0 {
		none = "1"
	}
	beforeRebuildScript()
	res, err := lua.ReconcileSale.Run(ctx, s.rdb, k.list(rebuilt),
		p.Stock, begin.UnixMilli(), end.UnixMilli(), none, id, fence).Int()
	switch {
	case err != nil:
		return fmt.Errorf("rebuild voucher %d: %w", voucherID, err)
	case res == -1:
		return fmt.Errorf("rebuild voucher %d with fencing token %d: %w", voucherID, fence, reconcile.ErrFenced)
	case res == -2:
		return fmt.Errorf("rebuild voucher %d: its rebuilt buyers expired before the last step (paused over %v)", voucherID, rebuiltTTL)
	}
	if err := s.rdb.SAdd(ctx, s.ActiveVouchers(), voucherID).Err(); err != nil {
		return fmt.Errorf("rebuild voucher %d: among the active vouchers: %w", voucherID, err)
	}
	return nil
}

// Inspect reads what the order-writer checks after a batch, in one round
// trip: whether voucherID's sale is in Redis, its stock, and which of
// users are missing from its buyers.
func (s *Store) Inspect(ctx context.Context, voucherID int64, users []int64) (exists bool, stock int64, missing []int64, err error) {
	k := s.KeysOf(voucherID)
	fields := make([]string, len(users))
	for i, u := range users {
		fields[i] = strconv.FormatInt(u, 10)
	}
	var stockCmd *redis.StringCmd
	var buyers *redis.SliceCmd
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		stockCmd = p.HGet(ctx, k.Voucher, FieldStock)
		if len(fields) > 0 {
			buyers = p.HMGet(ctx, k.Buyers, fields...)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, 0, nil, fmt.Errorf("inspect voucher %d: %w", voucherID, err)
	}
	stock, err = stockCmd.Int64()
	if errors.Is(err, redis.Nil) {
		return false, 0, nil, nil
	}
	if err != nil {
		return false, 0, nil, fmt.Errorf("inspect voucher %d: stock: %w", voucherID, err)
	}
	if buyers != nil {
		for i, v := range buyers.Val() {
			if v == nil {
				missing = append(missing, users[i])
			}
		}
	}
	return true, stock, missing, nil
}

// Size is voucherID's sale as the periodic check reads it: whether it is in
// Redis, its stock, how many buyers it records and the replication id it
// was built under.
func (s *Store) Size(ctx context.Context, voucherID int64) (reconcile.SaleSize, error) {
	k := s.KeysOf(voucherID)
	v, err := lua.SaleSize.Run(ctx, s.rdb, k.list()).Slice()
	if isOutdatedLayout(err) {
		return reconcile.SaleSize{Exists: true, Outdated: true}, nil
	}
	if err != nil {
		return reconcile.SaleSize{}, fmt.Errorf("size of voucher %d: %w", voucherID, err)
	}
	if len(v) != 4 {
		return reconcile.SaleSize{}, fmt.Errorf("size of voucher %d: unknown answer %v", voucherID, v)
	}
	now, _ := v[3].(string)
	if v[0] == nil {
		return reconcile.SaleSize{RedisNow: now}, nil
	}
	stock, err := strconv.ParseInt(fmt.Sprint(v[0]), 10, 64)
	if err != nil {
		return reconcile.SaleSize{}, fmt.Errorf("size of voucher %d: stock %v", voucherID, v[0])
	}
	epoch, _ := v[1].(string)
	buyers, _ := v[2].(int64)
	return reconcile.SaleSize{Exists: true, Stock: stock, Buyers: buyers, Epoch: epoch, RedisNow: now}, nil
}

// Package gate is the buyer's path through the sale's state in Redis: the
// gate script that decides every attempt, in batches per bucket; the
// stock moved between buckets; a sale put in place and its stock or
// window changed, atomically with the gate.
package gate

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/redisconn"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/telemetry"
	"github.com/seckill/seckill/lua"
)

// Store is the buyer's side of the sale's state.
type Store struct {
	*salestate.Store
	gate  redis.Scripter
	tries tries

	// AfterAdjustStep, when set, is called after each bucket's step of a
	// change of a sale in several: a test's seam.
	AfterAdjustStep func(bucket int)
	// AfterTake, when set, is called between the two steps of each
	// transfer, and an error stops the mover there: a test's seam.
	AfterTake func() error
}

// New is the gate of base's sales.
func New(base *salestate.Store) *Store { return &Store{Store: base, gate: base.Redis()} }

// WithAutoPipeline sends the gate's decisions through ap (the client's
// autopipeliner): concurrent attempts share one write and one read instead
// of a round trip each, the cost that bounds both the API and Redis under
// a crowd.
func (s *Store) WithAutoPipeline(ap *redisconn.Pipeliner) *Store {
	s.gate = ap
	return s
}

var _ order.Gate = (*Store)(nil)

// Try runs the gate: one unit of voucherID for userID under orderID. The
// same attempt again (same order id) gets the same decision: a retry after
// a timeout cannot take a second unit or refuse the buyer's own order.
//
// The attempt rides in a batch with the concurrent attempts on its bucket
// (tries.go). One that was never sent, the call ahead of it having failed
// without a reply, fails with ErrNotSent.
//
// The decision is a span with the answer, naming its command. The batch's
// EVALSHA is redisotel's span inside the span of the attempt that led it
// (sent alone; auto-pipelined, the command rides in a pipeline shared by
// many requests, whose span belongs to none of them); every other
// attempt's span has no such child, and covers its wait for the call
// ahead and its own. The reservation keeps the span's traceparent when it
// is sampled.
func (s *Store) Try(ctx context.Context, voucherID, userID, orderID int64) (d order.Decision, err error) {
	ctx, span := tracer.Start(ctx, "seckill gate")
	// Built only for a span that records: the gate is every buyer's call,
	// and tracing is off or unsampled for almost all of them.
	if span.IsRecording() {
		span.SetAttributes(attribute.String("db.operation.name", "EVALSHA"), attribute.String("db.stored_procedure.name", "seckill.lua"),
			attribute.Bool("seckill.autopipelined", s.gate != s.Redis()),
			attribute.Int64("seckill.voucher_id", voucherID), attribute.Int64("seckill.order_id", orderID))
	}
	defer func() { endGateSpan(span, d, err) }()
	lay, known := s.Remembered(voucherID)
	if !known {
		lay = salestate.LayoutOf(voucherID, 1)
	}
	moves := 0
	for turns := 0; ; turns++ {
		n := lay.N()
		home := lay.Home(userID)
		keys := s.Bucket(lay, home)
		res, err := s.tries.try(ctx, s.gate, keys.List(keys.Entrants), n,
			strconv.FormatInt(userID, 10), strconv.FormatInt(orderID, 10), telemetry.TraceParent(ctx))
		unknown := err == nil && len(res) == 4 && salestate.Outcome(res[0]) == salestate.UnknownVoucher
		if unknown && n > 1 && turns == 0 && !s.ReadWithin(voucherID, time.Second) {
			// The bucket is gone: the sale may have been made anew with
			// another N. The directory says; asked at most once a second,
			// since a bucket lost with its master answers so to every
			// attempt of its buyers until the reconcile.
			s.Forget(voucherID)
			fresh, lerr := s.LayoutOf(ctx, voucherID)
			if lerr == nil && fresh.N() != n {
				lay = fresh
				continue
			}
		}
		if unknown && n == 1 && !known && turns == 0 {
			// No directory and no sale in one bucket: the directory may be
			// the part a failover lost.
			if found, ok := s.DirectoryLost(ctx, voucherID); ok {
				lay, known = found, true
				continue
			}
		}
		if salestate.IsOutdatedLayout(err) {
			// A sale written by an earlier release: the order-writer's check
			// finds it and reconciles it into today's layout.
			return order.Decision{Err: order.ErrPaused}, nil
		}
		if err != nil {
			return order.Decision{}, fmt.Errorf("seckill gate: %w", err)
		}
		if len(res) != 4 || !salestate.Outcome(res[0]).Known() {
			return order.Decision{}, fmt.Errorf("seckill gate: unknown answer %v", res)
		}
		out := salestate.Outcome(res[0])
		if out == salestate.OtherLayout {
			if turns > 0 || res[1] < 1 || res[1] > sale.MaxBuckets {
				return order.Decision{}, fmt.Errorf("seckill gate: voucher %d has %d buckets, and its bucket said %d", voucherID, n, res[1])
			}
			lay = s.Remember(voucherID, int(res[1]))
			continue
		}
		if !known && out != salestate.UnknownVoucher {
			s.Remember(voucherID, n)
			known = true
		}
		d := order.Decision{Err: out.Err(), StockLeft: res[1], AcceptedAt: time.UnixMilli(res[2]), OrderID: res[3], Share: n > 1}
		if n == 1 || !errors.Is(d.Err, order.ErrSoldOut) {
			return d, nil
		}
		// The user's bucket is dry: the sale is sold out only if every
		// bucket is; else units are moved here and the gate asked again.
		if moves == maxMoves {
			return order.Decision{Err: order.ErrMovingStock, AcceptedAt: d.AcceptedAt}, nil
		}
		moves++
		got, err := s.refill(ctx, lay, home)
		switch {
		case err != nil:
			return order.Decision{}, fmt.Errorf("seckill gate: %w", err)
		case got == refillSoldOut:
			return d, nil
		case got == refillPaused:
			return order.Decision{Err: order.ErrPaused, AcceptedAt: d.AcceptedAt}, nil
		case got == refillMoving:
			return order.Decision{Err: order.ErrMovingStock, AcceptedAt: d.AcceptedAt}, nil
		}
	}
}

// maxMoves bounds the units moved for one attempt: a crowd on a sale's last
// units moves them from bucket to bucket, and each attempt need not chase
// them for ever.
const maxMoves = 2

var tracer = otel.Tracer("github.com/seckill/seckill/internal/gate")

// endGateSpan records the gate's answer on its span: a refusal is the
// sale's outcome, not the span's failure; an error is.
func endGateSpan(span trace.Span, d order.Decision, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	switch {
	case err != nil:
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	case d.Err != nil:
		span.SetAttributes(attribute.String("seckill.outcome", d.Err.Error()))
	default:
		span.SetAttributes(attribute.String("seckill.outcome", "accepted"), attribute.Int64("seckill.stock_left", d.StockLeft))
	}
	span.End()
}

// Warm puts a new voucher's sale into Redis in one bucket: WarmBuckets.
func (s *Store) Warm(ctx context.Context, voucherID int64, stock int64, begin, end time.Time) error {
	return s.WarmBuckets(ctx, voucherID, stock, 1, begin, end)
}

// WarmBuckets puts a new voucher's sale into Redis, its stock dealt over n
// buckets: in each, its share and the window, and no buyers (an empty hash)
// and no reservations (keys left by an earlier database with the same
// voucher id would otherwise leak into the new sale), stamped with the
// replication id of the server that holds it; with n > 1, the directory
// under the voucher's own tag last, so that the gate finds the buckets in
// place; then lists the voucher among the active ones (another slot on a
// cluster: a further step, which a retry of Warm repeats harmlessly).
func (s *Store) WarmBuckets(ctx context.Context, voucherID, stock int64, n int, begin, end time.Time) error {
	return s.warm(ctx, voucherID, stock, n, begin, end, "", 0)
}

// WarmDraw puts a new voucher's sale with a draw into Redis, in one
// bucket: its first window of the sale takes entries, drawn at the
// window's end (internal/draw). onlyNew leaves a sale already there as it
// is, as WarmNew does.
func (s *Store) WarmDraw(ctx context.Context, voucherID, stock int64, begin, end time.Time, window time.Duration, onlyNew bool) error {
	if window <= 0 {
		return fmt.Errorf("warm voucher %d: a draw's window of %v", voucherID, window)
	}
	mode := ""
	if onlyNew {
		mode = "new"
	}
	return s.warm(ctx, voucherID, stock, 1, begin, end, mode, window)
}

// WarmNew is WarmBuckets that leaves every bucket already there as it is:
// a retried creation finds its sale possibly selling (the first attempt
// warmed it) and must not put its stock back or forget its buyers.
func (s *Store) WarmNew(ctx context.Context, voucherID, stock int64, n int, begin, end time.Time) error {
	return s.warm(ctx, voucherID, stock, n, begin, end, "new", 0)
}

func (s *Store) warm(ctx context.Context, voucherID, stock int64, n int, begin, end time.Time, mode string, draw time.Duration) error {
	if n < 1 || n > sale.MaxBuckets {
		return fmt.Errorf("warm voucher %d: %d buckets, want 1 to %d", voucherID, n, sale.MaxBuckets)
	}
	lay := salestate.LayoutOf(voucherID, n)
	for b := range n {
		share := stock / int64(n)
		if int64(b) < stock%int64(n) {
			share++
		}
		keys := s.Bucket(lay, b)
		err := lua.WarmSale.Run(ctx, s.Redis(), keys.List(keys.Entrants),
			share, begin.UnixMilli(), end.UnixMilli(), n, mode, draw.Milliseconds()).Err()
		if err != nil {
			return fmt.Errorf("warm voucher %d in Redis: bucket %d: %w", voucherID, b, err)
		}
	}
	if err := s.Open(ctx, voucherID, n); err != nil {
		return fmt.Errorf("warm voucher %d: %w", voucherID, err)
	}
	return nil
}

// changeMemory is how long a stock change's id is remembered: far longer
// than any retry of the change.
const changeMemory = 24 * time.Hour

// Adjust changes a warmed voucher's stock by delta and, when not zero, its
// window, atomically with the gate. It returns the stock after. The change
// carries an id of its own, so that a retry cannot apply it twice.
//
// A sale of several buckets is changed bucket by bucket, each atomically:
// units added go to bucket 0 whole, and the movers spread them as buyers
// ask; units removed come from the buckets that have them, the largest
// first; a new window goes to every bucket. A bucket frozen or gone
// refuses the change before any step (ErrFrozen, ErrNotWarmed: nothing
// changed). A step that fails all the same (the bucket frozen meanwhile)
// undoes the steps before it, stock and window; if an undo fails too, the
// buckets are part changed and the error is neither of those: the caller
// must not take the change for refused. A step whose reply is lost is
// sent again under its id until its outcome is known; if Redis does not
// answer, the steps before it are undone and the error is no refusal
// either (that bucket may hold the change).
func (s *Store) Adjust(ctx context.Context, voucherID, delta int64, begin, end time.Time) (int64, error) {
	lay, err := s.LayoutOf(ctx, voucherID)
	if err != nil {
		return 0, err
	}
	id := rand.Text()
	windowChange := !begin.IsZero() || !end.IsZero()
	if lay.N() == 1 {
		after, err := s.adjustBucketSure(ctx, lay, 0, delta, begin, end, id)
		if err != nil && !refused(err) {
			return after, fmt.Errorf("adjust voucher %d: %w: %w", voucherID, sale.ErrChangeUnknown, err)
		}
		return after, err
	}
	if delta >= 0 && !windowChange {
		// Units added, the window kept: bucket 0 alone, in one atomic step
		// that refuses as the script does; the others are only read for
		// the total.
		after, err := s.adjustBucketSure(ctx, lay, 0, delta, begin, end, id)
		if err != nil {
			return after, err
		}
		states, _ := s.ReadBuckets(ctx, lay)
		for b, st := range states {
			if b > 0 {
				after += st.Stock
			}
		}
		return after, nil
	}
	states, err := s.ReadAllBuckets(ctx, lay)
	if err != nil {
		return 0, fmt.Errorf("adjust voucher %d: %w: %w", voucherID, sale.ErrBucketAway, err)
	}
	var left int64
	for _, st := range states {
		switch {
		case !st.Exists:
			return 0, sale.ErrNotWarmed
		case st.Frozen:
			return 0, sale.ErrFrozen
		}
		left += st.Stock
	}
	deltas := make([]int64, lay.N())
	if delta >= 0 {
		deltas[0] = delta
	} else {
		if -delta > left {
			return left, sale.ErrNotEnoughStock
		}
		byStock := make([]int, lay.N())
		for b := range byStock {
			byStock[b] = b
		}
		slices.SortFunc(byStock, func(a, b int) int { return cmp.Compare(states[b].Stock, states[a].Stock) })
		need := -delta
		for _, b := range byStock {
			take := min(need, states[b].Stock)
			deltas[b], need = -take, need-take
		}
	}
	var total int64
	for b, d := range deltas {
		if d == 0 && !windowChange {
			total += states[b].Stock
			continue
		}
		after, err := s.adjustBucketSure(ctx, lay, b, d, begin, end, id+"."+strconv.Itoa(b))
		if s.AfterAdjustStep != nil {
			s.AfterAdjustStep(b)
		}
		switch {
		case err == nil:
		case refused(err):
			return s.undoAdjust(ctx, lay, states, deltas[:b], windowChange, err)
		default:
			// Whether step b ran is unknown even after re-sending it: undo
			// the others and say the buckets may differ, not that the
			// change was refused.
			undone := "the buckets before it undone"
			if _, uerr := s.undoAdjust(ctx, lay, states, deltas[:b], windowChange, err); uerr != err {
				undone = uerr.Error()
			}
			return 0, fmt.Errorf("adjust voucher %d: %w: whether bucket %d took it is unknown (%v; %s): run `seckillctl reconcile %d`",
				voucherID, sale.ErrChangeUnknown, b, err, undone, voucherID)
		}
		total += after
	}
	// A retired sale that is changed is live again, its directory too.
	if err := s.Redis().Persist(ctx, s.KeysOf(voucherID).Voucher).Err(); err != nil {
		return total, fmt.Errorf("adjust voucher %d: its directory: %w", voucherID, err)
	}
	return total, nil
}

// undoAdjust undoes the steps of a change of a sale in buckets that were
// made before one failed with cause: each bucket's stock delta, and its
// window as read before the change.
func (s *Store) undoAdjust(ctx context.Context, lay salestate.Layout, before []salestate.BucketState, done []int64, windowChange bool, cause error) (int64, error) {
	for u, d := range done {
		if d == 0 && !windowChange {
			continue
		}
		var begin, end time.Time
		if windowChange {
			begin, end = time.UnixMilli(before[u].Begin), time.UnixMilli(before[u].End)
		}
		if _, uerr := s.adjustBucket(context.WithoutCancel(ctx), lay, u, -d, begin, end, rand.Text()); uerr != nil {
			// Neither error is wrapped: the change is part made, and its
			// caller must not read it as refused (ErrFrozen, ErrNotWarmed).
			return 0, fmt.Errorf("adjust voucher %d: the buckets are part changed, run `seckillctl reconcile %d`: a step failed (%v) and undoing bucket %d's failed (%v)",
				lay.VoucherID, lay.VoucherID, cause, u, uerr)
		}
	}
	if errors.Is(cause, sale.ErrNotEnoughStock) {
		if states, err := s.ReadAllBuckets(ctx, lay); err == nil {
			var left int64
			for _, st := range states {
				left += st.Stock
			}
			return left, cause
		}
	}
	return 0, cause
}

// refused is a step's answer that it changed nothing (the script said
// so); any other error leaves its outcome unknown.
func refused(err error) bool {
	return errors.Is(err, sale.ErrNotEnoughStock) || errors.Is(err, sale.ErrFrozen) || errors.Is(err, sale.ErrNotWarmed)
}

// adjustBucketSure is adjustBucket, with a step whose reply was lost
// (a timeout, a connection cut, a master failing over) sent again under
// the same id: the script answers a change it already made with its first
// answer and makes one it did not, so the outcome is known either way —
// unless Redis still does not answer (a few tries, seconds).
func (s *Store) adjustBucketSure(ctx context.Context, lay salestate.Layout, b int, delta int64, begin, end time.Time, id string) (int64, error) {
	after, err := s.adjustBucket(ctx, lay, b, delta, begin, end, id)
	for try := 0; err != nil && !refused(err) && try < 3; try++ {
		select {
		case <-time.After(time.Duration(200<<try) * time.Millisecond):
		case <-ctx.Done():
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		after, err = s.adjustBucket(rctx, lay, b, delta, begin, end, id)
		cancel()
	}
	return after, err
}

// adjustBucket runs a stock change on bucket b under the change's id.
func (s *Store) adjustBucket(ctx context.Context, lay salestate.Layout, b int, delta int64, begin, end time.Time, id string) (int64, error) {
	ms := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return strconv.FormatInt(t.UnixMilli(), 10)
	}
	voucherID := lay.VoucherID
	res, err := lua.AdjustVoucher.Run(ctx, s.Redis(), s.Bucket(lay, b).List(),
		delta, ms(begin), ms(end), id, changeMemory.Milliseconds()).Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("adjust voucher %d in Redis: %w", voucherID, err)
	}
	switch res[0] {
	case 1:
		// A retired sale that is changed is live again.
		if err := s.Redis().SAdd(ctx, s.ActiveVouchers(), voucherID).Err(); err != nil {
			return res[1], fmt.Errorf("adjust voucher %d: back among the active vouchers: %w", voucherID, err)
		}
		return res[1], nil
	case 0:
		return res[1], sale.ErrNotEnoughStock
	case -2:
		return 0, sale.ErrFrozen
	default:
		return 0, sale.ErrNotWarmed
	}
}

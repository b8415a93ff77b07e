package orderwriter_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/idgen"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/orderdb"
	"github.com/seckill/seckill/internal/testsupport"
)

// acceptOrders takes n orders of voucher through the gate and publishes
// them, from 32 buyers at a time, and returns their ids by user (1..n).
func (p *pipeline) acceptOrders(t *testing.T, voucher int64, n int) map[int64]int64 {
	t.Helper()
	svc := &order.Service{IDs: idgen.New(p.r.Client, p.r.Key("order"), 100), Gate: p.store.Gate, Publisher: p.pub, Logger: p.logger}
	ids := make(map[int64]int64, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	users := make(chan int64)
	for range 32 {
		wg.Go(func() {
			for u := range users {
				id, err := svc.Place(context.Background(), u, voucher)
				if err != nil {
					t.Errorf("user %d: %v", u, err)
					continue
				}
				mu.Lock()
				ids[u] = id
				mu.Unlock()
			}
		})
	}
	for u := range int64(n) {
		users <- u + 1
	}
	close(users)
	wg.Wait()
	return ids
}

// While the writer drains 1,000 accepted orders, their owners poll their
// status over and over: each is pending or confirmed, never "no such
// order".
func TestOrderStatusNeverMissesWhileTheWriterDrains(t *testing.T) {
	p := newPipeline(t)
	const voucher, n = 61, 1000
	p.warm(t, voucher, n)
	ids := p.acceptOrders(t, voucher, n)
	lookup := &order.Lookup{Settled: &orderdb.Orders{DB: p.m.DB}, Sales: p.store.Records}

	var confirmed, misses atomic.Int64
	var wg sync.WaitGroup
	done := make(chan struct{})
	for w := range 8 {
		wg.Go(func() {
			seen := map[int64]bool{}
			for {
				for u, id := range ids {
					if int(u)%8 != w || seen[id] {
						continue
					}
					s, err := lookup.Find(context.Background(), id, u)
					switch {
					case errors.Is(err, order.ErrNotFound):
						misses.Add(1)
						t.Errorf("order %d of user %d: no such order, while it was on its way", id, u)
					case err != nil:
						t.Error(err)
					case s.Status == order.StatusConfirmed:
						seen[id] = true
						confirmed.Add(1)
					}
				}
				select {
				case <-done:
					return
				default:
				}
			}
		})
	}
	p.startWriter(t)
	p.waitOrders(t, voucher, n)
	p.waitConfirmed(t, voucher)
	testsupport.Poll(30*time.Second, func() bool { return confirmed.Load() >= n || misses.Load() > 0 })
	close(done)
	wg.Wait()
	if confirmed.Load() != n {
		t.Fatalf("%d of %d orders seen confirmed", confirmed.Load(), n)
	}
}

// settlingFinder settles the order (the writer's commit, then its
// confirmation in Redis) right after a lookup has read MySQL: the moment
// a reader that reads MySQL first and Redis second misses the order.
type settlingFinder struct {
	order.SettledFinder
	settle func()
	once   sync.Once
}

func (f *settlingFinder) FindSettled(ctx context.Context, orderID int64) (order.Status, bool, error) {
	s, ok, err := f.SettledFinder.FindSettled(ctx, orderID)
	f.once.Do(f.settle)
	return s, ok, err
}

// An order settled between the lookup's two reads is still found.
func TestOrderStatusWhenSettledBetweenTheReads(t *testing.T) {
	p := newPipeline(t)
	const voucher = 62
	p.warm(t, voucher, 5)
	ids := p.acceptOrders(t, voucher, 1)
	e := order.Event{OrderID: ids[1], UserID: 1, VoucherID: voucher, AcceptedAt: time.Now().UnixMilli()}
	settle := func() {
		if _, err := orderdb.Apply(context.Background(), p.m.DB, []order.Event{e}); err != nil {
			t.Fatal(err)
		}
		if err := p.store.Confirm(context.Background(), []order.Event{e}); err != nil {
			t.Fatal(err)
		}
	}
	lookup := &order.Lookup{Settled: &settlingFinder{SettledFinder: &orderdb.Orders{DB: p.m.DB}, settle: settle}, Sales: p.store.Records}
	s, err := lookup.Find(context.Background(), e.OrderID, 1)
	if err != nil {
		t.Fatalf("order settled during its lookup: %v", err)
	}
	if s.Status != order.StatusPending && s.Status != order.StatusConfirmed {
		t.Fatalf("status %q", s.Status)
	}
}

// Once the sale's state has left Redis, a buyer's order for a voucher is
// found in MySQL: the confirmed order, or the failed one with its reason.
func TestOrderOfVoucherAfterTheSaleLeftRedis(t *testing.T) {
	p := newPipeline(t)
	const voucher = 63
	p.warm(t, voucher, 1)
	ctx := context.Background()
	now := time.Now().UnixMilli()
	events := []order.Event{{OrderID: 901, UserID: 1, VoucherID: voucher, AcceptedAt: now}, {OrderID: 902, UserID: 2, VoucherID: voucher, AcceptedAt: now + 1}}
	if _, err := orderdb.Apply(ctx, p.m.DB, events); err != nil {
		t.Fatal(err)
	}
	k := p.store.KeysOf(voucher)
	p.r.Client.Del(ctx, k.Voucher, k.Buyers, k.Pending, k.PendingAt)
	lookup := &order.Lookup{Settled: &orderdb.Orders{DB: p.m.DB}, Sales: p.store.Records}
	for _, tt := range []struct {
		user   int64
		id     int64
		status string
		reason string
	}{{1, 901, order.StatusConfirmed, ""}, {2, 902, order.StatusFailed, order.ReasonSoldOut}} {
		s, err := lookup.FindOf(ctx, tt.user, voucher)
		if err != nil || s.ID != tt.id || s.Status != tt.status || s.Reason != tt.reason {
			t.Fatalf("user %d: %+v %v, want order %d %s %s", tt.user, s, err, tt.id, tt.status, tt.reason)
		}
	}
	if _, err := lookup.FindOf(ctx, 3, voucher); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("a user with no order: %v, want ErrNotFound", err)
	}
}

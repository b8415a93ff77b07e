package gate_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/internal/idgen"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/redisconn"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
)

// clients are the two ways a store sends the gate's decisions: each
// attempt on a round trip of its own, or through the client's
// autopipeliner, as the api does by default.
var clients = []struct {
	name  string
	store func(tb testing.TB, rdb redis.UniversalClient, prefix string) *saletest.Sales
}{
	{"Plain", func(_ testing.TB, rdb redis.UniversalClient, prefix string) *saletest.Sales {
		return saletest.New(rdb, prefix)
	}},
	{"AutoPipelined", func(tb testing.TB, rdb redis.UniversalClient, prefix string) *saletest.Sales {
		ap, err := redisconn.AutoPipeliner(rdb)
		if err != nil {
			tb.Fatal(err)
		}
		s := saletest.New(rdb, prefix)
		s.Gate.WithAutoPipeline(ap)
		return s
	}},
}

// warmedVoucherOn is saletest.Warmed with the store newStore makes.
func warmedVoucherOn(tb testing.TB, newStore func(testing.TB, redis.UniversalClient, string) *saletest.Sales, stock int64) (*testsupport.Redis, *saletest.Sales, int64) {
	tb.Helper()
	r := testsupport.MustRedis(tb)
	store := newStore(tb, r.Client, r.Prefix)
	return r, store, saletest.Warm(tb, store, stock)
}

func TestGate(t *testing.T) {
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) { testGate(t, c.store) })
	}
}

func testGate(t *testing.T, newStore func(testing.TB, redis.UniversalClient, string) *saletest.Sales) {
	r := testsupport.MustRedis(t)
	store := newStore(t, r.Client, r.Prefix)
	ctx := context.Background()
	now, err := r.Client.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	hour := time.Hour
	tests := []struct {
		name       string
		warm       bool
		stock      int64
		begin, end time.Time
		buyer      bool // the user already bought
		want       error
		stockLeft  int64
	}{
		{"Accepted", true, 5, now.Add(-hour), now.Add(hour), false, nil, 4},
		{"LastUnit", true, 1, now.Add(-hour), now.Add(hour), false, nil, 0},
		{"UnknownVoucher", false, 0, time.Time{}, time.Time{}, false, order.ErrUnknownVoucher, 0},
		{"NotStarted", true, 5, now.Add(hour), now.Add(2 * hour), false, order.ErrNotStarted, 5},
		{"Ended", true, 5, now.Add(-2 * hour), now.Add(-hour), false, order.ErrEnded, 5},
		{"EndIsExclusive", true, 5, now.Add(-hour), now.Add(-time.Millisecond), false, order.ErrEnded, 5},
		{"StockZero", true, 0, now.Add(-hour), now.Add(hour), false, order.ErrSoldOut, 0},
		{"AlreadyBought", true, 5, now.Add(-hour), now.Add(hour), true, order.ErrAlreadyBought, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			voucher := 1 + rand.Int64N(1<<40)
			k := store.KeysOf(voucher)
			const user, orderID = 7, 1001
			if tt.warm {
				if err := store.Gate.Warm(ctx, voucher, tt.stock, tt.begin, tt.end); err != nil {
					t.Fatal(err)
				}
			}
			if tt.buyer {
				r.Client.HSet(ctx, k.Buyers, user, 1)
			}
			d, err := store.Gate.Try(ctx, voucher, user, orderID)
			if err != nil {
				t.Fatal(err)
			}
			if !errors.Is(d.Err, tt.want) || d.Err != tt.want {
				t.Fatalf("outcome %v, want %v", d.Err, tt.want)
			}
			if d.StockLeft != tt.stockLeft {
				t.Fatalf("stock left %d, want %d", d.StockLeft, tt.stockLeft)
			}
			stock, _ := r.Client.HGet(ctx, k.Voucher, "stock").Int64()
			pending := r.Client.HGet(ctx, k.Pending, "1001").Val()
			if tt.want == nil {
				if stock != tt.stockLeft || !r.Client.HExists(ctx, k.Buyers, strconv.FormatInt(user, 10)).Val() {
					t.Fatalf("after accept: stock %d, buyer recorded %v", stock, r.Client.HExists(ctx, k.Buyers, strconv.FormatInt(user, 10)).Val())
				}
				if pending == "" || r.Client.ZScore(ctx, k.PendingAt, "1001").Val() == 0 {
					t.Fatalf("no reservation recorded: %q", pending)
				}
				if d.AcceptedAt.Sub(now).Abs() > 10*time.Second {
					t.Fatalf("accepted at %v, Redis said %v", d.AcceptedAt, now)
				}
				return
			}
			if pending != "" || (tt.warm && stock != tt.stock) {
				t.Fatalf("a refused attempt changed state: stock %d, reservation %q", stock, pending)
			}
		})
	}
}

// A voucher's stock is taken exactly once per unit whatever the
// concurrency, and one user never gets two units.
func TestGateUnderConcurrency(t *testing.T) {
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) { testGateUnderConcurrency(t, c.store) })
	}
}

func testGateUnderConcurrency(t *testing.T, newStore func(testing.TB, redis.UniversalClient, string) *saletest.Sales) {
	r, store, voucher := warmedVoucherOn(t, newStore, 50)
	ctx := context.Background()
	results := make(chan error, 400)
	start := make(chan struct{})
	for i := range 400 {
		go func() {
			<-start
			// 200 users, each trying twice at once.
			d, err := store.Gate.Try(ctx, voucher, int64(i%200+1), int64(i+1))
			if err != nil {
				results <- err
				return
			}
			results <- d.Err
		}()
	}
	close(start)
	counts := map[error]int{}
	for range 400 {
		counts[<-results]++
	}
	if counts[nil] != 50 || counts[order.ErrSoldOut]+counts[order.ErrAlreadyBought] != 350 {
		t.Fatalf("outcomes %v, want 50 accepted and 350 refused", counts)
	}
	k := store.KeysOf(voucher)
	if n := r.Client.HLen(ctx, k.Buyers).Val(); n != 50 {
		t.Fatalf("%d buyers, want 50", n)
	}
	if n := r.Client.HLen(ctx, k.Pending).Val(); n != 50 {
		t.Fatalf("%d reservations, want 50", n)
	}
}

// Twenty sales at once, on every master of a cluster: each sells exactly
// its stock, one unit per user, whichever shard holds it.
func TestGateSellsManySalesAtOnce(t *testing.T) {
	r := testsupport.MustRedis(t)
	store := saletest.New(r.Client, r.Prefix)
	ctx := context.Background()
	const sales, stock, users = 20, 10, 30
	vouchers := make([]int64, sales)
	var keys []string
	for i := range vouchers {
		vouchers[i] = int64(1000 + i)
		if err := store.Gate.Warm(ctx, vouchers[i], stock, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, store.KeysOf(vouchers[i]).Voucher)
	}
	r.MustSpread(t, keys...)
	t.Logf("%d sales on %d masters", sales, r.MastersOf(t, keys...))
	var mu sync.Mutex
	accepted := map[int64]map[int64]bool{}
	for _, v := range vouchers {
		accepted[v] = map[int64]bool{}
	}
	var g errgroup.Group
	for i, v := range vouchers {
		for u := range int64(users) {
			g.Go(func() error {
				d, err := store.Gate.Try(ctx, v, u+1, int64(i*users)+u+1)
				if err != nil || d.Err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				if accepted[v][u] {
					return fmt.Errorf("user %d got two units of voucher %d", u, v)
				}
				accepted[v][u] = true
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for _, v := range vouchers {
		size, err := store.Repair.Size(ctx, v)
		if err != nil || len(accepted[v]) != stock || size.Stock != 0 || size.Buyers != stock || size.Epoch != size.RedisNow {
			t.Fatalf("voucher %d: %d accepted, %+v, %v; want %d sold, stock 0, stamped with its master's id", v, len(accepted[v]), size, err, stock)
		}
	}
}

// After SCRIPT FLUSH, which is what a Redis restart does to the script
// cache, the gate gets NOSCRIPT, falls back to EVAL and keeps working.
func TestGateAfterScriptCacheLoss(t *testing.T) {
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) { testGateAfterScriptCacheLoss(t, c.store) })
	}
}

func testGateAfterScriptCacheLoss(t *testing.T, newStore func(testing.TB, redis.UniversalClient, string) *saletest.Sales) {
	r := testsupport.MustRedis(t)
	client := r.NewClient(t)
	sent := &testsupport.ScriptLog{}
	client.AddHook(sent)
	store := newStore(t, client, r.Prefix)
	voucher := 1 + rand.Int64N(1<<40)
	ctx := context.Background()
	if err := store.Gate.Warm(ctx, voucher, 5, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if d, err := store.Gate.Try(ctx, voucher, 1, 1); err != nil || d.Err != nil {
		t.Fatalf("before the flush: %v %v", d.Err, err)
	}
	// The script cache is the servers', shared with the packages testing
	// beside this one: one of them may load the scripts again between the
	// flush and the order, and then that round had nothing to fall back from.
	for round := int64(1); ; round++ {
		if err := r.Client.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		sent.Reset()
		if d, err := store.Gate.Try(ctx, voucher, round+1, round+1); err != nil || d.Err != nil {
			t.Fatalf("after the flush: %v %v", d.Err, err)
		}
		calls := sent.Calls()
		if len(calls) == 0 {
			// A cluster client's automatic pipeline sends its EVALSHA and
			// EVAL past the client's hooks; a SCRIPT LOAD would still pass
			// them (it goes through the cluster client): none was sent, and
			// the order was taken after the flush.
			return
		}
		if calls[0] == (testsupport.ScriptCall{Name: "evalsha"}) && round < 3 {
			continue
		}
		// One EVAL, on the master that holds the sale: no SCRIPT LOAD, which a
		// cluster client sends to every node.
		want := []testsupport.ScriptCall{{Name: "evalsha", NoScript: true}, {Name: "eval"}}
		if !slices.Equal(calls, want) {
			t.Fatalf("round %d: the store sent %+v after the flush, want %+v", round, calls, want)
		}
		return
	}
}

// With the order queue unable to keep an order the order is refused before the gate: no
// unit is taken and nothing is reserved.
func TestOrderRefusedWhileKafkaIsDown(t *testing.T) {
	r, store, voucher := saletest.Warmed(t, 5)
	ctx := context.Background()
	svc := &order.Service{Gate: store.Gate, IDs: idgen.New(r.Client, r.Key("order"), 10), Durable: refusing{}}
	if _, err := svc.Place(ctx, 1, voucher); !errors.Is(err, order.ErrNotTaken) {
		t.Fatalf("order while Kafka is down: %v, want ErrNotTaken", err)
	}
	k := store.KeysOf(voucher)
	if stock, _ := r.Client.HGet(ctx, k.Voucher, "stock").Int(); stock != 5 || r.Client.HLen(ctx, k.Pending).Val() != 0 {
		t.Fatalf("stock %d and %d reservations after a refused order", stock, r.Client.HLen(ctx, k.Pending).Val())
	}
}

// refusing is an order queue that could keep no order now.
type refusing struct{}

func (refusing) Accepting(int64) bool { return false }
func (refusing) Failed(int64)         {}

// leavingIDs is the client hanging up right after its order got an id,
// while the gate and the publish are still ahead.
type leavingIDs struct {
	order.IDs
	hangUp context.CancelFunc
}

func (l leavingIDs) Next(ctx context.Context) (int64, error) {
	defer l.hangUp()
	return l.IDs.Next(ctx)
}

// publishRecorder records whether the publish saw a live context.
type publishRecorder struct{ ctxErr []error }

func (p *publishRecorder) Publish(ctx context.Context, _ ...order.Event) error {
	p.ctxErr = append(p.ctxErr, ctx.Err())
	return nil
}

// A client that leaves before the gate takes nothing; one that leaves once
// the gate is asked still gets its order taken and published at once.
func TestPlaceOutlivesAClientThatHangsUp(t *testing.T) {
	r, store, voucher := saletest.Warmed(t, 5)
	ctx := context.Background()
	ids := idgen.New(r.Client, r.Key("order"), 10)
	stock := func() int64 { n, _ := r.Client.HGet(ctx, store.KeysOf(voucher).Voucher, "stock").Int64(); return n }

	gone, cancel := context.WithCancel(ctx)
	cancel()
	pub := &publishRecorder{}
	svc := &order.Service{Gate: store.Gate, IDs: ids, Publisher: pub}
	if _, err := svc.Place(gone, 1, voucher); !errors.Is(err, context.Canceled) || stock() != 5 || len(pub.ctxErr) != 0 {
		t.Fatalf("client gone before the gate: %v, stock %d, %d publishes; want nothing taken", err, stock(), len(pub.ctxErr))
	}

	leaving, hangUp := context.WithCancel(ctx)
	svc.IDs = leavingIDs{IDs: ids, hangUp: hangUp}
	id, err := svc.Place(leaving, 2, voucher)
	if err != nil || id == 0 || stock() != 4 {
		t.Fatalf("client gone during the order: %d, %v, stock %d; want the order taken", id, err, stock())
	}
	if leaving.Err() == nil || len(pub.ctxErr) != 1 || pub.ctxErr[0] != nil {
		t.Fatalf("publish saw %v (client context %v); want a live context", pub.ctxErr, leaving.Err())
	}
}

// The same attempt sent again, as a client does after a timeout, gets the
// first decision back; another attempt of the same buyer is told which
// order the buyer holds.
func TestGateAnswersTheSameAttemptTheSame(t *testing.T) {
	r, store, voucher := saletest.Warmed(t, 5)
	ctx := context.Background()
	first, err := store.Gate.Try(ctx, voucher, 7, 1001)
	if err != nil || first.Err != nil {
		t.Fatalf("first attempt: %v %v", first.Err, err)
	}
	again, err := store.Gate.Try(ctx, voucher, 7, 1001)
	if err != nil || again.Err != nil || !again.AcceptedAt.Equal(first.AcceptedAt) || again.OrderID != 1001 {
		t.Fatalf("same attempt again: %+v %v; want accepted at %v", again, err, first.AcceptedAt)
	}
	other, err := store.Gate.Try(ctx, voucher, 7, 1002)
	if err != nil || !errors.Is(other.Err, order.ErrAlreadyBought) || other.OrderID != 1001 {
		t.Fatalf("another attempt of the buyer: %+v %v; want already bought, order 1001", other, err)
	}
	// Once the writer has settled the order its reservation is gone; the
	// same attempt is still the buyer's.
	if err := store.Confirm(ctx, []order.Event{{OrderID: 1001, UserID: 7, VoucherID: voucher}}); err != nil {
		t.Fatal(err)
	}
	if late, err := store.Gate.Try(ctx, voucher, 7, 1001); err != nil || late.Err != nil {
		t.Fatalf("same attempt after confirmation: %v %v", late.Err, err)
	}
	if stock, _ := r.Client.HGet(ctx, store.KeysOf(voucher).Voucher, "stock").Int(); stock != 4 {
		t.Fatalf("stock %d after one order tried four times, want 4", stock)
	}
}

package draw_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/draw"
	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/orderdb"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
)

// Order is a function of the seed and the set of entrants only: not of the
// order Redis returns them in.
func TestOrderIsTheSeedsShuffleOfTheEntrants(t *testing.T) {
	entrants := make([]sale.Entrant, 50)
	for i := range entrants {
		entrants[i] = sale.Entrant{UserID: int64(1000 + i), OrderID: int64(5000 + i)}
	}
	seedA, seedB := strings64('a'), strings64('b')
	a1, err := draw.Order(seedA, entrants)
	if err != nil {
		t.Fatal(err)
	}
	shuffled := slices.Clone(entrants)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	a2, _ := draw.Order(seedA, shuffled)
	b, _ := draw.Order(seedB, entrants)
	if !slices.Equal(a1, a2) {
		t.Error("the same seed gave another order for the entrants read in another order")
	}
	if slices.Equal(a1, b) {
		t.Error("two seeds gave the same order of 50")
	}
	if !slices.Equal(sortedByUser(a1), entrants) {
		t.Error("the order is not a permutation of the entrants")
	}
	for _, bad := range []string{"", "zz", strings64('a')[:62], strings64('g')} {
		if _, err := draw.Order(bad, entrants); err == nil {
			t.Errorf("seed %q taken", bad)
		}
	}
}

// The order an auditor recomputes does not move under the code: a seed's
// order of eight entrants, pinned (a change of the shuffle, or of Go's
// ChaCha8 stream, would make every kept draw disagree with its orders).
func TestOrderIsPinned(t *testing.T) {
	var es []sale.Entrant
	for u := int64(1); u <= 8; u++ {
		es = append(es, sale.Entrant{UserID: u, OrderID: 100 + u})
	}
	o, err := draw.Order("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", es)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, e := range o {
		got = append(got, e.UserID)
	}
	if want := []int64{7, 2, 5, 8, 1, 3, 6, 4}; !slices.Equal(got, want) {
		t.Fatalf("order %v, pinned %v", got, want)
	}
}

// Every entrant is as likely to come first: over 4,000 seeds each of 4
// entrants is first about 1,000 times (a chi-square of 3 degrees of freedom
// under 16.27, its 0.1 % tail).
func TestOrderIsUniform(t *testing.T) {
	entrants := []sale.Entrant{{UserID: 1}, {UserID: 2}, {UserID: 3}, {UserID: 4}}
	firsts := map[int64]float64{}
	const seeds = 4000
	for i := range seeds {
		seed := fmt.Sprintf("%064x", i+1)
		o, err := draw.Order(seed, entrants)
		if err != nil {
			t.Fatal(err)
		}
		firsts[o[0].UserID]++
	}
	var chi float64
	for _, e := range entrants {
		d := firsts[e.UserID] - seeds/4
		chi += d * d / (seeds / 4)
	}
	if chi > 16.27 {
		t.Fatalf("firsts %v: chi-square %.1f", firsts, chi)
	}
}

func strings64(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

func sortedByUser(es []sale.Entrant) []sale.Entrant {
	out := slices.Clone(es)
	slices.SortFunc(out, func(a, b sale.Entrant) int { return int(a.UserID - b.UserID) })
	return out
}

type rig struct {
	r      *testsupport.Redis
	m      *testsupport.MySQL
	k      *testsupport.Kafka
	store  *saletest.Sales
	topic  string
	pub    *broker.OrderPublisher
	locks  *lock.Client
	window time.Duration
}

func newRig(t testing.TB) *rig {
	g := &rig{r: testsupport.MustRedis(t), m: testsupport.MustMySQL(t), k: testsupport.MustKafka(t), window: 1500 * time.Millisecond}
	g.store = saletest.New(g.r.Client, g.r.Prefix)
	g.topic = g.k.MustTopic(t, 1)
	g.pub = broker.NewOrderPublisher(broker.NewProducer(g.k.Brokers, g.topic, 0), 5*time.Second)
	t.Cleanup(func() { _ = g.pub.Close() })
	g.locks = lock.New(g.r.Client, g.r.Prefix)
	return g
}

// sale is a draw sale of stock whose window opened now (Redis's clock).
func (g *rig) sale(t testing.TB, stock int64) int64 {
	t.Helper()
	ctx := context.Background()
	voucher := 1 + rand.Int64N(1<<40)
	g.m.MustSeedVoucher(t, voucher, stock)
	now, err := g.store.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.store.Gate.WarmDraw(ctx, voucher, stock, now, now.Add(time.Hour), g.window, false); err != nil {
		t.Fatal(err)
	}
	return voucher
}

func (g *rig) drawer(chunk int) *draw.Drawer {
	return &draw.Drawer{Sales: g.store.Draws, Records: orderdb.DrawRecords{DB: g.m.DB}, Publisher: g.pub, Locks: g.locks,
		LeaseTTL: time.Second, Interval: time.Hour, Chunk: chunk, Logger: slog.New(slog.DiscardHandler)}
}

// enter makes n buyers enter, users from first on, each under an order id
// of its own: the entries by user.
func (g *rig) enter(t testing.TB, voucher, first int64, n int) map[int64]int64 {
	t.Helper()
	entries := map[int64]int64{}
	for i := range int64(n) {
		user, id := first+i, 1_000_000+first+i
		d, err := g.store.Gate.Try(context.Background(), voucher, user, id)
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(d.Err, order.ErrEntered) || d.OrderID != id {
			t.Fatalf("user %d in the window: %v, order %d; want entered under %d", user, d.Err, d.OrderID, id)
		}
		entries[user] = id
	}
	return entries
}

// dueDraw is a draw sale of stock that n buyers entered (users from 1),
// its window ended: the sale, and the entries by user.
func (g *rig) dueDraw(t testing.TB, stock int64, n int) (int64, map[int64]int64) {
	t.Helper()
	voucher := g.sale(t, stock)
	entries := g.enter(t, voucher, 1, n)
	g.waitDue(t, voucher)
	return voucher, entries
}

// stoppedAt is a context that ends once d has decided n entrants: d stops
// there, as a crash would.
func stoppedAt(t testing.TB, d *draw.Drawer, n int) context.Context {
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	d.Admitted = func(_ int64, decided int) {
		if decided >= n {
			stop()
		}
	}
	return ctx
}

func (g *rig) waitDue(t testing.TB, voucher int64) {
	t.Helper()
	testsupport.Wait(t, 10*time.Second, "the draw's window to end", func() bool {
		st, err := g.store.Draws.DrawState(context.Background(), voucher)
		return err == nil && st.Due()
	})
}

// fence is a new holder's token of the rig's drawer lock: larger at each
// call, as each new holder of a lease gets.
func (g *rig) fence(t testing.TB) int64 {
	t.Helper()
	ctx := context.Background()
	l, err := g.locks.Acquire(ctx, "seckill-draw-test", lock.Options{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	return l.Fence
}

// expectDrawn checks that the sale's orders are the first stock entrants
// in the order the kept seed gives, each once: in the buyers, in the
// reservations, and on the topic.
func (g *rig) expectDrawn(t *testing.T, voucher int64, entries map[int64]int64, stock int) {
	t.Helper()
	ctx := context.Background()
	var seed string
	if err := g.m.DB.QueryRow("SELECT draw_seed FROM tb_seckill_voucher WHERE voucher_id = ?", voucher).Scan(&seed); err != nil {
		t.Fatal(err)
	}
	kept, ok, err := orderdb.DrawRecords{DB: g.m.DB}.Entrants(ctx, voucher)
	if err != nil || !ok {
		t.Fatalf("the draw's entrants of record: %v (kept %v)", err, ok)
	}
	if len(kept) != len(entries) {
		t.Fatalf("%d entrants of record, %d entries", len(kept), len(entries))
	}
	for _, e := range kept {
		if entries[e.UserID] != e.OrderID {
			t.Fatalf("entrant of record %d under order %d, its entry %d", e.UserID, e.OrderID, entries[e.UserID])
		}
	}
	ordered, err := draw.Order(seed, kept)
	if err != nil {
		t.Fatal(err)
	}
	winners := ordered[:min(stock, len(ordered))]
	keys := salestate.KeysFor(g.r.Prefix, voucher)
	buyers, err := g.r.Client.HGetAll(ctx, keys.Buyers).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(buyers) != len(winners) {
		t.Fatalf("%d buyers, want the %d first entrants", len(buyers), len(winners))
	}
	for _, w := range winners {
		if buyers[strconv.FormatInt(w.UserID, 10)] != strconv.FormatInt(w.OrderID, 10) {
			t.Fatalf("winner %d (order %d) is not a buyer under its entry's order: %q", w.UserID, w.OrderID, buyers[strconv.FormatInt(w.UserID, 10)])
		}
	}
	left, err := g.r.Client.HGet(ctx, keys.Voucher, salestate.FieldStock).Int()
	if err != nil || left != stock-len(winners) {
		t.Fatalf("stock left %d (%v), want %d", left, err, stock-len(winners))
	}
	if kept, _ := g.r.Client.HGet(ctx, keys.Voucher, salestate.FieldSeed).Result(); kept != seed {
		t.Fatalf("the sale keeps seed %q, MySQL %q", kept, seed)
	}
	published := g.readOrders(t, len(winners))
	want := map[int64]bool{}
	for _, w := range winners {
		want[w.OrderID] = true
	}
	for id := range published {
		if !want[id] {
			t.Fatalf("order %d published, not a winner's", id)
		}
	}
	if len(published) != len(winners) {
		t.Fatalf("%d orders published, want %d", len(published), len(winners))
	}
}

// readOrders reads the topic until n distinct orders are on it (copies
// are the writer's to drop), then a moment more for any beyond them.
func (g *rig) readOrders(t *testing.T, n int) map[int64]order.Event {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: g.k.Brokers, Topic: g.topic, Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	got := map[int64]order.Event{}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		wait := time.Until(deadline)
		if len(got) >= n {
			wait = 500 * time.Millisecond
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		m, err := r.ReadMessage(ctx)
		cancel()
		if err != nil {
			break
		}
		e, err := broker.DecodeOrder(m.Value)
		if err != nil {
			t.Fatal(err)
		}
		got[e.OrderID] = e
	}
	return got
}

func TestADrawServesTheEntrantsInTheSeedsOrder(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	ctx := context.Background()
	const stock = 40
	voucher := g.sale(t, stock)
	entries := g.enter(t, voucher, 1, 300)

	// Entering twice keeps the first entry: one per buyer.
	d, err := g.store.Gate.Try(ctx, voucher, 7, 999)
	if err != nil || !errors.Is(d.Err, order.ErrEntered) || d.OrderID != entries[7] {
		t.Fatalf("user 7 again: %v %v order %d, want entered under %d", d.Err, err, d.OrderID, entries[7])
	}
	if n, _ := g.r.Client.HGet(ctx, salestate.KeysFor(g.r.Prefix, voucher).Voucher, salestate.FieldStock).Int(); n != stock {
		t.Fatalf("entries took stock: %d left of %d", n, stock)
	}

	g.waitDue(t, voucher)
	// After the window and before the draw: a newcomer waits for the
	// draw, an entrant is told it entered.
	if d, err := g.store.Gate.Try(ctx, voucher, 5000, 5000); err != nil || !errors.Is(d.Err, order.ErrDrawing) {
		t.Fatalf("a newcomer before the draw: %v %v", d.Err, err)
	}
	if d, err := g.store.Gate.Try(ctx, voucher, 8, 888); err != nil || !errors.Is(d.Err, order.ErrEntered) || d.OrderID != entries[8] {
		t.Fatalf("an entrant before the draw: %v %v order %d", d.Err, err, d.OrderID)
	}

	if err := g.drawer(0).Draw(ctx, voucher, g.fence(t)); err != nil {
		t.Fatal(err)
	}
	g.expectDrawn(t, voucher, entries, stock)

	// After it: first-come on what is left (nothing), the winners hold
	// their orders, the others read sold out.
	for user, id := range entries {
		d, err := g.store.Gate.Try(ctx, voucher, user, 7_000_000+user)
		if err != nil {
			t.Fatal(err)
		}
		bought := errors.Is(d.Err, order.ErrAlreadyBought) && d.OrderID == id
		if !bought && !errors.Is(d.Err, order.ErrSoldOut) {
			t.Fatalf("entrant %d after the draw: %v", user, d.Err)
		}
	}
	if d, _ := g.store.Gate.Try(ctx, voucher, 6000, 6000); !errors.Is(d.Err, order.ErrSoldOut) {
		t.Fatalf("a newcomer after the draw: %v, want sold out", d.Err)
	}
}

// Fewer entrants than units: every entrant wins, and the rest is sold
// first-come after the draw.
func TestADrawWithUnitsLeftSellsThemFirstCome(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	ctx := context.Background()
	voucher, entries := g.dueDraw(t, 10, 4)
	if err := g.drawer(0).Draw(ctx, voucher, g.fence(t)); err != nil {
		t.Fatal(err)
	}
	g.expectDrawn(t, voucher, entries, 10)
	d, err := g.store.Gate.Try(ctx, voucher, 100, 100)
	if err != nil || d.Err != nil || d.StockLeft != 5 {
		t.Fatalf("first-come after the draw: %v %v, %d left", d.Err, err, d.StockLeft)
	}
}

// A drawer that stops half way (killed, or paused past its lease) is
// followed by one under a newer token that makes the same draw; the first,
// come back with its old token in the middle of the second's draw, takes
// nothing, and a third finishes: every winner served once, the stock exact.
func TestADrawerStoppedHalfWayIsFollowedByTheSameDraw(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	ctx := context.Background()
	const stock = 300
	voucher, entries := g.dueDraw(t, stock, 1000)
	keys := salestate.KeysFor(g.r.Prefix, voucher)
	served := func() int64 { return g.r.Client.HLen(ctx, keys.Buyers).Val() }

	first, oldFence := g.drawer(64), g.fence(t)
	if err := first.Draw(stoppedAt(t, first, 128), voucher, oldFence); err == nil {
		t.Fatal("the stopped drawer finished its draw")
	}
	if st, _ := g.store.Draws.DrawState(ctx, voucher); !st.Drawn.IsZero() {
		t.Fatal("the draw was recorded as made half way")
	}
	if n := served(); n == 0 || n >= stock {
		t.Fatalf("the stopped drawer served %d, want part of %d", n, stock)
	}

	second := g.drawer(64)
	if err := second.Draw(stoppedAt(t, second, 192), voucher, g.fence(t)); err == nil {
		t.Fatal("the second drawer, stopped, finished its draw")
	}
	before := served()
	if err := g.drawer(64).Draw(ctx, voucher, oldFence); !errors.Is(err, sale.ErrDrawFenced) {
		t.Fatalf("the first drawer come back: %v, want refused as fenced", err)
	}
	ordered, _ := draw.Order(strings64('0'), []sale.Entrant{{UserID: 1, OrderID: entries[1]}, {UserID: 2, OrderID: entries[2]}})
	decisions, err := g.store.Draws.Admit(ctx, voucher, oldFence, ordered)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range decisions {
		if !errors.Is(d.Err, order.ErrDrawing) {
			t.Fatalf("the gate under the old token: %v, want refused", d.Err)
		}
	}
	if served() != before {
		t.Fatalf("the old token served %d more", served()-before)
	}

	if err := g.drawer(64).Draw(ctx, voucher, g.fence(t)); err != nil {
		t.Fatal(err)
	}
	g.expectDrawn(t, voucher, entries, stock)
}

// The gate lets the drawer serve only entrants under their entries' order
// ids, and one order per entrant even when named twice in one call.
func TestTheDrawServesOnlyItsEntrants(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	ctx := context.Background()
	voucher, entries := g.dueDraw(t, 10, 3)
	fence := g.fence(t)
	if _, err := g.store.Draws.BeginDraw(ctx, voucher, fence, strings64('1')); err != nil {
		t.Fatal(err)
	}
	decisions, err := g.store.Draws.Admit(ctx, voucher, fence, []sale.Entrant{
		{UserID: 99, OrderID: 99},            // never entered
		{UserID: 1, OrderID: entries[1] + 1}, // not its entry's order
		{UserID: 2, OrderID: entries[2]},
		{UserID: 2, OrderID: entries[2]}, // twice in one call
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []error{sale.ErrNotAnEntrant, sale.ErrNotAnEntrant, nil, nil}
	for i, d := range decisions {
		if !errors.Is(d.Err, want[i]) || want[i] == nil && d.Err != nil {
			t.Fatalf("answer %d: %v, want %v", i, d.Err, want[i])
		}
	}
	if n := g.r.Client.HLen(ctx, salestate.KeysFor(g.r.Prefix, voucher).Buyers).Val(); n != 1 {
		t.Fatalf("%d buyers, want the one entrant served", n)
	}
}

// The draw's steps (lua/draw.lua): not before the window ends by the
// sale's own clock, not under a token older than one seen, done only under
// the draw's token, and nothing to do once made.
func TestTheDrawsSteps(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	ctx := context.Background()
	g.window = time.Hour
	open := g.sale(t, 5)
	if _, err := g.store.Draws.BeginDraw(ctx, open, g.fence(t), strings64('1')); !errors.Is(err, sale.ErrDrawNotDue) {
		t.Fatalf("begun in the window: %v, want not due", err)
	}
	g.window = 1500 * time.Millisecond
	voucher := g.sale(t, 5)
	g.waitDue(t, voucher)
	older, newer := g.fence(t), g.fence(t)
	if _, err := g.store.Draws.BeginDraw(ctx, voucher, newer, strings64('1')); err != nil {
		t.Fatal(err)
	}
	_, err := g.store.Draws.BeginDraw(ctx, voucher, older, strings64('1'))
	if fenced, ok := errors.AsType[*sale.DrawFencedError](err); !ok || fenced.Seen != newer {
		t.Fatalf("begun under an older token: %v, want fenced by %d", err, newer)
	}
	if err := g.store.Draws.EndDraw(ctx, voucher, older); !errors.Is(err, sale.ErrDrawFenced) {
		t.Fatalf("done under an older token: %v", err)
	}
	if err := g.store.Draws.EndDraw(ctx, voucher, newer); err != nil {
		t.Fatal(err)
	}
	if made, err := g.store.Draws.BeginDraw(ctx, voucher, g.fence(t), strings64('1')); err != nil || !made {
		t.Fatalf("begun once made: %v, made %v", err, made)
	}
	if st, _ := g.store.Draws.DrawState(ctx, voucher); st.Drawn.IsZero() || st.Due() {
		t.Fatalf("the draw made reads %+v", st)
	}
}

// The lease's work: Scan makes the draws that are due and leaves the
// others (a first-come sale, a draw still taking entries).
func TestScanMakesTheDrawsDue(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	ctx := context.Background()
	due := g.sale(t, 3)
	entries := g.enter(t, due, 1, 5)
	g.waitDue(t, due)
	g.window = time.Hour
	open := g.sale(t, 3)
	g.enter(t, open, 1, 2)
	plain := 1 + rand.Int64N(1<<40)
	if err := g.store.Gate.Warm(ctx, plain, 3, time.Now().Add(-time.Minute), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := g.drawer(0).Scan(ctx, g.fence(t)); err != nil {
		t.Fatal(err)
	}
	g.expectDrawn(t, due, entries, 3)
	if st, _ := g.store.Draws.DrawState(ctx, open); !st.Drawn.IsZero() {
		t.Fatal("a draw still taking entries was made")
	}
}

// A sale that ended before its draw was made (its drawers away past its
// end) is not retired: the draw is still made, and then it is.
func TestASaleIsNotRetiredBeforeItsDraw(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	ctx := context.Background()
	voucher := 1 + rand.Int64N(1<<40)
	g.m.MustSeedVoucher(t, voucher, 5)
	now, err := g.store.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.store.Gate.WarmDraw(ctx, voucher, 5, now.Add(-time.Second), now.Add(time.Second), 500*time.Millisecond, false); err != nil {
		t.Fatal(err)
	}
	testsupport.Wait(t, 10*time.Second, "the sale's end", func() bool {
		n, err := g.store.Now(ctx)
		return err == nil && n.After(now.Add(time.Second))
	})
	if retired, err := g.store.Outbox.Retire(ctx, voucher, time.Hour); err != nil || retired {
		t.Fatalf("an ended sale whose draw is not made: retired %v (%v)", retired, err)
	}
	if err := g.drawer(0).Draw(ctx, voucher, g.fence(t)); err != nil {
		t.Fatal(err)
	}
	if retired, err := g.store.Outbox.Retire(ctx, voucher, time.Hour); err != nil || !retired {
		t.Fatalf("an ended sale once drawn: retired %v (%v)", retired, err)
	}
}

// Redis loses entries after the draw began (a failover, a sale rebuilt
// from MySQL): the next drawer puts the entrants of record back and makes
// the same draw, rather than being refused for each lost entrant.
func TestADrawIsMadeAmongItsEntrantsOfRecordAfterRedisLostSome(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	ctx := context.Background()
	const stock = 30
	voucher, entries := g.dueDraw(t, stock, 100)
	first := g.drawer(16)
	if err := first.Draw(stoppedAt(t, first, 1), voucher, g.fence(t)); err == nil {
		t.Fatal("the stopped drawer finished its draw")
	}
	keys := salestate.KeysFor(g.r.Prefix, voucher)
	var lost []string
	for u := int64(1); u <= 100; u += 3 {
		lost = append(lost, strconv.FormatInt(u, 10))
	}
	if err := g.r.Client.HDel(ctx, keys.Entrants, lost...).Err(); err != nil {
		t.Fatal(err)
	}
	if err := g.drawer(16).Draw(ctx, voucher, g.fence(t)); err != nil {
		t.Fatal(err)
	}
	g.expectDrawn(t, voucher, entries, stock)
}

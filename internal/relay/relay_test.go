package relay_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/idgen"
	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/relay"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
	"github.com/seckill/seckill/lua"
)

type failingPublisher struct{}

func (failingPublisher) Publish(context.Context, ...order.Event) error {
	return errors.New("injected: the API died before the publish")
}

type relayRig struct {
	r     *testsupport.Redis
	store *saletest.Sales
	topic string
	group string // the order-writer's, whose progress the relay follows
	k     *testsupport.Kafka
	pub   *broker.OrderPublisher
	svc   *order.Service
}

// newRelayRig is a warmed voucher whose orders are never published.
func newRelayRig(t *testing.T, stock int64) (*relayRig, int64) {
	k := testsupport.MustKafka(t)
	rig := &relayRig{k: k, topic: k.MustTopic(t, 1), group: testsupport.Group(t)}
	var voucher int64
	rig.r = testsupport.MustRedis(t)
	rig.store = saletest.New(rig.r.Client, rig.r.Prefix)
	voucher = 1 + rand.Int64N(1<<40)
	if err := rig.store.Gate.Warm(context.Background(), voucher, stock, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	rig.pub = broker.NewOrderPublisher(broker.NewProducer(k.Brokers, rig.topic, 0), 5*time.Second)
	t.Cleanup(func() { _ = rig.pub.Close() })
	rig.svc = &order.Service{Gate: rig.store.Gate, IDs: idgen.New(rig.r.Client, rig.r.Key("order"), 100), Publisher: failingPublisher{},
		Logger: slog.New(slog.DiscardHandler)}
	return rig, voucher
}

func (rig *relayRig) relay(age time.Duration) *relay.Relay {
	return &relay.Relay{Store: rig.store.Outbox, Transfers: rig.store.Gate, Publisher: rig.pub, Age: age, Interval: time.Hour, Batch: 100,
		Backlog: &broker.Progress{Brokers: rig.k.Brokers, Group: rig.group, Topic: rig.topic},
		Locks:   lock.New(rig.r.Client, rig.r.Prefix), LeaseTTL: time.Second, Logger: slog.New(slog.DiscardHandler)}
}

// aheadClock is Redis's clock moved on by what the test says has passed:
// a reservation gets old without the test sleeping through Age.
type aheadClock struct {
	rdb interface {
		Time(context.Context) *redis.TimeCmd
	}
	ahead atomic.Int64
}

func (c *aheadClock) now(ctx context.Context) (time.Time, error) {
	t, err := c.rdb.Time(ctx).Result()
	return t.Add(time.Duration(c.ahead.Load())), err
}

func (c *aheadClock) pass(d time.Duration) { c.ahead.Add(int64(d)) }

// withClock gives relay a clock the test moves on.
func (rig *relayRig) withClock(relay *relay.Relay) *aheadClock {
	c := &aheadClock{rdb: rig.r.Client}
	relay.Clock = c.now
	return c
}

// The API takes the unit and the reservation but never publishes (it died,
// or the publish failed): the relay leaves a fresh reservation alone and
// publishes it, as the event the API would have sent, once the writer has
// consumed everything published until Age after its acceptance (here:
// nothing was published at all).
func TestRelayPublishesAnUnpublishedOrder(t *testing.T) {
	rig, voucher := newRelayRig(t, 3)
	ctx := context.Background()
	orderID, err := rig.svc.Place(ctx, 42, voucher)
	e, ok := apperr.As(err)
	if !errors.Is(err, order.ErrNotPublished) || orderID == 0 || !ok || e.Data == nil {
		t.Fatalf("order with a failing publisher: %d, %v; want ErrNotPublished carrying the id", orderID, err)
	}
	relay := rig.relay(time.Second)
	clock := rig.withClock(relay)
	// The first scan takes a baseline; the second finds the writer past it,
	// but the baseline came less than Age after the acceptance.
	for range 2 {
		if n, err := relay.Scan(ctx); err != nil || n != 0 {
			t.Fatalf("relay on a fresh reservation: %d, %v; want it left alone", n, err)
		}
		clock.pass(relay.Age + 100*time.Millisecond)
	}
	if n, err := relay.Scan(ctx); err != nil || n != 1 {
		t.Fatalf("relay: %d, %v; want 1 republished", n, err)
	}
	reader := kafka.NewReader(kafka.ReaderConfig{Brokers: rig.k.Brokers, Topic: rig.topic, Partition: 0, MaxWait: 100 * time.Millisecond})
	defer reader.Close()
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	m, err := reader.ReadMessage(rctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := broker.DecodeOrder(m.Value)
	if err != nil || got.OrderID != orderID || got.UserID != 42 || got.VoucherID != voucher {
		t.Fatalf("relayed %+v (%v), want order %d of user 42", got, err, orderID)
	}
	st, ok, err := rig.store.Records.FindInSales(ctx, orderID)
	if err != nil || !ok || st.Status != order.StatusPending || st.UserID != got.UserID || st.VoucherID != got.VoucherID ||
		st.CreateTime.UnixMilli() != got.AcceptedAt {
		t.Fatalf("reservation after the relay: %+v %v %v; want it kept, pending, until the writer confirms %+v", st, ok, err, got)
	}
}

// A backlog larger than the relay's batch is republished in one scan.
func TestRelayDrainsMoreThanABatch(t *testing.T) {
	rig, voucher := newRelayRig(t, 1000)
	ctx := context.Background()
	for u := range int64(250) {
		if _, err := rig.svc.Place(ctx, u+1, voucher); !errors.Is(err, order.ErrNotPublished) {
			t.Fatalf("order with a failing publisher: %v", err)
		}
	}
	const age = 2 * time.Second
	relay := rig.relay(age)
	rig.withClock(relay).pass(age + 100*time.Millisecond)
	if n, err := relay.Scan(ctx); err != nil || n != 0 {
		t.Fatalf("the first scan (a baseline) republished %d (%v)", n, err)
	}
	if n, err := relay.Scan(ctx); err != nil || n != 250 {
		t.Fatalf("one scan republished %d (%v), want all 250", n, err)
	}
	// The 250 events now wait for the writer (none runs here): nothing is
	// republished until it has consumed them.
	if n, err := relay.Scan(ctx); err != nil || n != 0 {
		t.Fatalf("a scan while the writer is behind republished %d (%v), want 0", n, err)
	}
}

// Events published but not yet consumed are a backlog, not lost orders:
// the relay republishes nothing while the writer is behind, however old the
// reservations. Once the writer has consumed them, what is still pending
// (its confirmation failed, say) is republished.
func TestRelayLeavesTheWritersBacklogAlone(t *testing.T) {
	rig, voucher := newRelayRig(t, 100)
	rig.svc.Publisher = rig.pub
	ctx := context.Background()
	for u := range int64(20) {
		if _, err := rig.svc.Place(ctx, u+1, voucher); err != nil {
			t.Fatal(err)
		}
	}
	relay := rig.relay(200 * time.Millisecond)
	clock := rig.withClock(relay)
	clock.pass(relay.Age)
	for range 4 {
		if n, err := relay.Scan(ctx); err != nil || n != 0 {
			t.Fatalf("relay with 20 events queued ahead of the writer: republished %d (%v), want 0", n, err)
		}
		clock.pass(relay.Age)
	}
	reader := kafka.NewReader(kafka.ReaderConfig{Brokers: rig.k.Brokers, Topic: rig.topic, GroupID: rig.group, MaxWait: 100 * time.Millisecond})
	defer reader.Close()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for range 20 {
		m, err := reader.FetchMessage(rctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := reader.CommitMessages(rctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := relay.Scan(ctx); err != nil || n != 20 {
		t.Fatalf("relay after the writer consumed the 20 events without confirming them: republished %d (%v), want 20", n, err)
	}
}

// Every order-writer runs a relay; one works at a time, and another takes
// over when it stops.
func TestOneRelayWorksAtATime(t *testing.T) {
	rig, voucher := newRelayRig(t, 100)
	ctx := context.Background()
	var counts [2]atomic.Int64
	var scans [2]*countingBacklog
	var cancels [2]context.CancelFunc
	var wg sync.WaitGroup
	for i := range 2 {
		r := rig.relay(100 * time.Millisecond)
		r.Interval = 50 * time.Millisecond
		r.Relayed = func(n int) { counts[i].Add(int64(n)) }
		scans[i] = &countingBacklog{Backlog: r.Backlog}
		r.Backlog = scans[i]
		rctx, cancel := context.WithCancel(ctx)
		cancels[i] = cancel
		wg.Go(func() { _ = r.Run(rctx) })
	}
	defer func() {
		cancels[0]()
		cancels[1]()
		wg.Wait()
	}()
	rig.settle(t)
	if _, err := rig.svc.Place(ctx, 1, voucher); !errors.Is(err, order.ErrNotPublished) {
		t.Fatal(err)
	}
	holder := waitRelayed(t, &counts, 1)
	// Five more scans by the holder: the other relay has had as many
	// intervals to work, and must have done nothing.
	after := scans[holder].calls.Load()
	testsupport.Wait(t, 20*time.Second, "five more scans by the lease holder", func() bool { return scans[holder].calls.Load() >= after+5 })
	if total := counts[0].Load() + counts[1].Load(); total != 1 || scans[1-holder].calls.Load() != 0 {
		t.Fatalf("%d republished by two relays for one lost order, want 1; the other relay scanned %d times, want 0", total, scans[1-holder].calls.Load())
	}
	cancels[holder]()
	if _, err := rig.svc.Place(ctx, 2, voucher); !errors.Is(err, order.ErrNotPublished) {
		t.Fatal(err)
	}
	testsupport.Wait(t, 20*time.Second, "a relay taking over when the lease holder stopped", func() bool { return counts[1-holder].Load() > 0 })
}

// countingBacklog counts a relay's scans: each asks the topic's ends (a
// baseline) or how far the writer has read.
type countingBacklog struct {
	relay.Backlog
	calls atomic.Int64
}

func (b *countingBacklog) Ends(ctx context.Context) (map[int]int64, error) {
	b.calls.Add(1)
	return b.Backlog.Ends(ctx)
}

func (b *countingBacklog) Reached(ctx context.Context, ends map[int]int64) (bool, error) {
	b.calls.Add(1)
	return b.Backlog.Reached(ctx, ends)
}

// settle consumes the orders topic as the order-writer's group, confirming
// each order's reservation, until the test ends.
func (rig *relayRig) settle(t *testing.T) {
	reader := kafka.NewReader(kafka.ReaderConfig{Brokers: rig.k.Brokers, Topic: rig.topic, GroupID: rig.group, MaxWait: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
		reader.Close()
	})
	go func() {
		defer close(done)
		for {
			m, err := reader.FetchMessage(ctx)
			if err != nil {
				return
			}
			e, err := broker.DecodeOrder(m.Value)
			if err != nil {
				t.Error(err)
				return
			}
			if err := rig.store.Confirm(ctx, []order.Event{e}); err != nil || reader.CommitMessages(ctx, m) != nil {
				return
			}
		}
	}()
}

// waitRelayed waits until the relays have republished want in all and
// returns which relay did.
func waitRelayed(t *testing.T, counts *[2]atomic.Int64, want int64) int {
	t.Helper()
	if !testsupport.Poll(20*time.Second, func() bool { return counts[0].Load()+counts[1].Load() >= want }) {
		t.Fatalf("relays republished %d, %d; want %d", counts[0].Load(), counts[1].Load(), want)
	}
	if counts[0].Load() > 0 {
		return 0
	}
	return 1
}

// Sale keys have no expiry while the sale runs (an eviction policy that
// takes only keys with one cannot touch them); once a sale has ended and
// every order is settled the relay gives them one and scans it no more. A
// change to the sale brings it back.
func TestRelayRetiresEndedSales(t *testing.T) {
	rig, live := newRelayRig(t, 5)
	ctx := context.Background()
	warm := func(begin, end time.Time) int64 {
		v := 1 + rand.Int64N(1<<40)
		if err := rig.store.Gate.Warm(ctx, v, 5, begin, end); err != nil {
			t.Fatal(err)
		}
		return v
	}
	now := time.Now()
	ended := warm(now.Add(-time.Hour), now.Add(-time.Minute))
	endedPending := warm(now.Add(-time.Hour), now.Add(time.Hour))
	if _, err := rig.svc.Place(ctx, 1, endedPending); !errors.Is(err, order.ErrNotPublished) {
		t.Fatal(err)
	}
	if _, err := rig.svc.Place(ctx, 1, live); !errors.Is(err, order.ErrNotPublished) {
		t.Fatal(err)
	}
	// Its order taken, the sale ends (an admin closes it).
	if _, err := rig.store.Gate.Adjust(ctx, endedPending, 0, time.Time{}, now.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	relay := rig.relay(time.Hour)
	relay.Keep = time.Hour
	if _, err := relay.Scan(ctx); err != nil {
		t.Fatal(err)
	}
	expiry := func(v int64) time.Duration { return rig.r.Client.PTTL(ctx, rig.store.KeysOf(v).Voucher).Val() }
	active := func(v int64) bool {
		return rig.r.Client.SIsMember(ctx, rig.store.ActiveVouchers(), strconv.FormatInt(v, 10)).Val()
	}
	if ttl := expiry(ended); ttl <= 0 || ttl > time.Hour || active(ended) {
		t.Fatalf("ended, settled sale: expiry %v, active %v; want an expiry of up to an hour, and not scanned", ttl, active(ended))
	}
	for _, v := range []int64{live, endedPending} {
		k := rig.store.KeysOf(v)
		for _, key := range []string{k.Voucher, k.Buyers, k.Pending, k.PendingAt} {
			if ttl := rig.r.Client.PTTL(ctx, key).Val(); ttl != -1 || !active(v) {
				t.Fatalf("voucher %d (on sale, or with an order pending): %s expires in %v, active %v; want no expiry and scanned", v, key, ttl, active(v))
			}
		}
	}
	if _, err := rig.store.Gate.Adjust(ctx, ended, 0, time.Time{}, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ttl := expiry(ended); ttl != -1 || !active(ended) {
		t.Fatalf("a retired sale extended: expiry %v, active %v; want it live again", ttl, active(ended))
	}
}

// The relay scans every bucket of a sale in three: the orders never
// published, whichever bucket their buyers live in, are republished in one
// scan; a transfer whose mover stopped between its two steps is finished by
// the same scan once it is older than Age, and its units sell.
func TestRelayScansEveryBucket(t *testing.T) {
	const n, stock, buyers = 3, 300, 250
	rig, _ := newRelayRig(t, 1)
	ctx := context.Background()
	voucher := 1 + rand.Int64N(1<<40)
	if err := rig.store.Gate.WarmBuckets(ctx, voucher, stock, n, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	homes := map[int]int{}
	for u := range int64(buyers) {
		if _, err := rig.svc.Place(ctx, u+1, voucher); !errors.Is(err, order.ErrNotPublished) {
			t.Fatalf("order with a failing publisher: %v", err)
		}
		homes[salestate.Home(u+1, n)]++
	}
	if len(homes) != n {
		t.Fatalf("the buyers live in %d buckets, want all %d", len(homes), n)
	}
	// A transfer to bucket 1 cut half way.
	cutTransfer(t, rig, voucher, n, 0, 1, 5)
	before, err := rig.store.Totals(ctx, voucher)
	if err != nil || before.Transfers != 1 {
		t.Fatalf("totals %+v (%v), want the one cut transfer", before, err)
	}

	const age = 2 * time.Second
	relay := rig.relay(age)
	rig.withClock(relay).pass(age + 100*time.Millisecond)
	if n, err := relay.Scan(ctx); err != nil || n != 0 {
		t.Fatalf("the first scan (a baseline) republished %d (%v)", n, err)
	}
	republished := 0
	if got, err := relay.Scan(ctx); err != nil {
		t.Fatal(err)
	} else {
		republished = got
	}
	after, err := rig.store.Totals(ctx, voucher)
	if err != nil {
		t.Fatal(err)
	}
	if republished < buyers || after.Transfers != 0 || after.Stock != before.Net {
		t.Fatalf("republished %d of at least %d; after the scan %+v, before %+v: want the transfer finished, its units in stock",
			republished, buyers, after, before)
	}
}

// One sale's bucket that cannot be read (its master away; here its keys
// of the wrong type) stops no other sale's relay: the unpublished order of
// another voucher is republished by the same scan, the readable buckets'
// cut transfer finished, and the scan reports the bucket it could not read.
func TestRelayGoesOnPastAnUnreadableBucket(t *testing.T) {
	const n = 3
	rig, other := newRelayRig(t, 3)
	ctx := context.Background()
	if _, err := rig.svc.Place(ctx, 42, other); !errors.Is(err, order.ErrNotPublished) {
		t.Fatalf("order with a failing publisher: %v", err)
	}
	voucher := 1 + rand.Int64N(1<<40)
	if err := rig.store.Gate.WarmBuckets(ctx, voucher, 30, n, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// Bucket 1's units sold, and a transfer of 5 from bucket 0 to it cut
	// half way.
	for i, u := range saletest.HomedIn(n, 1, 10) {
		if d, err := rig.store.Gate.Try(ctx, voucher, u, int64(i+1)); err != nil || d.Err != nil {
			t.Fatal(d.Err, err)
		}
	}
	cutTransfer(t, rig, voucher, n, 0, 1, 5)
	donor := salestate.BucketKeys(rig.r.Prefix, voucher, n, 0)
	if x := rig.r.Client.HLen(ctx, donor.Transfers).Val(); x != 1 {
		t.Fatalf("bucket 0 records %d transfers, want the cut one", x)
	}
	broken := salestate.BucketKeys(rig.r.Prefix, voucher, n, 2)
	for _, k := range []string{broken.Transfers, broken.PendingAt} {
		if err := rig.r.Client.Set(ctx, k, "unreadable", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	const age = 2 * time.Second
	relay := rig.relay(age)
	rig.withClock(relay).pass(age + 100*time.Millisecond)
	_, _ = relay.Scan(ctx) // the baseline
	readable := rig.r.Client.HLen(ctx, donor.Pending).Val() + rig.r.Client.HLen(ctx, salestate.BucketKeys(rig.r.Prefix, voucher, n, 1).Pending).Val()
	republished, err := relay.Scan(ctx)
	if want := 1 + int(readable); republished != want {
		t.Fatalf("republished %d (%v), want %d: the other voucher's order and the readable buckets' %d", republished, err, want, readable)
	}
	if err == nil || !strings.Contains(err.Error(), "bucket 2") {
		t.Fatalf("the scan's error %v, want it to name the unreadable bucket", err)
	}
	receiver := salestate.BucketKeys(rig.r.Prefix, voucher, n, 1)
	if x, stock := rig.r.Client.HLen(ctx, donor.Transfers).Val(), rig.r.Client.HGet(ctx, receiver.Voucher, salestate.FieldStock).Val(); x != 0 || stock != "5" {
		t.Fatalf("after the scan bucket 0 records %d transfers and bucket 1 holds %s units; want the transfer finished, its 5 units there", x, stock)
	}
}

// cutTransfer is what a mover that stopped between its two steps leaves:
// units of voucher's bucket from taken (bucket_take.lua, run as the gate
// runs it, on the bucket's keys in the sale prelude's order) and never
// deposited in bucket to.
func cutTransfer(t *testing.T, rig *relayRig, voucher int64, n, from, to int, units int64) {
	t.Helper()
	k := salestate.BucketKeys(rig.r.Prefix, voucher, n, from)
	taken, err := lua.BucketTake.Run(context.Background(), rig.r.Client, k.List(), "cut-"+strconv.Itoa(from), to, units, "").Int64()
	if err != nil || taken != units {
		t.Fatalf("the cut transfer's take: %d units (%v), want %d", taken, err, units)
	}
}

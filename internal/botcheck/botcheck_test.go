package botcheck_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/botcheck"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
	"github.com/seckill/seckill/internal/voucher"
)

// clock is a test's time, moved by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	r      *testsupport.Redis
	vs     *voucher.Vouchers
	modes  voucher.BotCheckModes
	gate   *saletest.Sales
	clock  *clock
	stores []*botcheck.Store
}

// store is an api instance's view of the bot checks, on the shared Redis
// and MySQL, on the test's clock.
func (f *fixture) store(t *testing.T) *botcheck.Store {
	t.Helper()
	s := botcheck.New(f.r.Client, f.r.Prefix, f.modes, f.gate.Records, botcheck.DefaultConfig, nil)
	s.Now = f.clock.Now
	return s
}

func newFixture(t *testing.T) *fixture {
	r, m := testsupport.MustRedis(t), testsupport.MustMySQL(t)
	f := &fixture{r: r, modes: voucher.BotCheckModes{DB: m.DB}, gate: saletest.New(r.Client, r.Prefix), clock: &clock{now: time.Now()}}
	f.vs = &voucher.Vouchers{DB: m.DB, Sale: f.gate.Gate, BotChecks: f.store(t)}
	return f
}

func (f *fixture) sale(t *testing.T, check string, begin, end time.Time) int64 {
	t.Helper()
	stock := int64(10)
	id, err := f.vs.Create(context.Background(), voucher.Voucher{ShopID: 1, Title: "bots", Type: voucher.TypeSeckill,
		Stock: &stock, BeginTime: &begin, EndTime: &end, BotCheck: check}, "")
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// A path is good for its lifetime, to the millisecond, and no longer (by
// the injected clock); the sale's window decides when paths are issued, by
// the gate's clock: the test waits for the real opening and end.
func TestPathLifetimeAndWindow(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	begin := time.Now().Add(time.Second)
	id := f.sale(t, "path", begin, begin.Add(1500*time.Millisecond))
	// Issued on a clock that moves (an instance reads the window again a
	// second after it last did, by its own clock), checked on the test's.
	s := f.store(t)
	s.Now = time.Now
	if _, _, err := s.IssuePath(ctx, 7, id); !errors.Is(err, order.ErrNotStarted) {
		t.Fatalf("a path before the opening: %v; want not started", err)
	}
	var path string
	var expires time.Time
	testsupport.Wait(t, 10*time.Second, "a path at the opening", func() bool {
		var err error
		path, expires, err = s.IssuePath(ctx, 7, id)
		return err == nil
	})
	if early := begin.Sub(time.Now()); early > 50*time.Millisecond {
		t.Fatalf("a path issued %v before the opening", early)
	}
	if lives := time.Until(expires); lives > botcheck.DefaultConfig.PathTTL || lives < botcheck.DefaultConfig.PathTTL-time.Second {
		t.Fatalf("a path issued now expires in %v, want %v", lives, botcheck.DefaultConfig.PathTTL)
	}
	f.clock.now = expires.Add(-time.Millisecond)
	s.Now = f.clock.Now
	if err := s.CheckOrder(ctx, 7, id, path); err != nil {
		t.Fatalf("a path in its last millisecond: %v", err)
	}
	f.clock.add(time.Millisecond)
	if err := s.CheckOrder(ctx, 7, id, path); !errors.Is(err, botcheck.ErrPathExpired) {
		t.Fatalf("a path at its expiry: %v; want expired", err)
	}
	s.Now = time.Now
	testsupport.Wait(t, 10*time.Second, "no path after the end", func() bool {
		_, _, err := s.IssuePath(ctx, 8, id)
		return errors.Is(err, order.ErrEnded)
	})
}

// An api whose clock runs ahead of the gate's issues no path and no
// challenge before the gate opens; one whose clock runs behind issues
// them once it has: the window is compared with the clock of the Redis
// server that holds the sale.
func TestTheGatesClockDecidesTheWindow(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	real := time.Now()
	soon := f.sale(t, "path", real.Add(30*time.Second), real.Add(time.Hour))
	soonChallenge := f.sale(t, "challenge", real.Add(30*time.Second), real.Add(time.Hour))
	open := f.sale(t, "path", real.Add(-time.Second), real.Add(time.Hour))
	ahead := f.store(t)
	ahead.Now = func() time.Time { return time.Now().Add(time.Minute) }
	if _, _, err := ahead.IssuePath(ctx, 7, soon); !errors.Is(err, order.ErrNotStarted) {
		t.Fatalf("a path from an api a minute ahead, 30 s before the opening: %v; want not started", err)
	}
	if _, err := ahead.NewChallenge(ctx, 7, soonChallenge); !errors.Is(err, order.ErrNotStarted) {
		t.Fatalf("a challenge from an api a minute ahead, 30 s before the opening: %v; want not started", err)
	}
	behind := f.store(t)
	behind.Now = func() time.Time { return time.Now().Add(-time.Minute) }
	if _, _, err := behind.IssuePath(ctx, 7, open); err != nil {
		t.Fatalf("a path from an api a minute behind, on an open sale: %v", err)
	}
}

// The mode is read from MySQL when Redis lost it (a failover, an
// expiry), written back, and then remembered: a path sale never turns
// into one without a defence.
func TestModeOutlivesRedis(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := f.clock.Now()
	id := f.sale(t, "path", now.Add(-time.Minute), now.Add(time.Hour))
	key := f.r.Key("botcheck:mode:{" + strconv.FormatInt(id, 10) + "}")
	if got := f.r.Client.Get(ctx, key).Val(); got != "path" {
		t.Fatalf("the mode in Redis after the creation: %q", got)
	}
	f.r.Client.Del(ctx, key)
	s := f.store(t)
	if err := s.CheckOrder(ctx, 7, id, ""); !errors.Is(err, botcheck.ErrNoPath) {
		t.Fatalf("an order without a path, the mode gone from Redis: %v; want refused", err)
	}
	if got := f.r.Client.Get(ctx, key).Val(); got != "path" {
		t.Fatalf("the mode in Redis after MySQL was read: %q; want written back", got)
	}
	if err := s.CheckOrder(ctx, 7, 987654321, ""); !errors.Is(err, order.ErrUnknownVoucher) {
		t.Fatalf("an order of a voucher with no sale: %v; want the gate's answer, no such voucher", err)
	}
}

// The paths' keys live in Redis by default: every instance uses the
// first one made, and when Redis lost them and another instance made a
// new one, an instance holding the old ring follows at the first path
// under a key id it does not hold.
func TestInstancesShareThePathKey(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := f.clock.Now()
	id := f.sale(t, "path", now.Add(-time.Minute), now.Add(time.Hour))
	a, b := f.store(t), f.store(t)
	path, _, err := a.IssuePath(ctx, 7, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.CheckOrder(ctx, 7, id, path); err != nil {
		t.Fatalf("a path issued by another instance: %v", err)
	}
	rotate(t, f)
	c := f.store(t)
	path, _, err = c.IssuePath(ctx, 8, id)
	if err != nil {
		t.Fatal(err)
	}
	f.clock.add(200 * time.Millisecond)
	if err := a.CheckOrder(ctx, 8, id, path); err != nil {
		t.Fatalf("a path under a key made since, at an instance holding the ring before it: %v", err)
	}
	if err := a.CheckOrder(ctx, 9, id, path); !errors.Is(err, botcheck.ErrPathInvalid) {
		t.Fatalf("another buyer's path: %v; want invalid", err)
	}
	// Redis lost the ring, and another instance made it again: its first
	// key has an id a holds for the lost key, and a follows all the same.
	if err := f.r.Client.Del(ctx, f.r.Key("botcheck:keys")).Err(); err != nil {
		t.Fatal(err)
	}
	d := f.store(t)
	path, _, err = d.IssuePath(ctx, 10, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := pathKeyID(t, path); got != 1 {
		t.Fatalf("the remade ring's first key has id %d; the test wants the id a holds for another key", got)
	}
	f.clock.add(200 * time.Millisecond)
	if err := a.CheckOrder(ctx, 10, id, path); err != nil {
		t.Fatalf("a path under a remade key whose id an instance holds for a lost one: %v", err)
	}
}

// A crowd's paths under a key made since an instance read its ring all
// pass, however many arrive while it reads the ring again.
func TestABurstUnderANewKeyPasses(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := f.clock.Now()
	id := f.sale(t, "path", now.Add(-time.Minute), now.Add(time.Hour))
	a := f.store(t)
	if _, _, err := a.IssuePath(ctx, 1, id); err != nil {
		t.Fatal(err)
	}
	rotate(t, f)
	b := f.store(t)
	const buyers = 64
	paths := make([]string, buyers)
	for i := range paths {
		p, _, err := b.IssuePath(ctx, int64(100+i), id)
		if err != nil {
			t.Fatal(err)
		}
		paths[i] = p
	}
	f.clock.add(200 * time.Millisecond)
	var wg sync.WaitGroup
	errs := make([]error, buyers)
	for i := range paths {
		wg.Go(func() { errs[i] = a.CheckOrder(ctx, int64(100+i), id, paths[i]) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("buyer %d of a burst under the new key: %v", i, err)
		}
	}
}

func rotate(t *testing.T, f *fixture) botcheck.Ring {
	t.Helper()
	ring, err := botcheck.NewRedisKeys(f.r.Client, f.r.Prefix).Rotate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

// forge makes a path the way the server does, under key k: what a holder
// of a leaked key could make.
func forge(k botcheck.Key, userID, voucherID int64, expiry time.Time) string {
	var msg [25]byte
	msg[0] = k.ID
	binary.BigEndian.PutUint64(msg[1:], uint64(userID))
	binary.BigEndian.PutUint64(msg[9:], uint64(voucherID))
	binary.BigEndian.PutUint64(msg[17:], uint64(expiry.UnixMilli()))
	h := hmac.New(sha256.New, k.Secret)
	h.Write([]byte("seckill order path\x00"))
	h.Write(msg[:])
	raw := append(binary.BigEndian.AppendUint64([]byte{2, k.ID}, uint64(expiry.UnixMilli())), h.Sum(nil)[:16]...)
	return base64.RawURLEncoding.EncodeToString(raw)
}

// pathKeyID is the id of the key a path names.
func pathKeyID(t *testing.T, path string) byte {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(path)
	if err != nil || len(raw) < 2 {
		t.Fatalf("path %q: %v", path, err)
	}
	return raw[1]
}

// A path that claims to live longer than a path lives is refused, even
// under the deployment's key (a leaked one forges paths for any buyer,
// sale and lifetime): its expiry is capped at issue time + PathTTL.
func TestAPathForgedToLiveLongerIsRefused(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := f.clock.Now()
	id := f.sale(t, "path", now.Add(-time.Minute), now.Add(time.Hour))
	s := f.store(t)
	if _, _, err := s.IssuePath(ctx, 7, id); err != nil {
		t.Fatal(err)
	}
	ring, err := botcheck.NewRedisKeys(f.r.Client, f.r.Prefix).Ring(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckOrder(ctx, 7, id, forge(ring.Current, 7, id, now.Add(botcheck.DefaultConfig.PathTTL))); err != nil {
		t.Fatalf("the forger's path of a path's lifetime (the format is what the test claims): %v", err)
	}
	if err := s.CheckOrder(ctx, 7, id, forge(ring.Current, 7, id, now.AddDate(10, 0, 0))); !errors.Is(err, botcheck.ErrPathInvalid) {
		t.Fatalf("a path forged to expire in ten years: %v; want invalid", err)
	}
}

// After a rotation the previous key still checks the paths issued under
// it, until they expire; a second rotation drops it. New paths are made
// under the new key.
func TestARotationKeepsThePreviousKeysPaths(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := f.clock.Now()
	id := f.sale(t, "path", now.Add(-time.Minute), now.Add(time.Hour))
	a, b := f.store(t), f.store(t)
	old, _, err := a.IssuePath(ctx, 7, id)
	if err != nil {
		t.Fatal(err)
	}
	older, _, err := a.IssuePath(ctx, 8, id)
	if err != nil {
		t.Fatal(err)
	}
	ring := rotate(t, f)
	f.clock.add(time.Second)
	fresh, _, err := a.IssuePath(ctx, 9, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := pathKeyID(t, fresh); got != ring.Current.ID || got == pathKeyID(t, old) {
		t.Fatalf("a path issued after the rotation names key %d; want the new key %d (the old was %d)", got, ring.Current.ID, pathKeyID(t, old))
	}
	for _, s := range []*botcheck.Store{a, b} {
		if err := s.CheckOrder(ctx, 7, id, old); err != nil {
			t.Fatalf("a path under the previous key, before its expiry: %v", err)
		}
		if err := s.CheckOrder(ctx, 9, id, fresh); err != nil {
			t.Fatalf("a path under the new key: %v", err)
		}
	}
	f.clock.add(botcheck.DefaultConfig.PathTTL - time.Second)
	if err := b.CheckOrder(ctx, 7, id, old); !errors.Is(err, botcheck.ErrPathExpired) {
		t.Fatalf("a path under the previous key, at its expiry: %v; want expired", err)
	}
	// A forger holding the previous key gets nothing past a path's
	// lifetime either; once a second rotation drops the key, nothing.
	f.clock.add(-botcheck.DefaultConfig.PathTTL + time.Second)
	rotate(t, f)
	f.clock.add(time.Second)
	for _, s := range []*botcheck.Store{a, b} {
		if err := s.CheckOrder(ctx, 8, id, older); !errors.Is(err, botcheck.ErrPathInvalid) {
			t.Fatalf("a path under a key two rotations back: %v; want invalid", err)
		}
		if err := s.CheckOrder(ctx, 9, id, fresh); err != nil {
			t.Fatalf("a path under the key now previous: %v", err)
		}
	}
}

// A key deleted from Redis is refused by every instance within a second,
// including those that hold it.
func TestADeletedKeyIsRefusedWithinASecond(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := f.clock.Now()
	id := f.sale(t, "path", now.Add(-time.Minute), now.Add(time.Hour))
	a, b := f.store(t), f.store(t)
	path, _, err := a.IssuePath(ctx, 7, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*botcheck.Store{a, b} {
		if err := s.CheckOrder(ctx, 7, id, path); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.r.Client.Del(ctx, f.r.Key("botcheck:keys")).Err(); err != nil {
		t.Fatal(err)
	}
	f.clock.add(time.Second)
	for i, s := range []*botcheck.Store{a, b} {
		if err := s.CheckOrder(ctx, 7, id, path); !errors.Is(err, botcheck.ErrPathInvalid) {
			t.Fatalf("instance %d, a second after its key was deleted: %v; want invalid", i, err)
		}
	}
	again, _, err := b.IssuePath(ctx, 7, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.CheckOrder(ctx, 7, id, again); err != nil {
		t.Fatalf("a path under the key made after the deletion: %v", err)
	}
}

// A challenge may be read aloud MaxReadings times (each reading is a WAV
// drawn on the api's CPU); past them the buyer asks for a new one, and
// the challenge can still be answered.
func TestReadingsCountAgainstTheChallenge(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := f.clock.Now()
	id := f.sale(t, "challenge", now.Add(-time.Minute), now.Add(time.Hour))
	s := f.store(t)
	p, err := s.NewChallenge(ctx, 7, id)
	if err != nil {
		t.Fatal(err)
	}
	for i := range botcheck.MaxReadings {
		if wav, err := s.Audio(ctx, 7, p.ID, "en"); err != nil || len(wav) == 0 {
			t.Fatalf("reading %d: %d bytes, %v", i+1, len(wav), err)
		}
	}
	if _, err := s.Audio(ctx, 7, p.ID, "zh"); !errors.Is(err, botcheck.ErrReadingsUsedUp) {
		t.Fatalf("reading %d: %v; want the readings used up", botcheck.MaxReadings+1, err)
	}
	if _, _, err := s.Solve(ctx, 7, id, p.ID, "000000000"); !errors.Is(err, botcheck.ErrWrongAnswer) {
		t.Fatalf("an answer after the readings: %v; want the challenge still live (answered wrong)", err)
	}
}

package binlog_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/binlog"
	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/schema"
	"github.com/seckill/seckill/internal/shop"
	"github.com/seckill/seckill/internal/testsupport"
)

type rig struct {
	m        *testsupport.MySQL
	r        *testsupport.Redis
	k        *testsupport.Kafka
	retry    string
	dlq      string
	posFile  string
	metrics  *binlog.Metrics
	registry *prometheus.Registry
	serverID uint32
}

func newRig(t *testing.T) *rig {
	g := &rig{m: testsupport.MustMySQL(t), r: testsupport.MustRedis(t), k: testsupport.MustKafka(t)}
	if err := schema.Seed(context.Background(), g.m.DB); err != nil {
		t.Fatal(err)
	}
	g.retry, g.dlq = g.k.MustTopic(t, 1), g.k.MustTopic(t, 1)
	g.posFile = filepath.Join(t.TempDir(), "position.json")
	g.registry = prometheus.NewRegistry()
	g.metrics = binlog.NewMetrics(g.registry)
	g.serverID = source(t, g.m).ServerID
	return g
}

// start runs an invalidator (deleting through rdb) until the returned
// stop, and returns once it is seen following the binlog.
func (g *rig) start(t *testing.T, rdb redis.UniversalClient) (stop func()) {
	stop = g.startNoWarmup(t, rdb)
	// Following once a change is seen.
	testsupport.Wait(t, 15*time.Second, "the invalidator following", func() bool {
		key := g.r.Key("cache:shop:{1}")
		g.r.Client.Set(context.Background(), key, "warm-up", 0)
		g.exec(t, "UPDATE tb_shop SET comments = comments + 1 WHERE id = 1")
		return g.gone(key, time.Second)
	})
	return stop
}

// changeShops caches a stale entry for each shop, then updates its row, and
// returns the keys that must go.
func (g *rig) changeShops(t *testing.T, ids ...int) []string {
	t.Helper()
	var keys []string
	for _, id := range ids {
		k := g.r.Key(fmt.Sprintf("cache:shop:{%d}", id))
		g.r.Client.Set(context.Background(), k, "stale", 0)
		g.exec(t, "UPDATE tb_shop SET sold = sold + 1 WHERE id = ?", id)
		keys = append(keys, k)
	}
	return keys
}

func (g *rig) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	if _, err := g.m.DB.Exec(q, args...); err != nil {
		t.Fatal(err)
	}
}

// gone polls until key is absent, up to within.
func (g *rig) gone(key string, within time.Duration) bool {
	return testsupport.Poll(within, func() bool { return g.r.Client.Exists(context.Background(), key).Val() == 0 })
}

// A plain SQL UPDATE (not through the API) removes the shop's key; the lag
// from the commit to the key's absence is measured over 100 updates.
func TestInvalidatorDeletesKeysOfChangedRows(t *testing.T) {
	g := newRig(t)
	g.start(t, g.r.Client)
	ctx := context.Background()
	var lags []time.Duration
	for i := range 100 {
		id := i%6 + 1
		key := g.r.Key(fmt.Sprintf("cache:shop:{%d}", id))
		g.r.Client.Set(ctx, key, "stale", 0)
		start := time.Now()
		g.exec(t, "UPDATE tb_shop SET sold = sold + 1 WHERE id = ?", id)
		if !g.gone(key, 5*time.Second) {
			t.Fatalf("update %d: %s still cached after 5s", i, key)
		}
		lags = append(lags, time.Since(start))
	}
	slices.Sort(lags)
	t.Logf("UPDATE tb_shop -> key gone: p50 %v, p99 %v, max %v over %d updates", lags[49], lags[98], lags[99], len(lags))

	cases := []struct {
		name, sql string
		keys      []string
	}{
		{"InsertShop", "INSERT INTO tb_shop (id, name, type_id) VALUES (100, 'new', 1)", []string{"cache:shop:{100}"}},
		{"DeleteShop", "DELETE FROM tb_shop WHERE id = 100", []string{"cache:shop:{100}"}},
		{"ShopType", "UPDATE tb_shop_type SET sort = sort + 1 WHERE id = 2", []string{"cache:shop-type"}},
	}
	// The insert's own delete must be done before the cases set their keys.
	warm := g.r.Key("cache:shop:{101}")
	g.r.Client.Set(ctx, warm, "stale", 0)
	g.exec(t, "INSERT INTO tb_shop (id, name, type_id) VALUES (101, 'warm', 1)")
	if !g.gone(warm, 5*time.Second) {
		t.Fatal("INSERT tb_shop: the shop still cached")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, k := range c.keys {
				g.r.Client.Set(ctx, g.r.Key(k), "stale", 0)
			}
			g.exec(t, c.sql)
			for _, k := range c.keys {
				if !g.gone(g.r.Key(k), 5*time.Second) {
					t.Fatalf("%s still cached", k)
				}
			}
		})
	}

	// DDL on a followed table does not stop the follower.
	g.exec(t, "ALTER TABLE tb_shop ADD COLUMN note VARCHAR(16) NULL")
	key := g.r.Key("cache:shop:{3}")
	g.r.Client.Set(ctx, key, "stale", 0)
	g.exec(t, "UPDATE tb_shop SET note = 'x' WHERE id = 3")
	if !g.gone(key, 5*time.Second) {
		t.Fatal("after an ALTER TABLE the follower no longer deletes")
	}
}

// following is the seckill_binlog_following gauge.
func (g *rig) following(t *testing.T) float64 {
	t.Helper()
	return g.metric(t, "seckill_binlog_following")
}

// metric is the value of an unlabelled gauge or counter.
func (g *rig) metric(t *testing.T, name string) float64 {
	t.Helper()
	families, err := g.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			m := f.GetMetric()[0]
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("%s is not registered", name)
	return 0
}

// Stopped, rows changed, started again: the changes made while it was down
// are handled, from the saved position. The following gauge says 1 while it
// follows, 0 once it stopped.
func TestInvalidatorResumesFromItsPosition(t *testing.T) {
	g := newRig(t)
	if f := g.following(t); f != 0 {
		t.Fatalf("following = %v before the start, want 0", f)
	}
	stop := g.start(t, g.r.Client)
	if f := g.following(t); f != 1 {
		t.Fatalf("following = %v while following, want 1", f)
	}
	stop()
	if f := g.following(t); f != 0 {
		t.Fatalf("following = %v after the stop, want 0", f)
	}
	raw, err := os.ReadFile(g.posFile)
	if err != nil {
		t.Fatalf("no position saved at shutdown: %v", err)
	}
	if savedGTID(t, g.posFile) == "" {
		t.Fatalf("position saved without a GTID set on a server that keeps them: %s", raw)
	}
	ctx := context.Background()
	keys := g.changeShops(t, 2, 3, 4, 5)
	time.Sleep(300 * time.Millisecond) // a window for what must not happen: the test is about the stopped invalidator deleting nothing
	for _, k := range keys {
		if g.r.Client.Exists(ctx, k).Val() == 0 {
			t.Fatal("a key vanished while the invalidator was stopped")
		}
	}
	g.start(t, g.r.Client)
	for _, k := range keys {
		if !g.gone(k, 5*time.Second) {
			t.Fatalf("%s: the change made while stopped was not handled after resuming from %s", k, raw)
		}
	}
}

// Redis unreachable while rows change: the deletes go to the retry topic;
// the retry consumer, with Redis reachable, deletes every key; nothing is
// dead-lettered.
func TestFailedDeletesAreRetried(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	// Warm up with the real Redis, so the follower is known to run.
	stop := g.start(t, g.r.Client)
	stop()
	dead := redis.NewClient(&redis.Options{Addr: testsupport.FreeAddr(t), DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer dead.Close()
	srcStop := g.startNoWarmup(t, dead)
	keys := g.changeShops(t, 1, 2, 3, 4, 5, 6)
	// Every failed delete reaches the retry topic, as the key with the
	// forwarded message's headers. (The resume sees the last transaction
	// handled again, the warm-up's if no other test wrote since: its
	// delete may come first.)
	waitRetried(t, g.k, g.retry, keys)
	srcStop()
	first := g.k.MustFirstMessage(t, g.retry)
	if string(first.Value) != keys[0] || broker.Attempt(first) != 1 || broker.Header(first, broker.HeaderTopic) != binlog.BinlogSource ||
		broker.Header(first, broker.HeaderError) == "" || broker.Header(first, broker.HeaderOffset) == "0" {
		t.Fatalf("retry message %q with headers %v, want key %s, attempt 1, from the binlog", first.Value, first.Headers, keys[0])
	}
	for _, k := range keys {
		if g.r.Client.Exists(ctx, k).Val() == 0 {
			t.Fatal("a key was deleted although Redis was unreachable for the invalidator")
		}
	}

	reader := kafka.NewReader(kafka.ReaderConfig{Brokers: g.k.Brokers, GroupID: testsupport.Group(t), Topic: g.retry, StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond})
	defer reader.Close()
	retryW, dlqW := broker.NewWriter(g.k.Brokers, g.retry), broker.NewWriter(g.k.Brokers, g.dlq)
	defer retryW.Close()
	defer dlqW.Close()
	r := &binlog.Retrier{Retry: &broker.Forwarder{Writer: retryW}, DLQ: &broker.Forwarder{Writer: dlqW}, Redis: g.r.Client, MaxAttempts: 5,
		DeleteTimeout: time.Second, Logger: slog.New(slog.DiscardHandler), Metrics: g.metrics}
	c := &broker.Consumer{Name: "retries", Reader: reader, Handle: r.Handle, Logger: slog.New(slog.DiscardHandler)}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	for _, k := range keys {
		if !g.gone(k, 15*time.Second) {
			t.Fatalf("%s not deleted by the retry consumer", k)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := lastOffset(t, g.k, g.dlq); n != 0 {
		t.Fatalf("%d keys dead-lettered", n)
	}
}

// startNoWarmup runs an invalidator until the returned stop (also run when
// the test ends).
func (g *rig) startNoWarmup(t *testing.T, rdb redis.UniversalClient) (stop func()) {
	src := source(t, g.m)
	src.ServerID = g.serverID
	w := broker.NewWriter(g.k.Brokers, g.retry)
	inv := &binlog.Invalidator{
		Source: src, Database: g.m.Database, Mapping: binlog.Mapping(shop.Keys{Prefix: g.r.Prefix}), Families: shop.Keys{Prefix: g.r.Prefix}.Patterns(),
		Redis: rdb, Retry: &broker.Forwarder{Writer: w}, Positions: &binlog.PositionFile{Path: g.posFile, Every: 100 * time.Millisecond},
		DeleteTimeout: 300 * time.Millisecond, Logger: slog.New(slog.DiscardHandler), Metrics: g.metrics,
		Shops: shop.NewFilter(rdb, nil, shop.Keys{Prefix: g.r.Prefix}, filterCapacity, slog.New(slog.DiscardHandler)),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- inv.Run(ctx) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("invalidator: %v", err)
			}
			w.Close()
		}
	}
	t.Cleanup(stop)
	return stop
}

// filterCapacity sizes the tests' filters of shop ids.
const filterCapacity = 1000

// A shop inserted with plain SQL joins the filter of shop ids, so the API
// does not answer "not found" for it.
func TestInsertedShopJoinsTheFilter(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	filter := shop.NewFilter(g.r.Client, g.m.DB, shop.Keys{Prefix: g.r.Prefix}, filterCapacity, slog.New(slog.DiscardHandler))
	if err := filter.Rebuild(ctx); err != nil {
		t.Fatal(err)
	}
	g.start(t, g.r.Client)
	if maybe, err := filter.MayContain(ctx, 500); err != nil || maybe {
		t.Fatalf("shop 500 before its insert: %v %v; want absent", maybe, err)
	}
	g.exec(t, "INSERT INTO tb_shop (id, name, type_id) VALUES (500, 'raw sql', 1)")
	testsupport.Wait(t, 5*time.Second, "shop 500, inserted with SQL, in the filter", func() bool {
		maybe, err := filter.MayContain(ctx, 500)
		if err != nil {
			t.Fatal(err)
		}
		return maybe
	})
}

// A saved position the server no longer has (error 1236): the families
// are flushed and the follower continues from the current position.
func TestPurgedPositionFlushesAndContinues(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	bogus := fmt.Sprintf(`{"flavor":%q,"name":"mysql-bin.999999","pos":4}`, g.m.Flavor)
	if err := os.WriteFile(g.posFile, []byte(bogus), 0o644); err != nil {
		t.Fatal(err)
	}
	cached := []string{g.r.Key("cache:shop:{4}"), g.r.Key("cache:shop-type"), g.r.Key("cache:shop:{9}")}
	for _, k := range cached {
		g.r.Client.Set(ctx, k, "stale", 0)
	}
	other := g.r.Key("login:token:{keep}")
	g.r.Client.Set(ctx, other, "x", 0)
	g.start(t, g.r.Client)
	for _, k := range cached {
		// The server's purged answer is believed the third time in a row.
		if !g.gone(k, 15*time.Second) {
			t.Fatalf("%s survived the flush after a purged position", k)
		}
	}
	if g.r.Client.Exists(ctx, other).Val() != 1 {
		t.Fatal("the flush deleted a key outside the cache families")
	}
	if n := g.metric(t, "seckill_binlog_positions_purged_total"); n != 1 {
		t.Fatalf("seckill_binlog_positions_purged_total = %v after one purged position, want 1", n)
	}
}

func lastOffset(t *testing.T, k *testsupport.Kafka, topic string) int64 {
	t.Helper()
	conn, err := kafka.DialLeader(context.Background(), "tcp", k.Brokers[0], topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	last, err := conn.ReadLastOffset()
	if err != nil {
		t.Fatal(err)
	}
	return last
}

// waitRetried waits until topic holds a message for each of keys.
func waitRetried(t *testing.T, k *testsupport.Kafka, topic string, keys []string) {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: k.Brokers, Topic: topic, Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	missing := map[string]bool{}
	for _, key := range keys {
		missing[key] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(missing) > 0 {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("the retry topic %s lacks %v: %v", topic, missing, err)
		}
		delete(missing, string(m.Value))
	}
}

// A saved position with a GTID set resumes by that set, whatever its file
// name says: after a failover the file and offset are another server's,
// and only the set names the same place. The file here is one this server
// never had; resumed by it, the follower would take the purged path and
// flush every cached shop, the unchanged one too.
func TestInvalidatorResumesByItsGTIDSet(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	var gtid string
	q := "SELECT @@GLOBAL.gtid_current_pos"
	if g.m.Flavor == "mysql" {
		q = "SELECT @@GLOBAL.gtid_executed"
	}
	if err := g.m.DB.QueryRowContext(ctx, q).Scan(&gtid); err != nil {
		t.Fatal(err)
	}
	if gtid == "" {
		t.Fatalf("%s is empty: the test server keeps no GTIDs", q)
	}
	saved := fmt.Sprintf(`{"flavor":%q,"name":"mysql-bin.999999","pos":4,"gtid":%q}`, g.m.Flavor, gtid)
	if err := os.WriteFile(g.posFile, []byte(saved), 0o644); err != nil {
		t.Fatal(err)
	}
	unchanged := g.r.Key("cache:shop:{9}")
	g.r.Client.Set(ctx, unchanged, "fresh", 0)
	keys := g.changeShops(t, 2, 3)
	stop := g.startNoWarmup(t, g.r.Client)
	for _, k := range keys {
		if !g.gone(k, 10*time.Second) {
			t.Fatalf("%s: the change after the saved GTID set %s was not handled", k, gtid)
		}
	}
	// A flush deletes the keys one by one: give it time to reach this one.
	if g.gone(unchanged, time.Second) {
		t.Fatal("an unchanged shop's key was deleted: the follower took the purged path instead of the GTID set")
	}
	stop()
	if now := savedGTID(t, g.posFile); now == "" || now == gtid {
		t.Fatalf("saved GTID set %q after handling two changes from %q: want a later set", now, gtid)
	}
}

// savedGTID is the GTID set of a position file.
func savedGTID(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var saved struct {
		GTID string `json:"gtid"`
	}
	if err := json.Unmarshal(raw, &saved); err != nil {
		t.Fatalf("position file %s: %v", raw, err)
	}
	return saved.GTID
}

// The position names its last transaction (its GTID and its GTID event's
// time), and a resume sees that transaction again first: the same one,
// the follower goes on (no flush); another one under the same GTID, as
// after a Galera bootstrap that discarded commits and gave their GTIDs to
// new transactions, the follower flushes the cached families, counts it,
// and goes on from the current position. Resumed after the GTID instead,
// it would have skipped the new transactions up to it without a word. The
// other history is made here by changing the saved time, which the server
// cannot be made to forget on a shared test server.
func TestResumingOnAnotherHistoryFlushes(t *testing.T) {
	for _, c := range []struct {
		name  string
		fork  bool
		flush bool
	}{
		{"the same history", false, false},
		{"another history under the same GTIDs", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newRig(t)
			ctx := context.Background()
			stop := g.start(t, g.r.Client)
			if k := g.changeShops(t, 2)[0]; !g.gone(k, 10*time.Second) {
				t.Fatalf("%s: the change was not handled", k)
			}
			stop()
			raw, err := os.ReadFile(g.posFile)
			if err != nil {
				t.Fatal(err)
			}
			var saved map[string]any
			if err := json.Unmarshal(raw, &saved); err != nil {
				t.Fatal(err)
			}
			if g.m.Flavor == "mariadb" && (saved["last"] == nil || saved["lastAt"] == nil) {
				t.Fatalf("the position names no last transaction: %s", raw)
			}
			// The check follows MariaDB's GTIDs (a Galera cluster's); on
			// MySQL no last transaction is saved and nothing is flushed.
			mariadb := g.m.Flavor == "mariadb"
			if c.fork && mariadb {
				saved["lastAt"] = saved["lastAt"].(float64) - 1000
				forked, _ := json.Marshal(saved)
				if err := os.WriteFile(g.posFile, forked, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			unchanged := g.r.Key("cache:shop:{9}")
			g.r.Client.Set(ctx, unchanged, "fresh", 0)
			keys := g.changeShops(t, 3)
			g.startNoWarmup(t, g.r.Client)
			if !g.gone(keys[0], 10*time.Second) {
				t.Fatalf("%s: the change after the saved position %s was not handled", keys[0], raw)
			}
			if c.flush && mariadb {
				if !g.gone(unchanged, 10*time.Second) {
					t.Fatal("an unchanged shop's cached entry survived a resume on another history: the follower did not flush")
				}
			} else if g.gone(unchanged, time.Second) {
				t.Fatal("an unchanged shop's cached entry was deleted: the follower flushed on its own history")
			}
			want := 0.0
			if c.fork && mariadb {
				want = 1
			}
			if n := g.metric(t, "seckill_binlog_histories_forked_total"); n != want {
				t.Fatalf("seckill_binlog_histories_forked_total = %v; want %v", n, want)
			}
			if n := g.metric(t, "seckill_binlog_positions_purged_total"); n != 0 {
				t.Fatalf("seckill_binlog_positions_purged_total = %v; want 0: a forked history is not a purged position", n)
			}
		})
	}
}

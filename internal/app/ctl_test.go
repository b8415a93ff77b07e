package app_test

import (
	"context"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/botcheck"
	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
)

// seckillctl check compares the vouchers on sale and says which Redis has
// lost; after a reconcile it finds nothing.
func TestCtlCheckThenReconcile(t *testing.T) {
	r, m, k := testsupport.MustRedis(t), testsupport.MustMySQL(t), testsupport.MustKafka(t)
	vars := map[string]string{"SECKILL_MYSQL_DSN": m.DSN, "SECKILL_KEY_PREFIX": r.Prefix,
		"SECKILL_KAFKA_BROKERS": strings.Join(k.Brokers, ","), "SECKILL_ORDERS_TOPIC": k.MustTopic(t, 1), "SECKILL_ORDER_GROUP": testsupport.Group(t)}
	maps.Copy(vars, r.Env())
	lookup := func(key string) (string, bool) { v, ok := vars[key]; return v, ok }
	m.MustSeedVoucher(t, 8, 5) // on sale in MySQL, never warmed
	m.MustSeedVoucher(t, 9, 5)
	if err := saletest.New(r.Client, r.Prefix).Gate.Warm(context.Background(), 9, 5, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}

	var out strings.Builder
	err := app.Ctl([]string{"check"}, lookup, &out)
	if err == nil || !strings.Contains(out.String(), "voucher 8: voucher_missing") || strings.Contains(out.String(), "voucher 9:") {
		t.Fatalf("check: %v\n%s\nwant voucher 8 missing and voucher 9 fine", err, out.String())
	}
	out.Reset()
	if err := app.Ctl([]string{"reconcile", "8"}, lookup, &out); err != nil {
		t.Fatalf("reconcile: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := app.Ctl([]string{"check"}, lookup, &out); err != nil || !strings.Contains(out.String(), "0 violations") {
		t.Fatalf("check after the reconcile: %v\n%s", err, out.String())
	}
	if err := app.Ctl([]string{"reconcile", "x"}, lookup, &out); err == nil {
		t.Fatal("reconcile of a malformed id went through")
	}
}

// seckillctl topics creates a list's topics, with their partitions, and
// leaves them as they are when run again; bad input gets a clear error.
func TestCtlTopics(t *testing.T) {
	k := testsupport.MustKafka(t)
	base := "t." + testsupport.Group(t)
	names := []string{base + ".a", base + ".b"}
	list := filepath.Join(t.TempDir(), "topics")
	if err := os.WriteFile(list, []byte("# the test's\n"+names[0]+":3\n"+names[1]+":1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = broker.DeleteTopics(ctx, k.Brokers, names...)
	})
	vars := map[string]string{"SECKILL_KAFKA_BROKERS": strings.Join(k.Brokers, ",")}
	lookup := func(key string) (string, bool) { v, ok := vars[key]; return v, ok }
	var out strings.Builder
	for run := range 2 {
		if err := app.Ctl([]string{"topics", list}, lookup, &out); err != nil {
			t.Fatalf("topics, run %d: %v", run+1, err)
		}
	}
	conn, err := kafka.Dial("tcp", k.Brokers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for name, want := range map[string]int{names[0]: 3, names[1]: 1} {
		parts, err := conn.ReadPartitions(name)
		if err != nil || len(parts) != want {
			t.Fatalf("topic %s: %d partitions (%v), want %d", name, len(parts), err, want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"topics", list, "0"}, "not a replication factor"},
		{[]string{"topics", filepath.Join(t.TempDir(), "none")}, "no such file"},
		{[]string{"topics", list, "9"}, "replication factor 9 needs 9 brokers"},
	} {
		if err := app.Ctl(c.args, lookup, &out); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
}

// With SECKILL_CTL_WAIT, migrate waits for a MySQL that answers late (a
// compose file starts them together), and says what did not answer when
// none does in time.
func TestCtlWaitsForItsServer(t *testing.T) {
	m := testsupport.MustEmptyMySQL(t)
	late := testsupport.FreeAddr(t)
	dsn := strings.Replace(m.DSN, "tcp("+m.Addr+")", "tcp("+late+")", 1)
	if dsn == m.DSN {
		t.Fatalf("the test's DSN %s does not name %s", m.DSN, m.Addr)
	}
	vars := map[string]string{"SECKILL_MYSQL_DSN": dsn, "SECKILL_CTL_WAIT": "30s"}
	lookup := func(key string) (string, bool) { v, ok := vars[key]; return v, ok }

	// The server's address answers only after the command has started.
	listening := make(chan net.Listener, 1)
	go func() {
		time.Sleep(2 * time.Second) // the test is about a server that starts late
		l, err := net.Listen("tcp", late)
		if err != nil {
			listening <- nil
			return
		}
		listening <- l
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s, err := net.Dial("tcp", m.Addr)
				if err != nil {
					return
				}
				defer s.Close()
				go func() { _, _ = io.Copy(s, c) }()
				_, _ = io.Copy(c, s)
			}()
		}
	}()
	defer func() {
		if l := <-listening; l != nil {
			l.Close()
		}
	}()
	var out strings.Builder
	start := time.Now()
	if err := app.Ctl([]string{"migrate"}, lookup, &out); err != nil {
		t.Fatalf("migrate with a server that answers %v late: %v", 2*time.Second, err)
	}
	if !strings.Contains(out.String(), "applied") || time.Since(start) < 2*time.Second {
		t.Fatalf("migrate: %q after %v", out.String(), time.Since(start))
	}

	vars = map[string]string{"SECKILL_MYSQL_DSN": strings.Replace(dsn, late, testsupport.FreeAddr(t), 1), "SECKILL_CTL_WAIT": "2s"}
	err := app.Ctl([]string{"migrate"}, lookup, &out)
	if err == nil || !strings.Contains(err.Error(), "did not answer within 2s") {
		t.Fatalf("migrate with no server: %v, want it to say what did not answer", err)
	}
	vars["SECKILL_CTL_WAIT"] = "soon"
	if err := app.Ctl([]string{"seed"}, lookup, &out); err == nil || !strings.Contains(err.Error(), "SECKILL_CTL_WAIT") {
		t.Fatalf("a malformed SECKILL_CTL_WAIT: %v", err)
	}
}

// seed started beside migrate waits for the schema it fills, and says
// what it waited for when the schema never comes.
func TestCtlSeedWaitsForTheSchema(t *testing.T) {
	m := testsupport.MustEmptyMySQL(t)
	vars := map[string]string{"SECKILL_MYSQL_DSN": m.DSN, "SECKILL_CTL_WAIT": "2s"}
	lookup := func(key string) (string, bool) { v, ok := vars[key]; return v, ok }
	var out strings.Builder
	if err := app.Ctl([]string{"seed"}, lookup, &out); err == nil || !strings.Contains(err.Error(), "the schema on") || !strings.Contains(err.Error(), "older") {
		t.Fatalf("seed on a database never migrated: %v, want it to say it waited for the schema", err)
	}
	vars["SECKILL_CTL_WAIT"] = "1m"
	seeded := make(chan error, 1)
	go func() {
		var out strings.Builder
		seeded <- app.Ctl([]string{"seed"}, lookup, &out)
	}()
	if err := app.Ctl([]string{"migrate"}, lookup, &out); err != nil {
		t.Fatal(err)
	}
	if err := <-seeded; err != nil {
		t.Fatalf("seed started before migrate: %v", err)
	}
	var shops int
	if err := m.DB.QueryRow("SELECT COUNT(*) FROM tb_shop").Scan(&shops); err != nil || shops == 0 {
		t.Fatalf("%d shops after the seed (%v)", shops, err)
	}
}

// seckillctl path-keys rotate makes a keys' file, or rotates it: the new
// key current, the old one previous, the one before dropped; without a
// file it rotates the keys in Redis the same way.
func TestCtlRotatesThePathKeys(t *testing.T) {
	r := testsupport.MustRedis(t)
	vars := map[string]string{"SECKILL_KEY_PREFIX": r.Prefix}
	maps.Copy(vars, r.Env())
	lookup := func(key string) (string, bool) { v, ok := vars[key]; return v, ok }
	file := filepath.Join(t.TempDir(), "keys.json")
	var rings []botcheck.Ring
	for range 3 {
		var out strings.Builder
		if err := app.Ctl([]string{"path-keys", "rotate", file}, lookup, &out); err != nil {
			t.Fatalf("path-keys rotate FILE: %v\n%s", err, out.String())
		}
		ring, err := botcheck.FileKeys(file).Ring(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		rings = append(rings, ring)
	}
	if len(rings[0].Others) != 0 || rings[2].Current.ID != 3 || len(rings[2].Others) != 1 || rings[2].Others[0].ID != 2 ||
		string(rings[2].Others[0].Secret) != string(rings[1].Current.Secret) {
		t.Fatalf("rings after three rotations: %+v; want key 3 current and key 2 (the second's) previous", rings)
	}
	if info, err := os.Stat(file); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the keys' file: %v, %v; want it readable by its owner only", info.Mode(), err)
	}
	keys := botcheck.NewRedisKeys(r.Client, r.Prefix)
	before, err := keys.Ring(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := app.Ctl([]string{"path-keys", "rotate"}, lookup, &out); err != nil {
		t.Fatalf("path-keys rotate: %v\n%s", err, out.String())
	}
	after, err := keys.Ring(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if after.Current.ID == before.Current.ID || len(after.Others) != 1 || string(after.Others[0].Secret) != string(before.Current.Secret) {
		t.Fatalf("Redis's ring after a rotation: %+v; before: %+v", after, before)
	}
	// Staged, then rotated: the staged key becomes current, and the
	// file keeps the mode it was given.
	if err := os.Chmod(file, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := app.Ctl([]string{"path-keys", "stage", file}, lookup, &out); err != nil {
		t.Fatalf("path-keys stage FILE: %v", err)
	}
	staged, err := botcheck.FileKeys(file).Ring(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if staged.Current.ID != 3 || len(staged.Others) != 2 || staged.Others[1].ID != 4 {
		t.Fatalf("ring after staging: %+v; want key 3 current, 2 and 4 beside it", staged)
	}
	if err := app.Ctl([]string{"path-keys", "stage", file}, lookup, &out); err != nil {
		t.Fatalf("path-keys stage FILE, again: %v", err)
	}
	if again, err := botcheck.FileKeys(file).Ring(context.Background()); err != nil || string(again.Others[1].Secret) != string(staged.Others[1].Secret) {
		t.Fatalf("staging again: %+v, %v; want the staged key kept (it may have reached every copy)", again, err)
	}
	if err := app.Ctl([]string{"path-keys", "rotate", file}, lookup, &out); err != nil {
		t.Fatalf("path-keys rotate FILE: %v", err)
	}
	rotated, err := botcheck.FileKeys(file).Ring(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rotated.Current.ID != 4 || string(rotated.Current.Secret) != string(staged.Others[1].Secret) || len(rotated.Others) != 1 || rotated.Others[0].ID != 3 {
		t.Fatalf("ring after the rotation: %+v; want the staged key 4 current and 3 previous", rotated)
	}
	if info, err := os.Stat(file); err != nil || info.Mode().Perm() != 0o640 {
		t.Fatalf("the keys' file after a rotation: %v, %v; want the mode it had, 0640", info.Mode(), err)
	}
	if err := os.WriteFile(file, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := app.Ctl([]string{"path-keys", "rotate", file}, lookup, &out); err == nil || !strings.Contains(err.Error(), "0 keys") {
		t.Fatalf("rotating a bad file: %v; want it refused, not overwritten", err)
	}
}

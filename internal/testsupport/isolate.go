package testsupport

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/mysqldb"
	"github.com/seckill/seckill/internal/redisconn"
	"github.com/seckill/seckill/internal/schema"
)

// unique is a short name part no other test shares: the test's name, made
// safe, and random hex.
func unique(tb testing.TB) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(tb.Name(), "_"))
	if len(name) > 30 {
		name = name[:30]
	}
	return name + "_" + hex.EncodeToString(b)
}

// Redis is a client and the key prefix this test owns, on one node (Addr)
// or a Redis Cluster (Cluster, its seeds).
type Redis struct {
	Client  redis.UniversalClient
	Addr    string
	Cluster []string
	Prefix  string
}

// Key is name under the test's prefix.
func (r *Redis) Key(name string) string { return r.Prefix + name }

// Env is what points a program at this Redis: SECKILL_REDIS_ADDR or
// SECKILL_REDIS_CLUSTER.
func (r *Redis) Env() map[string]string {
	if len(r.Cluster) > 0 {
		return map[string]string{"SECKILL_REDIS_CLUSTER": strings.Join(r.Cluster, ",")}
	}
	return map[string]string{"SECKILL_REDIS_ADDR": r.Addr}
}

// NewClient is another client of the same Redis, closed when the test
// ends: for a test that hooks or breaks its own connections.
func (r *Redis) NewClient(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	c, err := redisconn.New(redisconn.Config{Addr: r.Addr, Cluster: r.Cluster})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// Keys are the keys that match pattern on every master (KEYS asks one
// node of a cluster only).
func (r *Redis) Keys(tb testing.TB, pattern string) []string {
	tb.Helper()
	var mu sync.Mutex
	var keys []string
	err := redisconn.Scan(context.Background(), r.Client, pattern, func(_ context.Context, k string) error {
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, k)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return keys
}

// ScriptCachedOn is how many masters have s in their script cache.
func ScriptCachedOn(tb testing.TB, c redis.UniversalClient, s *redis.Script) int {
	tb.Helper()
	var n atomic.Int32
	err := redisconn.EachMaster(context.Background(), c, func(ctx context.Context, m *redis.Client) error {
		cached, err := m.ScriptExists(ctx, s.Hash()).Result()
		if err == nil && cached[0] {
			n.Add(1)
		}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return int(n.Load())
}

// MastersOf is how many masters own the slots of keys: 1 on one node.
func (r *Redis) MastersOf(tb testing.TB, keys ...string) int {
	tb.Helper()
	cluster, ok := r.Client.(*redis.ClusterClient)
	if !ok {
		return 1
	}
	masters := map[string]bool{}
	for _, k := range keys {
		m, err := cluster.MasterForKey(context.Background(), k)
		if err != nil {
			tb.Fatal(err)
		}
		masters[m.Options().Addr] = true
	}
	return len(masters)
}

// MustSpread fails a test on a cluster whose keys sit on fewer than two
// masters: it would prove nothing about the cluster.
func (r *Redis) MustSpread(tb testing.TB, keys ...string) {
	tb.Helper()
	if len(r.Cluster) == 0 {
		return
	}
	if n := r.MastersOf(tb, keys...); n < 2 {
		tb.Fatalf("the test's %d keys sit on %d master: it proves nothing about the cluster", len(keys), n)
	}
}

// Node is the client of one node, for a test about what a single server
// does (a stall, a replica): r.Client itself, or a failure on a cluster.
func (r *Redis) Node(tb testing.TB) *redis.Client {
	tb.Helper()
	c, ok := r.Client.(*redis.Client)
	if !ok {
		tb.Fatal("this test needs one Redis node: use MustNodeRedis")
	}
	return c
}

// MustRedis connects to the test Redis — a Redis Cluster when
// SECKILL_TEST_REDIS_CLUSTER names its seeds, the test node otherwise; the
// test's keys are deleted when it ends.
func MustRedis(tb testing.TB) *Redis {
	tb.Helper()
	if seeds := RedisCluster(); len(seeds) > 0 {
		return mustRedis(tb, redisconn.Config{Cluster: seeds})
	}
	return MustNodeRedis(tb)
}

// MustNodeRedis is MustRedis on the test node whatever the topology under
// test: for tests of what one server does (stalls, timeouts, replicas).
func MustNodeRedis(tb testing.TB) *Redis {
	tb.Helper()
	return mustRedis(tb, redisconn.Config{Addr: redisAddr(tb)})
}

// RedisCluster is the seeds of the test cluster, SECKILL_TEST_REDIS_CLUSTER;
// none when the tests run on one node.
func RedisCluster() []string {
	var seeds []string
	for s := range strings.SplitSeq(os.Getenv("SECKILL_TEST_REDIS_CLUSTER"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	return seeds
}

func mustRedis(tb testing.TB, cfg redisconn.Config) *Redis {
	tb.Helper()
	client, err := redisconn.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := redisconn.EachMaster(ctx, client, func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() }); err != nil {
		tb.Fatalf("test Redis %v%v does not answer PING: %v", cfg.Addr, cfg.Cluster, err)
	}
	r := &Redis{Client: client, Addr: cfg.Addr, Cluster: cfg.Cluster, Prefix: "t:" + unique(tb) + ":"}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = redisconn.Scan(ctx, client, r.Prefix+"*", func(ctx context.Context, key string) error {
			return client.Del(ctx, key).Err()
		})
		_ = client.Close()
	})
	return r
}

// MySQL is a database of the test's own on the test server.
type MySQL struct {
	DB       *sql.DB
	DSN      string // points at the test's database
	Database string
	Addr     string
	User     string
	Password string
	Flavor   string // "mysql" or "mariadb", for the binlog follower
}

// MustMySQL is a fresh database with every migration applied, dropped when
// the test ends.
func MustMySQL(tb testing.TB) *MySQL {
	tb.Helper()
	m := MustEmptyMySQL(tb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := schema.Migrate(ctx, m.DB); err != nil {
		tb.Fatalf("migrate test database %s: %v", m.Database, err)
	}
	return m
}

// MustEmptyMySQL is a fresh database with no tables, dropped when the test
// ends.
func MustEmptyMySQL(tb testing.TB) *MySQL {
	tb.Helper()
	serverDSN, flavor := mysqlServer(tb)
	return mustEmptyMySQL(tb, serverDSN, flavor)
}

// MustMySQLCluster is a fresh database with every migration applied on the
// test MariaDB cluster, through the HAProxy in front of it that
// SECKILL_TEST_MYSQL_CLUSTER names (stack.sh up --mysql-cluster), as the
// user of SECKILL_TEST_MYSQL_DSN.
func MustMySQLCluster(tb testing.TB) *MySQL {
	tb.Helper()
	addr := os.Getenv("SECKILL_TEST_MYSQL_CLUSTER")
	if addr == "" {
		tb.Fatal("SECKILL_TEST_MYSQL_CLUSTER must name the MariaDB cluster's HAProxy (make test starts it: stack.sh up --mysql-cluster, " +
			"SECKILL_TEST_MYSQL_CLUSTER=127.0.0.1:13310)")
	}
	serverDSN, _ := mysqlServer(tb)
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		tb.Fatalf("SECKILL_TEST_MYSQL_DSN: %v", err)
	}
	cfg.Addr = addr
	m := mustEmptyMySQL(tb, cfg.FormatDSN(), "mariadb")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := schema.Migrate(ctx, m.DB); err != nil {
		tb.Fatalf("migrate test database %s on the cluster: %v", m.Database, err)
	}
	return m
}

func mustEmptyMySQL(tb testing.TB, serverDSN, flavor string) *MySQL {
	tb.Helper()
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		tb.Fatalf("MySQL DSN: %v", err)
	}
	admin, err := mysqldb.Open(serverDSN)
	if err != nil {
		tb.Fatal(err)
	}
	defer admin.Close()
	name := "t_" + unique(tb)
	if len(name) > 64 {
		name = name[len(name)-64:]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"); err != nil {
		tb.Fatalf("test MySQL at %s: create database: %v", cfg.Addr, err)
	}
	cfg.DBName = name
	dsn := cfg.FormatDSN()
	db, err := mysqldb.Open(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = db.Close()
		admin, err := mysqldb.Open(serverDSN)
		if err != nil {
			return
		}
		defer admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			tb.Logf("drop test database %s: %v", name, err)
		}
	})
	return &MySQL{DB: db, DSN: dsn, Database: name, Addr: cfg.Addr, User: cfg.User, Password: cfg.Passwd, Flavor: flavor}
}

// Kafka is the test Kafka: one broker, or the cluster of three.
type Kafka struct {
	Brokers []string
	// Replicas is the replication factor of the test's topics: 3 on the
	// cluster, with min.insync.replicas 2, as the stack creates its own.
	Replicas int
}

// MustKafka checks that the test Kafka answers a metadata request.
func MustKafka(tb testing.TB) *Kafka {
	tb.Helper()
	return mustKafka(tb, kafkaBrokers(tb), 1)
}

// KafkaCluster is the seeds of the test Kafka cluster,
// SECKILL_TEST_KAFKA_CLUSTER; none when it is not running.
func KafkaCluster() []string {
	var seeds []string
	for s := range strings.SplitSeq(os.Getenv("SECKILL_TEST_KAFKA_CLUSTER"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	return seeds
}

// MustKafkaCluster is the stack's Kafka cluster of three brokers
// (deploy/local/stack.sh up --kafka-brokers 3): the test fails without it.
func MustKafkaCluster(tb testing.TB) *Kafka {
	tb.Helper()
	seeds := KafkaCluster()
	if len(seeds) == 0 {
		tb.Fatal("no Kafka cluster: run make test, or start it with deploy/local/stack.sh up --kafka-brokers 3 and set " +
			"SECKILL_TEST_KAFKA_CLUSTER=127.0.0.1:19192,127.0.0.1:19292,127.0.0.1:19392")
	}
	k := mustKafka(tb, seeds, 3)
	k.waitWhole(tb)
	return k
}

// waitWhole waits until every seed's metadata names every broker: a node
// that a test before this one killed and restarted answers at once, but is
// listed by the others only once it has caught up with the metadata log
// and been unfenced (a topic of replication factor 3 is refused until
// then).
func (k *Kafka) waitWhole(tb testing.TB) {
	tb.Helper()
	began := time.Now()
	deadline := began.Add(90 * time.Second)
	for {
		whole := true
		var seen []string
		for _, seed := range k.Brokers {
			client := &kafka.Client{Addr: kafka.TCP(seed), Timeout: 5 * time.Second}
			md, err := client.Metadata(context.Background(), &kafka.MetadataRequest{Topics: []string{}})
			switch {
			case err != nil:
				seen = append(seen, fmt.Sprintf("%s: %v", seed, err))
				whole = false
			default:
				seen = append(seen, fmt.Sprintf("%s: %d brokers", seed, len(md.Brokers)))
				whole = whole && len(md.Brokers) == len(k.Brokers)
			}
		}
		if whole {
			if waited := time.Since(began); waited > time.Second {
				tb.Logf("waited %v for the Kafka cluster to be whole", waited.Round(100*time.Millisecond))
			}
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the Kafka cluster is not whole after 90 s: %s", strings.Join(seen, "; "))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func mustKafka(tb testing.TB, brokers []string, replicas int) *Kafka {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := broker.Ping(ctx, brokers); err != nil {
		tb.Fatalf("test Kafka at %v: %v", brokers, err)
	}
	return &Kafka{Brokers: brokers, Replicas: replicas}
}

// MustTopic creates a topic of the test's own, deleted when the test ends.
func (k *Kafka) MustTopic(tb testing.TB, partitions int) string {
	tb.Helper()
	return k.MustTopicLedBy(tb, partitions, 0)
}

// MustTopicLedBy is MustTopic with every partition led by the broker
// leader (0: Kafka's choice).
func (k *Kafka) MustTopicLedBy(tb testing.TB, partitions, leader int) string {
	tb.Helper()
	name := "t." + unique(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	t := broker.Topic{Name: name, Partitions: partitions, Replicas: max(k.Replicas, 1), Leader: leader}
	if t.Replicas > 1 {
		t.MinInSync = t.Replicas - 1
	}
	if err := broker.EnsureTopics(ctx, k.Brokers, t); err != nil {
		tb.Fatalf("create test topic: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := broker.DeleteTopics(ctx, k.Brokers, name); err != nil {
			tb.Logf("delete test topic %s: %v", name, err)
		}
	})
	return name
}

// Group is a consumer group name of the test's own.
func Group(tb testing.TB) string { return fmt.Sprintf("g.%s", unique(tb)) }

// MustFirstMessage reads the first message of partition 0 of topic,
// waiting up to 20 s for it.
func (k *Kafka) MustFirstMessage(tb testing.TB, topic string) kafka.Message {
	tb.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: k.Brokers, Topic: topic, Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := r.ReadMessage(ctx)
	if err != nil {
		tb.Fatalf("first message of %s: %v", topic, err)
	}
	return m
}

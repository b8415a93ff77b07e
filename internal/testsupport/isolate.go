package testsupport

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/mysqldb"
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

// Redis is a client and the key prefix this test owns.
type Redis struct {
	Client *redis.Client
	Addr   string
	Prefix string
}

// Key is name under the test's prefix.
func (r *Redis) Key(name string) string { return r.Prefix + name }

// MustRedis connects to the test Redis; the test's keys are deleted when it
// ends.
func MustRedis(tb testing.TB) *Redis {
	tb.Helper()
	addr := redisAddr(tb)
	client := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		tb.Fatalf("test Redis at %s does not answer PING: %v", addr, err)
	}
	r := &Redis{Client: client, Addr: addr, Prefix: "t:" + unique(tb) + ":"}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := client.Scan(ctx, 0, r.Prefix+"*", 500).Iterator()
		for iter.Next(ctx) {
			client.Del(ctx, iter.Val())
		}
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
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		tb.Fatalf("SECKILL_TEST_MYSQL_DSN: %v", err)
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

// Kafka is the test Kafka cluster.
type Kafka struct {
	Brokers []string
}

// MustKafka checks that the test Kafka answers a metadata request.
func MustKafka(tb testing.TB) *Kafka {
	tb.Helper()
	brokers := kafkaBrokers(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := broker.Ping(ctx, brokers); err != nil {
		tb.Fatalf("test Kafka at %v: %v", brokers, err)
	}
	return &Kafka{Brokers: brokers}
}

// MustTopic creates a topic of the test's own, deleted when the test ends.
func (k *Kafka) MustTopic(tb testing.TB, partitions int) string {
	tb.Helper()
	name := "t." + unique(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := broker.EnsureTopics(ctx, k.Brokers, 1, broker.Topic{Name: name, Partitions: partitions}); err != nil {
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

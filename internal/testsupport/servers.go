// Package testsupport gives integration tests their real Redis, MySQL and
// Kafka, each test isolated from the others (its own key prefix, database
// and topics), so packages can run in parallel against one stack.
//
// Where the servers come from, in order:
//  1. SECKILL_TEST_REDIS_ADDR, SECKILL_TEST_MYSQL_DSN (a user that may
//     create databases, no database name) with SECKILL_TEST_MYSQL_FLAVOR,
//     and SECKILL_TEST_KAFKA_BROKERS: `make test` sets them after
//     deploy/local/stack.sh up.
//  2. Otherwise, if a Docker engine answers, containers started once per
//     test binary by testcontainers-go.
//  3. Otherwise the test fails and says how to provide the servers. It never
//     skips: an integration test that did not run must not look green.
package testsupport

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tckafka "github.com/testcontainers/testcontainers-go/modules/kafka"
	tcmysql "github.com/testcontainers/testcontainers-go/modules/mysql"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
)

const howToProvide = `no %s for integration tests. Either run "make test" (it starts the local stack and sets the variables), ` +
	`or start the stack with "deploy/local/stack.sh up" and set SECKILL_TEST_REDIS_ADDR=127.0.0.1:16379, ` +
	`SECKILL_TEST_MYSQL_DSN='seckill:seckill@tcp(127.0.0.1:13306)/', SECKILL_TEST_MYSQL_FLAVOR=mariadb and ` +
	`SECKILL_TEST_KAFKA_BROKERS=127.0.0.1:19092, or run a Docker engine for testcontainers-go`

// servers are the addresses of one test binary's servers, found once.
type servers struct {
	redisAddr   string
	mysqlDSN    string
	mysqlFlavor string
	kafka       []string
}

var (
	redisOnce, mysqlOnce, kafkaOnce sync.Once
	found                           servers
	foundErr                        = map[string]error{}
	foundMu                         sync.Mutex
)

func dockerAnswers(ctx context.Context) (answers bool) {
	// testcontainers-go panics ("rootless Docker not found") when it finds
	// no Docker host at all; that is a plain "no" here.
	defer func() {
		if recover() != nil {
			answers = false
		}
	}()
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return false
	}
	defer p.Close()
	return p.Health(ctx) == nil
}

func record(kind string, err error) {
	foundMu.Lock()
	defer foundMu.Unlock()
	foundErr[kind] = err
}

func failure(kind string) error {
	foundMu.Lock()
	defer foundMu.Unlock()
	return foundErr[kind]
}

// lookup finds a server: its variable, or a container, or an error.
func lookup(tb testing.TB, kind, variable string, once *sync.Once, fromEnv func(string), start func(context.Context) error) {
	tb.Helper()
	once.Do(func() {
		if v := strings.TrimSpace(os.Getenv(variable)); v != "" {
			fromEnv(v)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if !dockerAnswers(ctx) {
			record(kind, fmt.Errorf(howToProvide, kind))
			return
		}
		if err := start(ctx); err != nil {
			record(kind, fmt.Errorf("start %s container: %w", kind, err))
		}
	})
	if err := failure(kind); err != nil {
		tb.Fatal(err)
	}
}

func redisAddr(tb testing.TB) string {
	lookup(tb, "Redis", "SECKILL_TEST_REDIS_ADDR", &redisOnce,
		func(v string) { found.redisAddr = v },
		func(ctx context.Context) error {
			c, err := tcredis.Run(ctx, "redis:7.2")
			if err != nil {
				return err
			}
			found.redisAddr, err = c.Endpoint(ctx, "")
			return err
		})
	return found.redisAddr
}

// mysqlServer is a DSN without a database name, for a user that may create
// databases, and the server's flavor for the binlog follower.
func mysqlServer(tb testing.TB) (dsn, flavor string) {
	lookup(tb, "MySQL", "SECKILL_TEST_MYSQL_DSN", &mysqlOnce,
		func(v string) {
			found.mysqlDSN = v
			found.mysqlFlavor = os.Getenv("SECKILL_TEST_MYSQL_FLAVOR")
			if found.mysqlFlavor == "" {
				found.mysqlFlavor = "mariadb"
			}
		},
		func(ctx context.Context) error {
			// MySQL 8 logs binlogs in ROW format with FULL images by
			// default; the flags make the requirement explicit.
			c, err := tcmysql.Run(ctx, "mysql:8.0",
				tcmysql.WithUsername("root"), tcmysql.WithPassword("secret"), tcmysql.WithDatabase("seckill"),
				testcontainers.WithCmdArgs("--server-id=1", "--log-bin=mysql-bin", "--binlog-format=ROW", "--binlog-row-image=FULL",
					"--innodb-flush-log-at-trx-commit=1", "--sync-binlog=1",
					// The statements' traceparent comments reach the
					// binlog follower (telemetry TestInvalidationIsASpan).
					"--binlog-rows-query-log-events=ON",
					// GTIDs, as production runs MySQL: the follower resumes
					// by GTID set on whichever server it reaches.
					"--gtid-mode=ON", "--enforce-gtid-consistency=ON"))
			if err != nil {
				return err
			}
			endpoint, err := c.Endpoint(ctx, "")
			if err != nil {
				return err
			}
			found.mysqlDSN = "root:secret@tcp(" + endpoint + ")/"
			found.mysqlFlavor = "mysql"
			return nil
		})
	return found.mysqlDSN, found.mysqlFlavor
}

func kafkaBrokers(tb testing.TB) []string {
	lookup(tb, "Kafka", "SECKILL_TEST_KAFKA_BROKERS", &kafkaOnce,
		func(v string) { found.kafka = strings.Split(v, ",") },
		func(ctx context.Context) error {
			c, err := tckafka.Run(ctx, "confluentinc/confluent-local:7.5.0", tckafka.WithClusterID("seckill-test"))
			if err != nil {
				return err
			}
			found.kafka, err = c.Brokers(ctx)
			return err
		})
	return found.kafka
}

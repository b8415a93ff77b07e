// Package testsupport gives integration tests their real Redis, MySQL and
// Kafka, each test isolated from the others (its own key prefix, database
// and topics), so packages can run in parallel against one stack.
//
// Where the servers come from, in order:
//  1. SECKILL_TEST_REDIS_ADDR, SECKILL_TEST_MYSQL_DSN (a user that may
//     create databases, no database name) with SECKILL_TEST_MYSQL_FLAVOR,
//     and SECKILL_TEST_KAFKA_BROKERS: `make test` sets them after
//     deploy/local/stack.sh up.
//  2. Otherwise, if a container engine answers (Docker, or podman's
//     Docker API: deploy/local/engine.sh), containers started once per
//     test binary by testcontainers-go, from SECKILL_TEST_REDIS_IMAGE,
//     SECKILL_TEST_MYSQL_IMAGE and SECKILL_TEST_KAFKA_IMAGE (the public
//     redis, mysql and apache/kafka images by default; make test runs
//     this path on images built here, deploy/local/images.sh). They live
//     as long as the engine's reaper (Ryuk) lets them; with Ryuk off, as
//     on podman, until deploy/local/engine.sh down removes them.
//  3. Otherwise the test fails and says how to provide the servers. It never
//     skips: an integration test that did not run must not look green.
package testsupport

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/go-connections/nat"
	"github.com/testcontainers/testcontainers-go"
	tcmysql "github.com/testcontainers/testcontainers-go/modules/mysql"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
	"github.com/testcontainers/testcontainers-go/wait"
)

const howToProvide = `no %s for integration tests. Either run "make test" (it starts the local stack and sets the variables), ` +
	`or start the stack with "deploy/local/stack.sh up" and set SECKILL_TEST_REDIS_ADDR=127.0.0.1:16379, ` +
	`SECKILL_TEST_MYSQL_DSN='seckill:seckill@tcp(127.0.0.1:13306)/', SECKILL_TEST_MYSQL_FLAVOR=mariadb and ` +
	`SECKILL_TEST_KAFKA_BROKERS=127.0.0.1:19092, or run a container engine for testcontainers-go: Docker, or podman's ` +
	`Docker API ("deploy/local/engine.sh up", then the variables "deploy/local/engine.sh env" prints; ` +
	`"deploy/local/images.sh build" makes the servers' images where no registry is reachable)`

// image is the image a server's container runs: variable's, or the
// public image.
func image(variable, public string) string {
	if v := strings.TrimSpace(os.Getenv(variable)); v != "" {
		return v
	}
	return public
}

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
			c, err := tcredis.Run(ctx, image("SECKILL_TEST_REDIS_IMAGE", "redis:7.4"), onLoopback(ctx, "6379/tcp"))
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
			// default; the flags make the requirement explicit. The
			// flags only MySQL has are "loose": a MariaDB image (GTIDs
			// always on, statements annotated by default) ignores them.
			c, err := tcmysql.Run(ctx, image("SECKILL_TEST_MYSQL_IMAGE", "mysql:8.0"),
				tcmysql.WithUsername("root"), tcmysql.WithPassword("secret"), tcmysql.WithDatabase("seckill"),
				onLoopback(ctx, "3306/tcp", "33060/tcp"),
				testcontainers.WithCmdArgs("--server-id=1", "--log-bin=mysql-bin", "--binlog-format=ROW", "--binlog-row-image=FULL",
					"--innodb-flush-log-at-trx-commit=1", "--sync-binlog=1",
					// The statements' traceparent comments reach the
					// binlog follower (telemetry TestInvalidationIsASpan).
					"--loose-binlog-rows-query-log-events=ON",
					// GTIDs, as production runs MySQL: the follower resumes
					// by GTID set on whichever server it reaches.
					"--loose-gtid-mode=ON", "--loose-enforce-gtid-consistency=ON"),
				// Ready when it answers: the MySQL image's ready line
				// is its own, and it starts a first server before the
				// one that stays.
				testcontainers.WithWaitStrategy(wait.ForSQL("3306/tcp", "mysql", func(host string, port nat.Port) string {
					return "root:secret@tcp(" + net.JoinHostPort(host, port.Port()) + ")/"
				}).WithStartupTimeout(2*time.Minute)))
			if err != nil {
				return err
			}
			endpoint, err := c.Endpoint(ctx, "")
			if err != nil {
				return err
			}
			found.mysqlDSN = "root:secret@tcp(" + endpoint + ")/"
			found.mysqlFlavor, err = flavorOf(ctx, found.mysqlDSN)
			return err
		})
	return found.mysqlDSN, found.mysqlFlavor
}

// onLoopback publishes a container's ports on the host's loopback only
// (an engine publishes on every address by default) when the tests reach
// the engine's host by loopback, as deploy/local/engine.sh's variables
// say: servers a test starts listen where the stack's do. Tests that run
// in a container reach the ports by a gateway's address instead, so there
// they stay published on every address.
func onLoopback(ctx context.Context, ports ...nat.Port) testcontainers.CustomizeRequestOption {
	if !reachedOnLoopback(ctx) {
		return func(*testcontainers.GenericContainerRequest) error { return nil }
	}
	return testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
		if hc.PortBindings == nil {
			hc.PortBindings = nat.PortMap{}
		}
		for _, p := range ports {
			hc.PortBindings[p] = []nat.PortBinding{{HostIP: "127.0.0.1"}}
		}
	})
}

// reachedOnLoopback says whether testcontainers-go reaches the engine's
// published ports on a loopback address.
func reachedOnLoopback(ctx context.Context) bool {
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return false
	}
	defer p.Close()
	host, err := p.DaemonHost(ctx)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// flavorOf is the binlog flavor of the server at dsn: mariadb or mysql.
func flavorOf(ctx context.Context, dsn string) (string, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return "", fmt.Errorf("the MySQL container's version: %w", err)
	}
	if strings.Contains(strings.ToLower(version), "mariadb") {
		return "mariadb", nil
	}
	return "mysql", nil
}

// kafkaBrokers is one KRaft node in a container, configured as the
// apache/kafka image reads it (the image built here reads the same). It
// listens for the host on a port of the same number inside and out, so
// that the address it advertises is the one the tests dial.
func kafkaBrokers(tb testing.TB) []string {
	lookup(tb, "Kafka", "SECKILL_TEST_KAFKA_BROKERS", &kafkaOnce,
		func(v string) { found.kafka = strings.Split(v, ",") },
		func(ctx context.Context) error {
			_, port, err := net.SplitHostPort(FreeAddr(tb))
			if err != nil {
				return err
			}
			_, err = testcontainers.Run(ctx, image("SECKILL_TEST_KAFKA_IMAGE", "apache/kafka:3.9.1"),
				testcontainers.WithExposedPorts("127.0.0.1:"+port+":"+port+"/tcp"),
				testcontainers.WithEnv(map[string]string{
					"CLUSTER_ID":                                     "c2Vja2lsbC10ZXN0AAAAAA",
					"KAFKA_NODE_ID":                                  "1",
					"KAFKA_PROCESS_ROLES":                            "broker,controller",
					"KAFKA_LISTENERS":                                "PLAINTEXT://:" + port + ",CONTROLLER://:9093",
					"KAFKA_ADVERTISED_LISTENERS":                     "PLAINTEXT://127.0.0.1:" + port,
					"KAFKA_CONTROLLER_LISTENER_NAMES":                "CONTROLLER",
					"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":           "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
					"KAFKA_CONTROLLER_QUORUM_VOTERS":                 "1@localhost:9093",
					"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":         "1",
					"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
					"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":            "1",
					"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS":         "0",
					"KAFKA_HEAP_OPTS":                                "-Xmx512m -Xms512m",
				}),
				testcontainers.WithWaitStrategy(wait.ForLog("Kafka Server started").WithStartupTimeout(2*time.Minute)))
			if err != nil {
				return err
			}
			// The address it advertises, whatever the engine calls its
			// host (a gateway's address when these tests seem to run in
			// a container).
			found.kafka = []string{"127.0.0.1:" + port}
			return nil
		})
	return found.kafka
}

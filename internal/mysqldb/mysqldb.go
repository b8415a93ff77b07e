// Package mysqldb opens MySQL/MariaDB connection pools with the settings
// every part of the project relies on, whatever DSN the user passed.
package mysqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/XSAM/otelsql"
	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"

	"github.com/seckill/seckill/internal/telemetry"
)

// Config turns a DSN into the driver's config with the project's fixed
// settings: times are UTC on both sides (TIMESTAMP columns convert through
// the session time zone), every network step has a deadline, and the driver
// interpolates placeholders itself, so a statement is one round trip rather
// than prepare, execute and close (the order-writer's 2000-row INSERT went
// from about 40k to 50k-58k rows/s; the driver refuses the option, at start,
// with the few multibyte collations where it would be unsafe).
func Config(dsn string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse MySQL DSN: %w", err)
	}
	cfg.ParseTime = true
	cfg.InterpolateParams = true
	cfg.Loc = time.UTC
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	if cfg.Timeout == 0 {
		cfg.Timeout = 3 * time.Second
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 30 * time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	return cfg, nil
}

// Open returns a pool for dsn. It does not dial: a database that is down at
// start is retried by the caller's readiness loop, not treated as fatal.
func Open(dsn string) (*sql.DB, error) {
	cfg, err := Config(dsn)
	if err != nil {
		return nil, err
	}
	plain, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("MySQL connector: %w", err)
	}
	connector := causal{plain}
	var db *sql.DB
	if telemetry.Enabled() {
		db = traced(connector)
	} else {
		db = sql.OpenDB(connector)
	}
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(16)
	db.SetConnMaxLifetime(30 * time.Minute)
	db.SetConnMaxIdleTime(5 * time.Minute)
	return db, nil
}

// causal makes every read of its connections causal on a Galera node
// (wsrep_sync_wait = 1: a SELECT, SHOW or BEGIN first waits until the node
// has applied every write the cluster certified before it). Galera applies
// a commit on each node in its own time: a read on a node behind the one
// that took the order-writer's last batch would miss it, and the reads
// here decide what Redis holds (the reconcile's truth, the sale checks,
// a creation's lookup, the writer's "already settled?"): a missed order's
// unit would be sold again (TestChaosMySQLClusterReadsAreCausal). On MySQL
// the variable does not exist (1193) and there is nothing to wait for; on
// a MariaDB outside a cluster it is accepted and costs nothing.
type causal struct{ driver.Connector }

// unknownVariable is MySQL's ER_UNKNOWN_SYSTEM_VARIABLE.
const unknownVariable = 1193

// noGalera is err but for MySQL refusing a Galera variable it does not
// have (1193): there is nothing to set there.
func noGalera(err error) error {
	if me := (*mysql.MySQLError)(nil); errors.As(err, &me) && me.Number == unknownVariable {
		return nil
	}
	return err
}

func (c causal) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	ex, ok := conn.(driver.ExecerContext)
	if !ok {
		conn.Close()
		return nil, errors.New("MySQL connection: the driver cannot run a statement to make its reads causal")
	}
	if _, err := ex.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 1", nil); noGalera(err) != nil {
		conn.Close()
		return nil, fmt.Errorf("make the connection's reads causal (wsrep_sync_wait): %w", err)
	}
	return conn, nil
}

// Check is the readiness check of a pool. On a Galera node it asks the
// node's state: a node outside a Primary component, or still joining,
// answers pings and statements that read no table, and refuses the rest
// (1047).
func Check(ctx context.Context, db *sql.DB) error {
	_, _, err := check(ctx, db)
	return err
}

// check is Check, and whether the server is a Galera node with the size
// of the Primary component it belongs to. Its reads are not causal: a
// node's state is what is asked, and a node behind the cluster (a donor,
// one desynced) would hold a causal SHOW until it caught up.
func check(ctx context.Context, db *sql.DB) (galera bool, size int, err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return false, 0, Explain(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 0"); noGalera(err) != nil {
		return false, 0, Explain(err)
	}
	// Back to causal for the pool's next user, or the connection is
	// dropped; a check cancelled or past its deadline still restores.
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if _, err := conn.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 1"); noGalera(err) != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	var name, on string
	err = conn.QueryRowContext(ctx, "SHOW GLOBAL VARIABLES LIKE 'wsrep_on'").Scan(&name, &on)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, 0, nil // MySQL: no Galera
	case err != nil:
		return false, 0, Explain(err)
	case on != "ON":
		return false, 0, nil
	}
	// SHOW, not information_schema.GLOBAL_STATUS, which MySQL 8 (a
	// Percona XtraDB Cluster) no longer has.
	status, err := showMap(ctx, conn, "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_cluster_status', 'wsrep_local_state_comment', 'wsrep_cluster_size')")
	if err != nil {
		return true, 0, err
	}
	var vars map[string]string
	if status["wsrep_local_state_comment"] == donorState {
		if vars, err = showMap(ctx, conn, "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('wsrep_desync', 'wsrep_sst_method')"); err != nil {
			return true, 0, err
		}
	}
	if err := serves(status, vars); err != nil {
		return true, 0, err
	}
	size, err = strconv.Atoi(status["wsrep_cluster_size"])
	if err != nil {
		return true, 0, fmt.Errorf("wsrep_cluster_size %q: %w", status["wsrep_cluster_size"], err)
	}
	return true, size, nil
}

// donorState is wsrep_local_state_comment of a node that donates a
// snapshot, or that an operator desynced.
const donorState = "Donor/Desynced"

// serves says whether a Galera node, by its status and (for a donor) its
// variables, takes queries and writes: in a Primary component, and
// Synced or donating by mariabackup. That method does not block the donor
// (MaxScale's available_when_donor), so a donor that is the cluster's
// writes' node stays ready; one an operator desynced (wsrep_desync), or
// that donates by a blocking method, is not. The joiner's method is the
// one used: the donor's own stands for it when every node has the same
// (docs/mysql-cluster.md).
func serves(status, vars map[string]string) error {
	state := status["wsrep_local_state_comment"]
	ok := state == "Synced" ||
		state == donorState && vars["wsrep_desync"] == "OFF" && vars["wsrep_sst_method"] == "mariabackup"
	if status["wsrep_cluster_status"] != "Primary" || !ok {
		return fmt.Errorf("%w (cluster status %s, node state %s)", ErrNodeNotReady, status["wsrep_cluster_status"], state)
	}
	return nil
}

// showMap runs a SHOW of name/value rows on conn, the names lowercased.
func showMap(ctx context.Context, conn *sql.Conn, query string) (map[string]string, error) {
	rows, err := conn.QueryContext(ctx, query)
	if err != nil {
		return nil, Explain(err)
	}
	defer rows.Close()
	m := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, Explain(err)
		}
		m[strings.ToLower(k)] = v
	}
	if err := rows.Err(); err != nil {
		return nil, Explain(err)
	}
	return m, nil
}

// ClusterWatch is Check that also keeps the size of the Galera cluster
// the pool reaches for Prometheus (seckill_mysql_cluster_size), from the
// first time it reaches a Galera node: a program on one MySQL server
// exports no such series.
type ClusterWatch struct {
	reg  prometheus.Registerer
	once sync.Once
	size prometheus.Gauge
}

// NewClusterWatch registers the gauge on reg when a Galera node is met.
func NewClusterWatch(reg prometheus.Registerer) *ClusterWatch {
	return &ClusterWatch{reg: reg, size: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "seckill_mysql_cluster_size",
		Help: "Nodes in the Primary component of the Galera cluster this program reaches; 0 while the node it reaches is outside one, or no node answers (behind a proxy: no healthy node). Exported from the first Galera node met.",
	})}
}

// Check checks db and records the cluster's size. A failure that says
// nothing of the cluster (a wrong password, a timeout) leaves the last
// size as it was: the readiness says what is wrong.
func (w *ClusterWatch) Check(ctx context.Context, db *sql.DB) error {
	galera, size, err := check(ctx, db)
	if galera {
		w.once.Do(func() { w.reg.MustRegister(w.size) })
	}
	switch {
	case err == nil && galera:
		w.size.Set(float64(size))
	case errors.Is(err, ErrNodeNotReady), errors.Is(err, ErrClosed):
		w.size.Set(0)
	}
	return err
}

// OutcomeUnknown is a statement sent whose answer never came: the
// connection broke after the driver wrote it (a server or a cluster's node
// gone), so it may or may not have been carried out. The driver's
// ErrBadConn is not one: it means nothing was sent.
func OutcomeUnknown(err error) bool {
	return errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, mysql.ErrMalformPkt) ||
		errors.Is(err, mysql.ErrPktSync) || errors.Is(err, mysql.ErrPktSyncMul)
}

// Unreachable is a statement that failed because no server could take it
// (none answered the connect, the connection broke, a Galera node outside
// a Primary component), not because of what it asked: the same statement
// can work a moment later, and a client should be told to retry, not that
// the server is faulty.
func Unreachable(err error) bool {
	var op *net.OpError
	var me *mysql.MySQLError
	return errors.As(err, &op) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, ErrNodeNotReady) || errors.As(err, &me) && me.Number == errWsrepNotReady
}

// ErrClosed is a connection closed before the server answered.
var ErrClosed = errors.New("the connection was closed before the server answered (a proxy with no healthy server behind it, or a server going down)")

// ErrNodeNotReady is a Galera node that refuses statements.
var ErrNodeNotReady = errors.New("a Galera node not ready for statements: outside a Primary component (its cluster lost quorum), or still joining")

// errWsrepNotReady is what a Galera node answers every statement with
// while it is not a synced member of a Primary component
// (ER_UNKNOWN_COM_ERROR: "WSREP has not yet prepared node for application
// use").
const errWsrepNotReady = 1047

// Explain says in words what the driver's terse errors mean for an
// operator, keeping the error itself.
func Explain(err error) error {
	var me *mysql.MySQLError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &me) && me.Number == errWsrepNotReady:
		return fmt.Errorf("%w: %w", ErrNodeNotReady, err)
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, mysql.ErrInvalidConn), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// traced is a pool whose statements are spans of the traced operation
// that runs them, each with a traceparent comment (sqlcommenter) that the
// binlog carries to the cache-invalidator where the server logs statements
// with their rows (MySQL's binlog_rows_query_log_events). The rows, the
// session resets and the connects are no spans: they would double the
// spans of a batch and say nothing the statement's span does not.
func traced(c driver.Connector) *sql.DB {
	return otelsql.OpenDB(c, otelsql.WithTracerProvider(telemetry.ChildrenOnly()), otelsql.WithSQLCommenter(true),
		otelsql.WithAttributes(attribute.String("db.system.name", "mysql")),
		otelsql.WithSpanOptions(otelsql.SpanOptions{OmitRows: true, OmitConnResetSession: true, OmitConnectorConnect: true, OmitConnPrepare: true}))
}

// Addr is the host:port a DSN points at, for logs and readiness reports.
func Addr(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "(invalid DSN)"
	}
	return cfg.Addr
}

// Package binlog follows the MySQL/MariaDB binlog (go-mysql canal) to keep
// the Redis cache consistent with the database.
package binlog

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/canal"
	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/apperr"
)

// Source is where the binlog is read from: a user with REPLICATION SLAVE,
// REPLICATION CLIENT and SELECT (for table metadata), and the server id
// this follower announces, unique among the server's replicas.
type Source struct {
	Addr     string
	User     string
	Password string
	Flavor   string // "mysql" or "mariadb"
	ServerID uint32
}

// Open is a small pool for metadata queries as the binlog user.
func (s Source) Open() (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.User, cfg.Passwd = "tcp", s.Addr, s.User, s.Password
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("binlog source connector: %w", err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(2)
	return db, nil
}

// ErrMisconfigured means the server's binlog cannot feed the follower.
var ErrMisconfigured = apperr.New(apperr.Unavailable, "binlog: server not configured for row-based replication")

// required are the server settings a canal follower needs to see every
// changed row with both images.
var required = map[string]string{"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL"}

// CheckServer verifies the binlog settings and that the user may read the
// binlog position (REPLICATION CLIENT).
func CheckServer(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('log_bin', 'binlog_format', 'binlog_row_image')")
	if err != nil {
		return fmt.Errorf("read binlog settings: %w", err)
	}
	defer rows.Close()
	got := map[string]string{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return fmt.Errorf("read binlog settings: %w", err)
		}
		got[name] = strings.ToUpper(value)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read binlog settings: %w", err)
	}
	var wrong []string
	for name, want := range required {
		if got[name] != want {
			wrong = append(wrong, fmt.Sprintf("%s=%q (want %s)", name, got[name], want))
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("%w: %s", ErrMisconfigured, strings.Join(wrong, ", "))
	}
	status, err := db.QueryContext(ctx, "SHOW MASTER STATUS")
	if err != nil {
		return fmt.Errorf("read binlog position (needs REPLICATION CLIENT): %w", err)
	}
	defer status.Close()
	if !status.Next() {
		return fmt.Errorf("%w: SHOW MASTER STATUS returned no row", ErrMisconfigured)
	}
	return status.Err()
}

// NewCanal is a binlog follower of the given tables ("db.table" regular
// expressions matched against the whole name: canal itself would let
// "db.tb_shop" match "db.tb_shop_type"). It never runs mysqldump: the follower starts from a binlog
// position, and rows older than that are the cache's TTL's business.
func (s Source) NewCanal(logger *slog.Logger, tables ...string) (*canal.Canal, error) {
	cfg := canal.NewDefaultConfig()
	cfg.Addr, cfg.User, cfg.Password = s.Addr, s.User, s.Password
	cfg.Flavor = s.Flavor
	cfg.ServerID = s.ServerID
	cfg.Dump.ExecutionPath = ""
	for _, t := range tables {
		cfg.IncludeTableRegex = append(cfg.IncludeTableRegex, "^(?:"+t+")$")
	}
	cfg.Logger = logger
	// The server sends a heartbeat when idle, so a read that waits longer
	// than a few heartbeats means the connection is dead.
	cfg.HeartbeatPeriod = 10 * time.Second
	cfg.ReadTimeout = 35 * time.Second
	c, err := canal.NewCanal(cfg)
	if err != nil {
		return nil, fmt.Errorf("binlog follower of %s: %w", s.Addr, err)
	}
	return c, nil
}

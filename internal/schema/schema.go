// Package schema owns the database schema: versioned migrations embedded in
// every binary that needs them (applied with goose), and the demo data.
package schema

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
	"github.com/pressly/goose/v3"
)

//go:embed migrations/*.sql
var migrations embed.FS

//go:embed seed.sql
var seedSQL string

func provider(db *sql.DB) (*goose.Provider, error) {
	dir, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return nil, fmt.Errorf("migrations dir: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectMySQL, db, dir)
	if err != nil {
		return nil, fmt.Errorf("goose provider: %w", err)
	}
	return p, nil
}

// Migrate applies every migration not yet applied and returns how many it
// applied: zero on an up-to-date database.
func Migrate(ctx context.Context, db *sql.DB) (int, error) {
	p, err := provider(db)
	if err != nil {
		return 0, err
	}
	results, err := p.Up(ctx)
	if err != nil {
		return len(results), fmt.Errorf("apply migrations: %w", err)
	}
	return len(results), nil
}

// Version is the newest migration applied to db, and the newest one this
// binary carries.
func Version(ctx context.Context, db *sql.DB) (current, latest int64, err error) {
	p, err := provider(db)
	if err != nil {
		return 0, 0, err
	}
	current, err = p.GetDBVersion(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("read schema version: %w", err)
	}
	sources := p.ListSources()
	if len(sources) > 0 {
		latest = sources[len(sources)-1].Version
	}
	return current, latest, nil
}

// ErrBehind is the check's answer on a database whose schema is older
// than the migrations this binary carries.
var ErrBehind = errors.New("the database's schema is older than this program's")

// Check is a program's schema readiness check: ErrBehind, with both
// versions and what to run, while the database lacks a migration this
// binary carries. A schema seen up to date stays so (migrations only move
// forward), and is not read again. A database that does not answer or
// refuses the connection (a wrong password, a Galera node not synced) is
// not this check's to report (the MySQL check is): it passes until a
// version has been read. A refusal of the read itself (no right on the
// version table) fails it, with the reason.
type Check struct {
	db      *sql.DB
	table   string
	current atomic.Bool
}

// NewCheck checks the database named database on db, or db's own when
// database is "".
func NewCheck(db *sql.DB, database string) *Check {
	table := "goose_db_version"
	if database != "" {
		table = "`" + strings.ReplaceAll(database, "`", "``") + "`." + table
	}
	return &Check{db: db, table: table}
}

// noSuchTable is MySQL's error for a table that does not exist.
const noSuchTable = 1146

// connectionRefusal are the server's refusals of the connection itself,
// not of the read: the MySQL check's to report (the api sells without
// MySQL, so they must not make it unready through this check).
var connectionRefusal = map[uint16]bool{
	1040: true, // too many connections
	1044: true, // access to the database denied at connection
	1045: true, // access denied: a wrong user or password
	1047: true, // a Galera node not synced
	1049: true, // no such database
	1129: true, // host blocked after connection errors
	1130: true, // host not allowed to connect
}

// Check reads the version unless it was seen current.
func (c *Check) Check(ctx context.Context) error {
	if c.current.Load() {
		return nil
	}
	// goose's own read creates its version table when it is missing: a
	// readiness check only reads (and needs no DDL rights).
	// MAX(version_id) is goose's own reading of the version (its provider
	// deletes a row to roll a migration back).
	var current sql.NullInt64
	err := c.db.QueryRowContext(ctx, "SELECT MAX(version_id) FROM "+c.table).Scan(&current)
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me) && me.Number == noSuchTable:
		// No migration was ever applied.
	case errors.As(err, &me) && connectionRefusal[me.Number]:
		return nil
	case errors.As(err, &me):
		// The server answered, and refused: no other check reports it,
		// and it does not pass by itself.
		return fmt.Errorf("read the schema's version from %s: %w", c.table, err)
	case err != nil:
		return nil
	}
	latest, err := Latest()
	if err != nil {
		return err
	}
	if current.Int64 < latest {
		return fmt.Errorf("%w: version %d, this program needs %d: run seckillctl migrate", ErrBehind, current.Int64, latest)
	}
	c.current.Store(true)
	return nil
}

// Latest is the newest migration this binary carries.
func Latest() (int64, error) {
	dir, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return 0, fmt.Errorf("migrations dir: %w", err)
	}
	var latest int64
	err = fs.WalkDir(dir, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		v, err := goose.NumericComponent(path)
		if err != nil {
			return fmt.Errorf("migration %s: %w", path, err)
		}
		latest = max(latest, v)
		return nil
	})
	return latest, err
}

// Seed loads the demo shop types, shops, and notes with their authors.
// Loading twice changes nothing.
func Seed(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("seed: begin: %w", err)
	}
	defer tx.Rollback()
	for _, stmt := range seedStatements() {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("seed: commit: %w", err)
	}
	return nil
}

// seedStatements splits seed.sql on the semicolons that end its lines and
// drops comment lines; the file is ours, so no SQL parser is needed.
func seedStatements() []string {
	var lines []string
	for _, line := range strings.Split(seedSQL, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			lines = append(lines, line)
		}
	}
	var stmts []string
	for _, s := range strings.Split(strings.Join(lines, "\n"), ";\n") {
		if s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), ";")); s != "" {
			stmts = append(stmts, s)
		}
	}
	return stmts
}

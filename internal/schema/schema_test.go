package schema_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/schema"
	"github.com/seckill/seckill/internal/testsupport"
)

// snapshot describes every column and index of the database, so that two
// snapshots differ if a migration changed anything.
func snapshot(t *testing.T, db *sql.DB, database string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	for _, q := range []string{
		`SELECT CONCAT_WS('|', table_name, column_name, column_type, is_nullable, IFNULL(column_default, 'NULL'), extra)
		   FROM information_schema.columns WHERE table_schema = ? ORDER BY table_name, ordinal_position`,
		`SELECT CONCAT_WS('|', table_name, index_name, non_unique, seq_in_index, column_name)
		   FROM information_schema.statistics WHERE table_schema = ? ORDER BY table_name, index_name, seq_in_index`,
	} {
		rows, err := db.QueryContext(ctx, q, database)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			b.WriteString(line + "\n")
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

func TestMigrateAppliesOnceThenChangesNothing(t *testing.T) {
	m := testsupport.MustEmptyMySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	applied, err := schema.Migrate(ctx, m.DB)
	if err != nil {
		t.Fatal(err)
	}
	if applied == 0 {
		t.Fatal("Migrate on an empty database applied nothing")
	}
	current, latest, err := schema.Version(ctx, m.DB)
	if err != nil {
		t.Fatal(err)
	}
	if current != latest || latest == 0 {
		t.Fatalf("version %d after migrating, latest is %d", current, latest)
	}
	before := snapshot(t, m.DB, m.Database)
	for _, table := range []string{"tb_user", "tb_shop", "tb_shop_type", "tb_voucher", "tb_seckill_voucher", "tb_voucher_order", "tb_voucher_order_failure", "tb_blog", "tb_user_info"} {
		if !strings.Contains(before, table+"|id|") && !strings.Contains(before, table+"|voucher_id|") && !strings.Contains(before, table+"|order_id|") && !strings.Contains(before, table+"|user_id|") {
			t.Errorf("table %s missing after migration", table)
		}
	}
	if !strings.Contains(before, "tb_voucher_order|uk_user_voucher|0|1|user_id\ntb_voucher_order|uk_user_voucher|0|2|voucher_id") {
		t.Error("tb_voucher_order lacks UNIQUE (user_id, voucher_id)")
	}

	again, err := schema.Migrate(ctx, m.DB)
	if err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if again != 0 {
		t.Fatalf("second Migrate applied %d migrations", again)
	}
	if after := snapshot(t, m.DB, m.Database); after != before {
		t.Fatalf("schema changed on the second Migrate:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func TestSeedTwiceLoadsOnce(t *testing.T) {
	m := testsupport.MustMySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	counts := func() string {
		var shops, types, blogs, users int
		if err := m.DB.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM tb_shop), (SELECT COUNT(*) FROM tb_shop_type),
			(SELECT COUNT(*) FROM tb_blog), (SELECT COUNT(*) FROM tb_user)`).Scan(&shops, &types, &blogs, &users); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d shops, %d types, %d blogs, %d users", shops, types, blogs, users)
	}
	if err := schema.Seed(ctx, m.DB); err != nil {
		t.Fatal(err)
	}
	first := counts()
	if strings.Contains(first, " 0 ") || strings.HasPrefix(first, "0 ") {
		t.Fatal("Seed loaded nothing")
	}
	if err := schema.Seed(ctx, m.DB); err != nil {
		t.Fatal(err)
	}
	if second := counts(); second != first {
		t.Fatalf("after a second Seed: %s, after the first: %s", second, first)
	}
}

// The server commits an order durably: the redo log and the binlog are
// fsynced at every commit, so a committed order survives a power loss. The
// local stack (deploy/local/stack.sh), docker-compose and the test
// containers all run with these settings.
func TestServerCommitsDurably(t *testing.T) {
	m := testsupport.MustEmptyMySQL(t)
	var syncBinlog, flushAtCommit int
	if err := m.DB.QueryRow("SELECT @@sync_binlog, @@innodb_flush_log_at_trx_commit").Scan(&syncBinlog, &flushAtCommit); err != nil {
		t.Fatal(err)
	}
	if syncBinlog != 1 || flushAtCommit != 1 {
		t.Fatalf("sync_binlog=%d, innodb_flush_log_at_trx_commit=%d; want 1 and 1", syncBinlog, flushAtCommit)
	}
}

// The programs' schema check: a database never migrated, or lacking the
// newest migration, is behind (naming both versions and the command);
// migrated, it passes; a database that does not answer is not this
// check's to report.
func TestCheckRefusesAnOlderSchema(t *testing.T) {
	m := testsupport.MustEmptyMySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	check := schema.NewCheck(m.DB, "")
	if err := check.Check(ctx); !errors.Is(err, schema.ErrBehind) || !strings.Contains(err.Error(), "version 0") || !strings.Contains(err.Error(), "seckillctl migrate") {
		t.Fatalf("a database never migrated: %v, want ErrBehind at version 0 saying what to run", err)
	}
	var tables int
	if err := m.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()").Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("%d tables after the check (%v): a readiness check must not write", tables, err)
	}
	if _, err := schema.Migrate(ctx, m.DB); err != nil {
		t.Fatal(err)
	}
	_, latest, err := schema.Version(ctx, m.DB)
	if err != nil {
		t.Fatal(err)
	}
	if carried, err := schema.Latest(); err != nil || carried != latest {
		t.Fatalf("Latest = %d, %v; goose's newest source is %d", carried, err, latest)
	}
	// The newest migration's row gone: the database as a binary one
	// release older left it.
	if _, err := m.DB.ExecContext(ctx, "DELETE FROM goose_db_version WHERE version_id = ?", latest); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("version %d, this program needs %d", latest-1, latest)
	if err := check.Check(ctx); !errors.Is(err, schema.ErrBehind) || !strings.Contains(err.Error(), want) {
		t.Fatalf("a database one migration behind: %v, want ErrBehind saying %q", err, want)
	}
	if _, err := m.DB.ExecContext(ctx, "INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, TRUE)", latest); err != nil {
		t.Fatal(err)
	}
	if err := check.Check(ctx); err != nil {
		t.Fatalf("a database up to date: %v", err)
	}
	unreachable, err := sql.Open("mysql", "seckill:seckill@tcp("+testsupport.FreeAddr(t)+")/seckill?timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	defer unreachable.Close()
	if err := schema.NewCheck(unreachable, "").Check(ctx); err != nil {
		t.Fatalf("a database that does not answer: %v, want nil (the MySQL check reports it)", err)
	}
	refused, err := sql.Open("mysql", m.User+":not-the-password@tcp("+m.Addr+")/"+m.Database)
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Close()
	if err := schema.NewCheck(refused, "").Check(ctx); err != nil {
		t.Fatalf("a connection refused for a wrong password: %v, want nil (the MySQL check reports it)", err)
	}
}

// A version table the server refuses to read (here one whose column is
// gone; an account with no right on it takes the same path) fails the
// check, saying why, rather than passing it for ever.
func TestCheckFailsWhenTheVersionCannotBeRead(t *testing.T) {
	m := testsupport.MustMySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := m.DB.ExecContext(ctx, "ALTER TABLE goose_db_version CHANGE version_id version BIGINT NOT NULL"); err != nil {
		t.Fatal(err)
	}
	err := schema.NewCheck(m.DB, "").Check(ctx)
	if err == nil || errors.Is(err, schema.ErrBehind) || !strings.Contains(err.Error(), "goose_db_version") || !strings.Contains(err.Error(), "1054") {
		t.Fatalf("a version table the server refuses to read: %v, want the refusal (1054) naming the table", err)
	}
}

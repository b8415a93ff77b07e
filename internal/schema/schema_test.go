package schema_test

import (
	"context"
	"database/sql"
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

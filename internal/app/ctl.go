package app

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/seckill/seckill/internal/mysqldb"
	"github.com/seckill/seckill/internal/schema"
)

// CtlUsage lists seckillctl's commands.
const CtlUsage = `usage: seckillctl migrate|version|seed
  migrate    apply every migration not yet applied
  version    the schema version applied and the newest known
  seed       load the demo shop types and shops (idempotent)`

// Ctl runs one seckillctl command against the database of dsn and reports
// to out.
func Ctl(cmd, dsn string, out io.Writer) error {
	if cmd != "migrate" && cmd != "version" && cmd != "seed" {
		return fmt.Errorf("unknown command %q\n%s", cmd, CtlUsage)
	}
	db, err := mysqldb.Open(dsn)
	if err != nil {
		return fmt.Errorf("SECKILL_MYSQL_DSN: %w", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	switch cmd {
	case "migrate":
		n, err := schema.Migrate(ctx, db)
		if err != nil {
			return err
		}
		current, _, err := schema.Version(ctx, db)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "migrate: applied %d migration(s); schema version %d on %s\n", n, current, mysqldb.Addr(dsn))
	case "version":
		current, latest, err := schema.Version(ctx, db)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "schema version %d (newest known: %d)\n", current, latest)
	case "seed":
		if err := schema.Seed(ctx, db); err != nil {
			return err
		}
		fmt.Fprintln(out, "seed: demo shop types and shops present")
	}
	return nil
}

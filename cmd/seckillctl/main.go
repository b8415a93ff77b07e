// Command seckillctl runs the project's one-off operations against the
// database: applying the embedded migrations and loading the demo data.
//
//	seckillctl migrate    apply every migration not yet applied
//	seckillctl version    the schema version applied and the newest known
//	seckillctl seed       load the demo shop types and shops (idempotent)
//
// It reads SECKILL_MYSQL_DSN like the other programs.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/seckill/seckill/internal/envconfig"
	"github.com/seckill/seckill/internal/mysqldb"
	"github.com/seckill/seckill/internal/schema"
)

const usage = "usage: seckillctl migrate|version|seed"

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "seckillctl:", err)
		os.Exit(1)
	}
}

func run(cmd string) error {
	r := envconfig.New()
	dsn := r.String("SECKILL_MYSQL_DSN", "seckill:seckill@tcp(127.0.0.1:13306)/seckill")
	if err := r.Err(); err != nil {
		return err
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
		fmt.Printf("migrate: applied %d migration(s); schema version %d on %s\n", n, current, mysqldb.Addr(dsn))
	case "version":
		current, latest, err := schema.Version(ctx, db)
		if err != nil {
			return err
		}
		fmt.Printf("schema version %d (newest known: %d)\n", current, latest)
	case "seed":
		if err := schema.Seed(ctx, db); err != nil {
			return err
		}
		fmt.Println("seed: demo shop types and shops present")
	default:
		return fmt.Errorf("unknown command %q; %s", cmd, usage)
	}
	return nil
}

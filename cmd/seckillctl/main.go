// Command seckillctl runs the project's one-off operations against the
// database (app.CtlUsage lists them). It reads SECKILL_MYSQL_DSN like the
// other programs.
package main

import (
	"fmt"
	"os"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/config"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, app.CtlUsage)
		os.Exit(2)
	}
	dsn, err := config.MySQLDSN(os.LookupEnv)
	if err == nil {
		err = app.Ctl(os.Args[1], dsn, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "seckillctl:", err)
		os.Exit(1)
	}
}

// Command seckillctl runs the project's one-off operations (app.CtlUsage
// lists them). It reads the SECKILL_* variables like the other programs.
package main

import (
	"fmt"
	"os"

	"github.com/seckill/seckill/internal/app"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, app.CtlUsage)
		os.Exit(2)
	}
	if err := app.Ctl(os.Args[1:], os.LookupEnv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "seckillctl:", err)
		os.Exit(1)
	}
}

// Command order-writer consumes accepted orders from Kafka and writes them to MySQL. Its settings are SECKILL_*
// environment variables (docs/configuration.md); SIGTERM stops it
// gracefully.
package main

import (
	"os"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/telemetry/export"
)

func main() {
	os.Exit(app.Main("order-writer", config.LoadOrderWriter, app.NewOrderWriter, export.Setup))
}

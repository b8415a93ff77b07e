// Command cache-invalidator follows the MySQL binlog and deletes the Redis cache keys of changed rows. Its settings are SECKILL_*
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
	os.Exit(app.Main("cache-invalidator", config.LoadCacheInvalidator, app.NewCacheInvalidator, export.Setup))
}

package seckill

import (
	"time"

	"github.com/seckill/seckill/internal/envconfig"
)

// Config is what the API and the order-writer share about the flash sale.
type Config struct {
	OrdersTopic    string
	OrdersDLQ      string
	KeyPrefix      string        // of every flash-sale key in Redis
	PublishTimeout time.Duration // a publish that takes longer has failed
	// PublishBatchWait is how long the producer waits to fill a batch:
	// longer means fewer, larger produce requests for the broker.
	PublishBatchWait time.Duration
	SoldOutTTL       time.Duration // how long an API instance remembers a sell-out
	IDBlock          int64         // order ids leased per Redis round trip
	RelayAge         time.Duration // a reservation older than this is republished
	RelayInterval    time.Duration
}

// LoadConfig reads the flash-sale variables (see README.md).
func LoadConfig(r *envconfig.Reader) Config {
	return Config{
		OrdersTopic:      r.String("SECKILL_ORDERS_TOPIC", "seckill.orders"),
		OrdersDLQ:        r.String("SECKILL_ORDERS_DLQ_TOPIC", "seckill.orders.dlq"),
		KeyPrefix:        r.String("SECKILL_KEY_PREFIX", ""),
		PublishTimeout:   r.Duration("SECKILL_PUBLISH_TIMEOUT", 3*time.Second),
		PublishBatchWait: r.Duration("SECKILL_PUBLISH_BATCH_WAIT", 5*time.Millisecond),
		SoldOutTTL:       r.Duration("SECKILL_SOLDOUT_TTL", 2*time.Second),
		IDBlock:          int64(r.Int("SECKILL_ID_BLOCK", 1000, 1, 1_000_000)),
		RelayAge:         r.Duration("SECKILL_RELAY_AGE", 10*time.Second),
		RelayInterval:    r.Duration("SECKILL_RELAY_INTERVAL", 2*time.Second),
	}
}

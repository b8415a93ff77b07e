package cache

import (
	"time"

	"github.com/seckill/seckill/internal/envconfig"
)

// LoadStrategy reads a family's strategy from SECKILL_CACHE_<FAMILY>_MODE
// (ttl or logical) and SECKILL_CACHE_<FAMILY>_TTL; the rest follows.
func LoadStrategy(r *envconfig.Reader, family, mode string, ttl time.Duration) Strategy {
	mode = r.OneOf("SECKILL_CACHE_"+family+"_MODE", mode, "ttl", "logical")
	ttl = r.Duration("SECKILL_CACHE_"+family+"_TTL", ttl)
	s := Strategy{NullTTL: 2 * time.Minute, Lease: 3 * time.Second, Wait: 3 * time.Second}
	if mode == "logical" {
		s.Logical = ttl
	} else {
		s.TTL, s.Jitter = ttl, ttl/10
	}
	return s
}

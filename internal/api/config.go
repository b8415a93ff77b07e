package api

import (
	"net"
	"time"

	"github.com/seckill/seckill/internal/cache"
	"github.com/seckill/seckill/internal/ratelimit"
	"github.com/seckill/seckill/internal/user"
)

// Config is the HTTP API's own configuration.
type Config struct {
	Addr       string
	BodyLimit  int64 // bytes; larger bodies get 413
	SessionTTL time.Duration
	// SessionCache is how long an instance remembers a loaded session
	// (user.CachedSessions); it bounds how long a logout may take to reach
	// an instance that missed its announcement. Zero: every request asks
	// Redis.
	SessionCache time.Duration
	// TrustedProxies may set X-Forwarded-For; from anyone else the client IP
	// is the connection's.
	TrustedProxies []*net.IPNet
	// AllowedOrigins are the web origins besides the API's own whose pages
	// may ask for login codes (the course's client served on another
	// port, say); every other site is refused (403).
	AllowedOrigins []string
	// AdminToken is the X-Admin-Token of admin routes; empty disables them.
	AdminToken string
	RatePrefix string
	Limits     Limits
	CodePolicy user.CodePolicy
	// BenchNoop mounts POST /bench/noop: a logged-in route that does
	// nothing, the baseline of make bench.
	BenchNoop bool
	// ShopCache and TypeCache are the cache strategies of shops and of the
	// shop-type list.
	ShopCache, TypeCache cache.Strategy
}

// RoutePolicy limits one route per client IP and per logged-in user. When
// Redis cannot be reached, FailOpen lets requests through; otherwise they
// get 503. Local keeps the counts in each API instance instead of Redis
// (ratelimit.Local: no round trip, each instance allows the limit).
type RoutePolicy struct {
	PerIP, PerUser ratelimit.Limit
	FailOpen       bool
	Local          bool
}

// Limits are the rate-limited routes' policies. Public is the read routes
// anyone may call without a login (shops, shop types, vouchers), one
// budget per client address across them.
type Limits struct {
	Code, Login, Seckill, Public, Lookup RoutePolicy
	// Challenge is the challenges of the sales that ask for one and the
	// answers to them.
	Challenge RoutePolicy
}

package api

import (
	"net"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/cache"
	"github.com/seckill/seckill/internal/envconfig"
	"github.com/seckill/seckill/internal/ratelimit"
	"github.com/seckill/seckill/internal/user"
)

// Config is the HTTP API's own configuration.
type Config struct {
	Addr       string
	BodyLimit  int64 // bytes; larger bodies get 413
	SessionTTL time.Duration
	// TrustedProxies may set X-Forwarded-For; from anyone else the client IP
	// is the connection's.
	TrustedProxies []*net.IPNet
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
	// Pprof mounts /debug/pprof/ on the API's port: for profiling runs
	// only, since the API's port faces clients.
	Pprof bool
}

// RoutePolicy limits one route per client IP and per logged-in user. When
// Redis cannot be reached, FailOpen lets requests through; otherwise they
// get 503.
type RoutePolicy struct {
	PerIP, PerUser ratelimit.Limit
	FailOpen       bool
}

// Limits are the rate-limited routes' policies.
type Limits struct {
	Code, Login, Seckill RoutePolicy
}

// LoadConfig reads the API's variables (see README.md).
func LoadConfig(r *envconfig.Reader) Config {
	c := Config{
		Addr:       r.HostPort("SECKILL_API_ADDR", "127.0.0.1:8081"),
		BodyLimit:  int64(r.Int("SECKILL_API_BODY_LIMIT", 64<<10, 1<<10, 10<<20)),
		SessionTTL: r.Duration("SECKILL_SESSION_TTL", 30*time.Minute),
		AdminToken: r.String("SECKILL_ADMIN_TOKEN", ""),
		RatePrefix: r.String("SECKILL_RATE_PREFIX", "rate:"),
		Limits: Limits{
			Code:    routePolicy(r, "CODE", "20/1m", "off", "open"),
			Login:   routePolicy(r, "LOGIN", "60/1m", "off", "open"),
			Seckill: routePolicy(r, "SECKILL", "200/1s", "5/1s", "closed"),
		},
		CodePolicy: user.DefaultCodePolicy,
		BenchNoop:  r.Bool("SECKILL_API_BENCH_NOOP", false),
		Pprof:      r.Bool("SECKILL_API_PPROF", false),
		ShopCache:  cache.LoadStrategy(r, "SHOP", "ttl", 30*time.Minute),
		TypeCache:  cache.LoadStrategy(r, "SHOP_TYPE", "logical", 30*time.Minute),
	}
	if c.AdminToken != "" && len(c.AdminToken) < 16 {
		r.Fail("SECKILL_ADMIN_TOKEN", "(hidden)", "want at least 16 characters")
	}
	if c.RatePrefix == "" {
		r.Fail("SECKILL_RATE_PREFIX", "", "must not be empty")
	}
	c.TrustedProxies = trustedProxies(r, "SECKILL_API_TRUSTED_PROXIES")
	c.CodePolicy.TTL = r.Duration("SECKILL_CODE_TTL", c.CodePolicy.TTL)
	c.CodePolicy.Cooldown = r.Duration("SECKILL_CODE_COOLDOWN", c.CodePolicy.Cooldown)
	c.CodePolicy.DailyMax = r.Int("SECKILL_CODE_DAILY_MAX", c.CodePolicy.DailyMax, 1, 1000)
	c.CodePolicy.MaxTries = r.Int("SECKILL_CODE_MAX_TRIES", c.CodePolicy.MaxTries, 1, 100)
	return c
}

func routePolicy(r *envconfig.Reader, route, perIP, perUser, failMode string) RoutePolicy {
	return RoutePolicy{
		PerIP:    limit(r, "SECKILL_RATE_"+route+"_IP", perIP),
		PerUser:  limit(r, "SECKILL_RATE_"+route+"_USER", perUser),
		FailOpen: r.OneOf("SECKILL_RATE_"+route+"_FAIL", failMode, "open", "closed") == "open",
	}
}

func limit(r *envconfig.Reader, key, def string) ratelimit.Limit {
	v := r.String(key, def)
	l, err := ratelimit.ParseLimit(v)
	if err != nil {
		r.Fail(key, v, err.Error())
	}
	return l
}

// trustedProxies reads a comma-separated list of IPs and CIDRs.
func trustedProxies(r *envconfig.Reader, key string) []*net.IPNet {
	var nets []*net.IPNet
	for _, s := range strings.Split(r.String(key, ""), ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "/") {
			if ip := net.ParseIP(s); ip != nil {
				bits := 8 * len(ip.To16())
				if ip.To4() != nil {
					ip, bits = ip.To4(), 32
				}
				nets = append(nets, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
				continue
			}
		}
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			r.Fail(key, s, "want IP addresses or CIDR ranges, comma-separated")
			continue
		}
		nets = append(nets, n)
	}
	return nets
}

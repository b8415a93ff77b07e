// Package config is where the programs' settings come from: it reads the
// SECKILL_* environment variables into plain structs, and reports every bad
// one by its name, so a misconfigured program stops at start with a message
// the operator can act on. No other package reads the environment.
package config

import (
	"context"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/api"
	"github.com/seckill/seckill/internal/binlog"
	"github.com/seckill/seckill/internal/botcheck"
	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/cache"
	"github.com/seckill/seckill/internal/daemon"
	"github.com/seckill/seckill/internal/jwtauth"
	"github.com/seckill/seckill/internal/ratelimit"
	"github.com/seckill/seckill/internal/redisconn"
	"github.com/seckill/seckill/internal/user"
)

// Lookup is where variables come from: os.LookupEnv, or a map's in tests.
type Lookup func(key string) (string, bool)

// Sale is what the API and the order-writer share about the flash sale.
type Sale struct {
	OrdersTopic    string
	OrdersDLQ      string
	KeyPrefix      string        // of every flash-sale key in Redis
	PublishTimeout time.Duration // a publish that takes longer has failed
	// PublishLinger is the least time between two produce requests on a
	// partition (broker.Producer.Linger); zero (unset) lets broker.Linger
	// choose by the topic's replication.
	PublishLinger time.Duration
	// PublishCompression is the order events' codec: none, lz4 or zstd.
	// None by default: measured, lz4 did not pay on ~100-byte events
	// (docs/performance.md).
	PublishCompression string
	SoldOutTTL         time.Duration // how long an API instance remembers a sell-out
	// DurabilityInterval is how often the API reads which partitions of
	// the orders topic have a leader and enough in-sync replicas.
	DurabilityInterval time.Duration
	IDBlock            int64         // order ids leased per Redis round trip
	RelayAge           time.Duration // a reservation older than this is republished
	RelayInterval      time.Duration
	RelayLease         time.Duration // the relay's lease: how long a dead holder keeps it
	DrawInterval       time.Duration // how often the drawer looks for draws due
	SaleKeep           time.Duration // how long an ended, settled sale's keys stay in Redis
	// EpochInterval is how often a program reads Redis's replication id,
	// which changes when Redis restarts or a replica takes over.
	EpochInterval time.Duration
	// OrderStatusTTL is how long MySQL's answer to an order lookup is
	// kept in Redis once the order's sale has left it.
	OrderStatusTTL time.Duration
}

// API is the api program's configuration.
type API struct {
	daemon.Common
	HTTP api.Config
	Sale Sale
	// AdminAddr is where /metrics, /healthz, /readyz and pprof listen:
	// loopback by default, never the clients' port.
	AdminAddr string
	// DevMode writes login codes to the log instead of sending them, and
	// says so loudly at start: for a developer's machine only.
	DevMode bool
	// ShopFilter is the capacity of the filter of shop ids (0: none).
	ShopFilter int
	// AutoPipeline sends the gate's decisions and the session lookups
	// through go-redis's autopipeliner, so that concurrent requests share
	// Redis round trips.
	AutoPipeline bool
	Sessions     Sessions
	TLS          TLS
	// BotCheck is the lifetimes of the order paths and challenges of the
	// sales that keep bots out.
	BotCheck botcheck.Config
	// CacheRedis holds the shop caches and order-status answers: a Redis
	// whose policy may evict them, so that the one holding sessions and
	// the sale need evict nothing. Zero: the caches share Common.Redis.
	CacheRedis redisconn.Config
}

// The session modes.
const (
	SessionsRedis = "redis"
	SessionsJWT   = "jwt"
)

// Sessions is how the API authenticates: redis token sessions (the
// course's) or jwt access and refresh tokens.
type Sessions struct {
	Mode                                string
	AccessTTL, RefreshTTL, RefreshGrace time.Duration
	// RevocationsStale is how long the revocation follower may go without
	// a read before the instance reports itself not ready.
	RevocationsStale time.Duration
	Keys             *jwtauth.Keyring // the jwt mode's
}

// TLS is the API's certificate; empty: plain HTTP.
type TLS struct{ Cert, Key string }

// OrderWriter is the order-writer's configuration.
type OrderWriter struct {
	daemon.Common
	Sale      Sale
	AdminAddr string
	Group     string
	BatchSize int
	BatchWait time.Duration
	// FetchWait is how long a fetch of a partition waits for 64 KB of
	// events: also how often an idle partition is polled.
	FetchWait time.Duration
	// SaleChecks is how often every voucher on sale is compared between
	// Redis and MySQL.
	SaleChecks time.Duration
	// StuckAfter is how long a batch may keep failing before it is
	// reported (log, seckill_consumer_batches_stuck_total).
	StuckAfter time.Duration
}

// CacheInvalidator is the cache-invalidator's configuration.
type CacheInvalidator struct {
	daemon.Common
	AdminAddr     string
	Binlog        binlog.Source
	Database      string
	PositionFile  string
	KeyPrefix     string
	RetryTopic    string
	DLQTopic      string
	Group         string
	MaxAttempts   int
	DeleteTimeout time.Duration
	// ShopFilter is the capacity of the filter of shop ids, which the
	// follower adds inserted shops to; the API's must be the same.
	ShopFilter int
	// CacheRedis is where the shop caches it deletes live (API.CacheRedis).
	CacheRedis redisconn.Config
}

// LoadAPI reads the api's variables.
func LoadAPI(lookup Lookup) (API, error) {
	r := NewFrom(lookup)
	c := loadAPI(r)
	return c, r.Err()
}

func loadAPI(r *Reader) API {
	return API{Common: loadCommon(r), HTTP: loadHTTP(r), Sale: loadSale(r),
		AdminAddr: r.HostPort("SECKILL_ADMIN_ADDR", "127.0.0.1:9100"), DevMode: r.Bool("SECKILL_DEV_MODE", false),
		ShopFilter: shopFilter(r), AutoPipeline: r.Bool("SECKILL_REDIS_AUTOPIPELINE", true),
		Sessions: loadSessions(r), TLS: loadTLS(r), BotCheck: loadBotCheck(r), CacheRedis: loadCacheRedis(r)}
}

// LoadOrderWriter reads the order-writer's variables.
func LoadOrderWriter(lookup Lookup) (OrderWriter, error) {
	r := NewFrom(lookup)
	c := loadOrderWriter(r)
	return c, r.Err()
}

func loadOrderWriter(r *Reader) OrderWriter {
	return OrderWriter{
		Common:     loadCommon(r),
		Sale:       loadSale(r),
		AdminAddr:  r.HostPort("SECKILL_ADMIN_ADDR", "127.0.0.1:9101"),
		Group:      r.String("SECKILL_ORDER_GROUP", "seckill-order-writer"),
		BatchSize:  r.Int("SECKILL_ORDER_BATCH_SIZE", 2000, 1, 10000),
		BatchWait:  r.Duration("SECKILL_ORDER_BATCH_WAIT", 20*time.Millisecond),
		FetchWait:  r.Duration("SECKILL_ORDER_FETCH_WAIT", 50*time.Millisecond),
		SaleChecks: r.Duration("SECKILL_SALE_CHECK_INTERVAL", 30*time.Second),
		StuckAfter: r.Duration("SECKILL_ORDER_STUCK_AFTER", broker.DefaultStuckAfter),
	}
}

// LoadCacheInvalidator reads the cache-invalidator's variables.
func LoadCacheInvalidator(lookup Lookup) (CacheInvalidator, error) {
	r := NewFrom(lookup)
	c := loadCacheInvalidator(r)
	return c, r.Err()
}

func loadCacheInvalidator(r *Reader) CacheInvalidator {
	return CacheInvalidator{
		Common:    loadCommon(r),
		AdminAddr: r.HostPort("SECKILL_ADMIN_ADDR", "127.0.0.1:9102"),
		Binlog: binlog.Source{
			Addr:     r.HostPort("SECKILL_BINLOG_ADDR", "127.0.0.1:13306"),
			User:     r.String("SECKILL_BINLOG_USER", "canal"),
			Password: r.String("SECKILL_BINLOG_PASSWORD", "canal"),
			Flavor:   r.OneOf("SECKILL_BINLOG_FLAVOR", "mariadb", "mariadb", "mysql"),
			ServerID: uint32(r.Int("SECKILL_BINLOG_SERVER_ID", 1001, 1, 1<<32-1)),
		},
		Database:      r.String("SECKILL_BINLOG_DATABASE", "seckill"),
		PositionFile:  r.String("SECKILL_BINLOG_POSITION_FILE", ".stack/cache-invalidator/position.json"),
		KeyPrefix:     r.String("SECKILL_KEY_PREFIX", ""),
		RetryTopic:    r.String("SECKILL_INVALIDATE_RETRY_TOPIC", "cache.invalidate.retry"),
		DLQTopic:      r.String("SECKILL_INVALIDATE_DLQ_TOPIC", "cache.invalidate.dlq"),
		Group:         r.String("SECKILL_INVALIDATE_GROUP", "seckill-cache-invalidator"),
		MaxAttempts:   r.Int("SECKILL_INVALIDATE_MAX_ATTEMPTS", 12, 1, 100),
		DeleteTimeout: r.Duration("SECKILL_INVALIDATE_DELETE_TIMEOUT", time.Second),
		ShopFilter:    shopFilter(r),
		CacheRedis:    loadCacheRedis(r),
	}
}

// defaultMySQLDSN is the local stack's database (deploy/local/ports).
const defaultMySQLDSN = "seckill:seckill@tcp(127.0.0.1:13306)/seckill"

// MySQLDSN is the one variable seckillctl needs.
func MySQLDSN(lookup Lookup) (string, error) {
	r := NewFrom(lookup)
	dsn := r.String("SECKILL_MYSQL_DSN", defaultMySQLDSN)
	return dsn, r.Err()
}

// Ctl is what seckillctl's commands need: the stores and the sale's keys
// (every command), the orders topic and the order-writer's group whose
// progress reconcile waits for, the dead-letter topics (dlq), and the
// session settings that logout-user revokes with.
type Ctl struct {
	daemon.Common
	Sale     Sale
	Group    string
	Sessions Sessions
	// The cache-invalidator's retry and dead-letter topics, for dlq.
	CacheRetryTopic, CacheDLQTopic string
	// Wait is how long migrate, seed and topics wait for their server.
	Wait time.Duration
}

// CtlWait is how long seckillctl's migrate, seed and topics wait for their
// server to answer (one started beside them, as a compose file does):
// zero, the default, tries once.
func CtlWait(lookup Lookup) (time.Duration, error) {
	r := NewFrom(lookup)
	w := r.Duration("SECKILL_CTL_WAIT", 0)
	return w, r.Err()
}

// LoadCtl reads seckillctl's variables.
func LoadCtl(lookup Lookup) (Ctl, error) {
	r := NewFrom(lookup)
	c := loadCtl(r)
	return c, r.Err()
}

func loadCtl(r *Reader) Ctl {
	return Ctl{Common: loadCommon(r), Sale: loadSale(r), Group: r.String("SECKILL_ORDER_GROUP", "seckill-order-writer"),
		Sessions:        loadSessions(r),
		CacheRetryTopic: r.String("SECKILL_INVALIDATE_RETRY_TOPIC", "cache.invalidate.retry"),
		CacheDLQTopic:   r.String("SECKILL_INVALIDATE_DLQ_TOPIC", "cache.invalidate.dlq"),
		Wait:            r.Duration("SECKILL_CTL_WAIT", 0)}
}

// LoadCommon reads the variables every program shares, with the flash
// sale's: what a tool that drives the system needs to reach it.
func LoadCommon(lookup Lookup) (daemon.Common, Sale, error) {
	r := NewFrom(lookup)
	c, s := loadCommon(r), loadSale(r)
	return c, s, r.Err()
}

// loadCommon reads the shared SECKILL_* variables; errors accumulate in r.
func loadCommon(r *Reader) daemon.Common {
	c := daemon.Common{
		LogFormat:       r.OneOf("SECKILL_LOG_FORMAT", "text", "text", "json"),
		Redis:           loadRedis(r),
		MySQLDSN:        r.String("SECKILL_MYSQL_DSN", defaultMySQLDSN),
		KafkaBrokers:    r.HostPorts("SECKILL_KAFKA_BROKERS", "127.0.0.1:19092"),
		ShutdownTimeout: r.Duration("SECKILL_SHUTDOWN_TIMEOUT", 15*time.Second),
		Pprof:           r.Bool("SECKILL_PPROF", false),
	}
	level := r.OneOf("SECKILL_LOG_LEVEL", "info", "debug", "info", "warn", "error")
	_ = c.LogLevel.UnmarshalText([]byte(level))
	return c
}

// loadRedis reads the Redis topology: SECKILL_REDIS_CLUSTER (a cluster's
// seeds) or SECKILL_REDIS_ADDR (one node, the local stack's by default);
// naming both is refused.
func loadRedis(r *Reader) redisconn.Config {
	c := redisconn.Config{Password: r.String("SECKILL_REDIS_PASSWORD", ""), DB: r.Int("SECKILL_REDIS_DB", 0, 0, 15)}
	_, addrSet := r.raw("SECKILL_REDIS_ADDR")
	if _, clusterSet := r.raw("SECKILL_REDIS_CLUSTER"); clusterSet {
		c.Cluster = r.HostPorts("SECKILL_REDIS_CLUSTER", "")
		if addrSet {
			c.Addr = r.HostPort("SECKILL_REDIS_ADDR", "")
		}
	} else {
		c.Addr = r.HostPort("SECKILL_REDIS_ADDR", "127.0.0.1:16379")
	}
	if err := c.Validate(); err != nil && len(c.Cluster) > 0 {
		r.Fail("SECKILL_REDIS_CLUSTER", strings.Join(c.Cluster, ","), err.Error())
	}
	return c
}

// loadCacheRedis reads the caches' Redis: SECKILL_CACHE_REDIS_ADDR (one
// node) or SECKILL_CACHE_REDIS_CLUSTER (a cluster's seeds); neither is the
// zero Config, the caches then sharing the sale's Redis.
func loadCacheRedis(r *Reader) redisconn.Config {
	c := redisconn.Config{Password: r.String("SECKILL_CACHE_REDIS_PASSWORD", "")}
	_, addrSet := r.raw("SECKILL_CACHE_REDIS_ADDR")
	seeds, clusterSet := r.raw("SECKILL_CACHE_REDIS_CLUSTER")
	switch {
	case addrSet && clusterSet:
		r.Fail("SECKILL_CACHE_REDIS_CLUSTER", seeds, "SECKILL_CACHE_REDIS_ADDR is set too: name one topology for the caches' Redis")
	case addrSet:
		c.Addr = r.HostPort("SECKILL_CACHE_REDIS_ADDR", "")
	case clusterSet:
		c.Cluster = r.HostPorts("SECKILL_CACHE_REDIS_CLUSTER", "")
	}
	return c
}

// durationOrOff is a duration, or zero for "off".
func durationOrOff(r *Reader, key string, def time.Duration) time.Duration {
	if v, _ := r.raw(key); v == "off" {
		return 0
	}
	return r.Duration(key, def)
}

// shopFilter is the capacity of the filter of shop ids: the API and the
// cache-invalidator read the same variable, since both must hash alike.
func shopFilter(r *Reader) int {
	return r.Int("SECKILL_SHOP_FILTER_CAPACITY", 1_000_000, 0, 100_000_000)
}

// loadSale reads the flash-sale variables.
func loadSale(r *Reader) Sale {
	return Sale{
		OrdersTopic:        r.String("SECKILL_ORDERS_TOPIC", "seckill.orders"),
		OrdersDLQ:          r.String("SECKILL_ORDERS_DLQ_TOPIC", "seckill.orders.dlq"),
		KeyPrefix:          r.String("SECKILL_KEY_PREFIX", ""),
		PublishTimeout:     r.Duration("SECKILL_PUBLISH_TIMEOUT", 3*time.Second),
		PublishLinger:      r.Duration("SECKILL_PUBLISH_LINGER", 0),
		PublishCompression: r.OneOf("SECKILL_PUBLISH_COMPRESSION", "none", "none", "lz4", "zstd"),
		SoldOutTTL:         r.Duration("SECKILL_SOLDOUT_TTL", 2*time.Second),
		DurabilityInterval: r.Duration("SECKILL_KAFKA_DURABILITY_INTERVAL", 500*time.Millisecond),
		IDBlock:            int64(r.Int("SECKILL_ID_BLOCK", 1000, 1, 1_000_000)),
		RelayAge:           r.Duration("SECKILL_RELAY_AGE", 10*time.Second),
		RelayInterval:      r.Duration("SECKILL_RELAY_INTERVAL", 2*time.Second),
		RelayLease:         r.Duration("SECKILL_RELAY_LEASE", 10*time.Second),
		DrawInterval:       r.Duration("SECKILL_DRAW_INTERVAL", 250*time.Millisecond),
		SaleKeep:           r.Duration("SECKILL_SALE_KEEP", 24*time.Hour),
		EpochInterval:      r.Duration("SECKILL_REDIS_EPOCH_INTERVAL", 500*time.Millisecond),
		OrderStatusTTL:     r.Duration("SECKILL_ORDER_STATUS_TTL", 10*time.Minute),
	}
}

// loadBotCheck reads the lifetimes of order paths and challenges, and
// where the paths' keys are: a keys' file is read once here, so a bad one
// stops the start.
func loadBotCheck(r *Reader) botcheck.Config {
	d := botcheck.DefaultConfig
	c := botcheck.Config{
		PathTTL:      r.Duration("SECKILL_BOTCHECK_PATH_TTL", d.PathTTL),
		ChallengeTTL: r.Duration("SECKILL_BOTCHECK_CHALLENGE_TTL", d.ChallengeTTL),
		Digits:       d.Digits,
		KeysFile:     r.String("SECKILL_BOTCHECK_KEYS_FILE", ""),
	}
	if c.KeysFile != "" {
		if _, err := botcheck.FileKeys(c.KeysFile).Ring(context.Background()); err != nil {
			r.Fail("SECKILL_BOTCHECK_KEYS_FILE", c.KeysFile, err.Error())
		}
	}
	return c
}

// loadHTTP reads the API's variables (docs/configuration.md).
func loadHTTP(r *Reader) api.Config {
	c := api.Config{
		Addr:         r.HostPort("SECKILL_API_ADDR", "127.0.0.1:8081"),
		BodyLimit:    int64(r.Int("SECKILL_API_BODY_LIMIT", 64<<10, 1<<10, 10<<20)),
		SessionTTL:   r.Duration("SECKILL_SESSION_TTL", 30*time.Minute),
		SessionCache: durationOrOff(r, "SECKILL_SESSION_CACHE_TTL", 10*time.Second),
		AdminToken:   r.String("SECKILL_ADMIN_TOKEN", ""),
		RatePrefix:   r.String("SECKILL_RATE_PREFIX", "rate:"),
		Limits: api.Limits{
			// Login codes' limits must hold across instances: shared in
			// Redis. The sale's and the public reads' guard the servers
			// against floods (the gate allows one order per user anyway):
			// local, no Redis round trip, each instance allowing the limit.
			Code:    routePolicy(r, "CODE", "20/1m", "off", "open", "shared"),
			Login:   routePolicy(r, "LOGIN", "60/1m", "off", "open", "shared"),
			Seckill: routePolicy(r, "SECKILL", "200/1s", "5/1s", "closed", "local"),
			Public:  routePolicy(r, "PUBLIC", "100/1s", "off", "open", "local"),
			// Order lookups: a buyer polling "did I get it?" needs a few a
			// second at most; the limit keeps one client in a loop from
			// costing more.
			Lookup: routePolicy(r, "LOOKUP", "200/1s", "5/1s", "open", "local"),
			// Challenges and their answers: shared like login codes, so
			// that wrong answers cannot be tried faster across instances.
			// Per address, room for a crowd behind one address (a carrier's
			// NAT, a campus) at the opening. Closed when the limiter's
			// Redis does not answer: each one costs a picture or a WAV
			// drawn on the api's CPU.
			Challenge: routePolicy(r, "CHALLENGE", "300/1m", "10/1m", "closed", "shared"),
		},
		CodePolicy: user.DefaultCodePolicy,
		BenchNoop:  r.Bool("SECKILL_API_BENCH_NOOP", false),
		ShopCache:  loadStrategy(r, "SHOP", "ttl", 30*time.Minute),
		TypeCache:  loadStrategy(r, "SHOP_TYPE", "logical", 30*time.Minute),
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
	c.CodePolicy.PhoneDailyMax = r.Int("SECKILL_CODE_PHONE_DAILY_MAX", c.CodePolicy.PhoneDailyMax, 1, 10000)
	c.CodePolicy.MaxTries = r.Int("SECKILL_CODE_MAX_TRIES", c.CodePolicy.MaxTries, 1, 100)
	c.CodePolicy.PastCeilingEvery = r.Duration("SECKILL_CODE_PAST_CEILING_EVERY", c.CodePolicy.PastCeilingEvery)
	if c.CodePolicy.PastCeilingEvery < time.Minute {
		r.Fail("SECKILL_CODE_PAST_CEILING_EVERY", c.CodePolicy.PastCeilingEvery.String(), "at least 1m: it bounds the codes a phone gets past its ceiling")
	}
	c.CodePolicy.SiteDailyMax = r.Int("SECKILL_CODE_SITE_DAILY_MAX", c.CodePolicy.SiteDailyMax, 1, 100_000_000)
	c.AllowedOrigins = allowedOrigins(r, "SECKILL_API_ALLOWED_ORIGINS")
	return c
}

// allowedOrigins are the web origins besides the API's own whose pages
// may ask for a login code: scheme://host[:port], comma-separated.
func allowedOrigins(r *Reader, key string) []string {
	var out []string
	for _, s := range strings.Split(r.String(key, ""), ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" {
			r.Fail(key, s, "want web origins such as https://shop.example or http://localhost:8080, comma-separated")
			continue
		}
		out = append(out, u.Scheme+"://"+u.Host)
	}
	return out
}

func routePolicy(r *Reader, route, perIP, perUser, failMode, scope string) api.RoutePolicy {
	return api.RoutePolicy{
		PerIP:    limit(r, "SECKILL_RATE_"+route+"_IP", perIP),
		PerUser:  limit(r, "SECKILL_RATE_"+route+"_USER", perUser),
		FailOpen: r.OneOf("SECKILL_RATE_"+route+"_FAIL", failMode, "open", "closed") == "open",
		Local:    r.OneOf("SECKILL_RATE_"+route+"_SCOPE", scope, "shared", "local") == "local",
	}
}

func limit(r *Reader, key, def string) ratelimit.Limit {
	v := r.String(key, def)
	l, err := ratelimit.ParseLimit(v)
	if err != nil {
		r.Fail(key, v, err.Error())
	}
	return l
}

// trustedProxies reads a comma-separated list of IPs and CIDRs.
func trustedProxies(r *Reader, key string) []*net.IPNet {
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

// loadStrategy reads a family's strategy from SECKILL_CACHE_<FAMILY>_MODE
// (ttl or logical) and SECKILL_CACHE_<FAMILY>_TTL; the rest follows.
func loadStrategy(r *Reader, family, mode string, ttl time.Duration) cache.Strategy {
	mode = r.OneOf("SECKILL_CACHE_"+family+"_MODE", mode, "ttl", "logical")
	ttl = r.Duration("SECKILL_CACHE_"+family+"_TTL", ttl)
	s := cache.Strategy{NullTTL: 2 * time.Minute, Lease: 3 * time.Second, Wait: 3 * time.Second}
	if mode == "logical" {
		s.Logical = ttl
	} else {
		s.TTL, s.Jitter = ttl, ttl/10
	}
	return s
}

func loadSessions(r *Reader) Sessions {
	s := Sessions{
		Mode:             r.OneOf("SECKILL_SESSION_MODE", SessionsRedis, SessionsRedis, SessionsJWT),
		AccessTTL:        r.Duration("SECKILL_JWT_ACCESS_TTL", 15*time.Minute),
		RefreshTTL:       r.Duration("SECKILL_JWT_REFRESH_TTL", 7*24*time.Hour),
		RefreshGrace:     durationOrOff(r, "SECKILL_JWT_REFRESH_GRACE", 10*time.Second),
		RevocationsStale: r.Duration("SECKILL_JWT_REVOCATIONS_STALE", 10*time.Second),
	}
	if s.RevocationsStale < time.Second {
		r.Fail("SECKILL_JWT_REVOCATIONS_STALE", s.RevocationsStale.String(), "at least 1s: the follower's blocking read takes half a second")
	}
	if s.AccessTTL < time.Minute || s.AccessTTL > 24*time.Hour {
		r.Fail("SECKILL_JWT_ACCESS_TTL", s.AccessTTL.String(), "want 1m to 24h: an access token cannot be taken back before it expires without the deny-list")
	}
	if s.RefreshTTL <= s.AccessTTL {
		r.Fail("SECKILL_JWT_REFRESH_TTL", s.RefreshTTL.String(), "must be longer than SECKILL_JWT_ACCESS_TTL")
	}
	if s.RefreshGrace > time.Minute {
		r.Fail("SECKILL_JWT_REFRESH_GRACE", s.RefreshGrace.String(), "at most 1m: within it a used refresh token still refreshes")
	}
	file, inline := r.String("SECKILL_JWT_KEYS_FILE", ""), r.String("SECKILL_JWT_KEYS", "")
	var err error
	switch {
	case file != "" && inline != "":
		r.Fail("SECKILL_JWT_KEYS", "(hidden)", "set SECKILL_JWT_KEYS_FILE or SECKILL_JWT_KEYS, not both")
	case file != "":
		if s.Keys, err = jwtauth.LoadKeys(file); err != nil {
			r.Fail("SECKILL_JWT_KEYS_FILE", file, err.Error())
		}
	case inline != "":
		if s.Keys, err = jwtauth.ParseKeys([]byte(inline)); err != nil {
			r.Fail("SECKILL_JWT_KEYS", "(hidden)", err.Error())
		}
	case s.Mode == SessionsJWT:
		r.Fail("SECKILL_SESSION_MODE", s.Mode, "the jwt mode needs signing keys: SECKILL_JWT_KEYS_FILE (make one with: seckillctl jwt-key)")
	}
	return s
}

func loadTLS(r *Reader) TLS {
	t := TLS{Cert: r.String("SECKILL_TLS_CERT", ""), Key: r.String("SECKILL_TLS_KEY", "")}
	if (t.Cert == "") != (t.Key == "") {
		r.Fail("SECKILL_TLS_CERT", t.Cert, "SECKILL_TLS_CERT and SECKILL_TLS_KEY go together")
	}
	return t
}

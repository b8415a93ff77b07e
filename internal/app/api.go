package app

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/api"
	"github.com/seckill/seckill/internal/blog"
	"github.com/seckill/seckill/internal/botcheck"
	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/cache"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/daemon"
	"github.com/seckill/seckill/internal/drawstate"
	"github.com/seckill/seckill/internal/gate"
	"github.com/seckill/seckill/internal/health"
	"github.com/seckill/seckill/internal/jwtauth"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/orderdb"
	"github.com/seckill/seckill/internal/ratelimit"
	"github.com/seckill/seckill/internal/redisconn"
	"github.com/seckill/seckill/internal/salerecords"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/shop"
	"github.com/seckill/seckill/internal/statuscache"
	"github.com/seckill/seckill/internal/tlscert"
	"github.com/seckill/seckill/internal/user"
	"github.com/seckill/seckill/internal/voucher"
)

// API is the api program: the HTTP API and everything behind it.
type API struct {
	// CodeSender delivers login codes; nil logs them (development). Set
	// it before Run.
	CodeSender user.CodeSender

	cfg    config.API
	logger *slog.Logger
	srv    *api.Server
	running
}

var _ Program = (*API)(nil)

// NewAPI is the api, logging to logs.
func NewAPI(cfg config.API, logs io.Writer) *API {
	return &API{cfg: cfg, logger: logger(logs, cfg.Common, "api")}
}

// Run opens Redis, MySQL and the Kafka publisher, binds the HTTP address
// and starts serving.
func (m *API) Run(ctx context.Context) error {
	// The sale needs Redis and the orders topic; MySQL only the routes
	// around it (docs/operations.md, "What a missing dependency stops").
	b, db, err := newSaleBase(ctx, m.cfg.Common, m.logger, false)
	if err != nil {
		return err
	}
	// One place closes what the base opened when the start fails, so that
	// no way out of it leaks the clients.
	if err := m.start(ctx, &b, db); err != nil {
		return abandon(err, b.closers)
	}
	return nil
}

// start builds the api on its base and starts serving.
func (m *API) start(ctx context.Context, b *base, db *sql.DB) error {
	c := m.cfg
	sales := salestate.New(b.rdb, c.Sale.KeyPrefix)
	store, records := gate.New(sales), salerecords.New(sales)
	var hot *redisconn.Pipeliner
	var err error
	if c.AutoPipeline {
		// Closed with the client.
		if hot, err = redisconn.AutoPipeliner(b.rdb); err != nil {
			return fmt.Errorf("redis autopipeliner: %w", err)
		}
		store.WithAutoPipeline(hot)
	}
	producer := broker.NewProducer(c.KafkaBrokers, c.Sale.OrdersTopic, broker.Compression(c.Sale.PublishCompression))
	producer.Linger = c.Sale.PublishLinger
	if producer.Linger == 0 {
		lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		producer.Linger, err = broker.Linger(lctx, c.KafkaBrokers, c.Sale.OrdersTopic)
		cancel()
		if err != nil {
			m.logger.Warn("publish linger: the orders topic's replication is unknown, spacing requests as for a replicated one", "linger", producer.Linger, "err", err)
		}
	}
	publisher := broker.NewOrderPublisher(producer, c.Sale.PublishTimeout)
	durability := broker.NewDurability(c.KafkaBrokers, c.Sale.OrdersTopic, c.Sale.DurabilityInterval, m.logger)
	b.monitor.Add("orders topic", c.Sale.OrdersTopic, durability.Known)
	b.closeFirst(daemon.Step{Name: "kafka publisher", Do: publisher.Shutdown})

	sender := m.CodeSender
	switch {
	case sender == nil && c.DevMode:
		sender = user.LogSender{Logger: m.logger}
		m.logger.Warn("DEVELOPMENT MODE (SECKILL_DEV_MODE): login codes are written to this log, so anyone who reads it can log in as anyone; never run it like this in production")
	case sender == nil:
		m.logger.Warn("no SMS provider is configured: POST /user/code answers 503; SECKILL_DEV_MODE=true logs the codes instead, on a developer's machine")
	}
	if c.BotCheck.KeysFile == "" && !c.DevMode {
		m.logger.Warn("the order paths' keys are kept in Redis: whoever reads that Redis can forge paths; in production give them in a file (SECKILL_BOTCHECK_KEYS_FILE, a mounted Secret)")
	}
	caches, err := b.cacheRedis(c.CacheRedis, false)
	if err != nil {
		return err
	}
	shopKeys := shop.Keys{Prefix: c.Sale.KeyPrefix}
	shops := shop.NewService(db, caches, shopKeys, c.HTTP.ShopCache, c.HTTP.TypeCache, m.logger, cache.NewMetrics(b.reg))
	if c.ShopFilter > 0 {
		shops.Filter = shop.NewFilter(b.rdb, db, shopKeys, uint(c.ShopFilter), m.logger)
	}
	loginKeys := user.Keys{Prefix: c.Sale.KeyPrefix}
	workers := []daemon.Worker{{Name: "http server", Run: m.serve}, {Name: "kafka durability", Run: durability.Run}}
	sessions, refresher, jwks, sessionWorkers, err := m.sessions(b.rdb, loginKeys, db, hot, b.monitor)
	if err != nil {
		return err
	}
	workers = append(workers, sessionWorkers...)
	var tlsConfig *tls.Config
	if c.TLS.Cert != "" {
		certs, err := tlscert.Load(c.TLS.Cert, c.TLS.Key, m.logger)
		if err != nil {
			return err
		}
		tlsConfig = certs.ServerConfig()
		workers = append(workers, daemon.Worker{Name: "tls certificate", Run: func(ctx context.Context) error { return certs.Run(ctx, time.Second) }})
	}
	bots := botcheck.New(b.rdb, c.Sale.KeyPrefix, voucher.BotCheckModes{DB: db}, records, c.BotCheck, botcheck.NewMetrics(b.reg))
	vouchers := &voucher.Vouchers{DB: db, Sale: store, BotChecks: bots}
	srv, err := api.Listen(c.HTTP, api.Deps{
		Logger: m.logger, Monitor: b.monitor, Registry: b.reg,
		Users: &user.Service{Codes: user.NewCodes(b.rdb, loginKeys, c.HTTP.CodePolicy).WithMetrics(user.NewCodeMetrics(b.reg)),
			Users: user.NewUsers(db), Sender: sender},
		Sessions: sessions, Refresher: refresher, JWKS: jwks, TLS: tlsConfig,
		Limiter:   ratelimit.New(b.rdb, c.HTTP.RatePrefix, m.logger),
		Shops:     shops,
		Blogs:     blog.NewStore(db),
		Vouchers:  vouchers,
		BotChecks: bots,
		Orders: &order.Service{
			IDs: orderIDs(b.rdb, c.Sale).WithReplicationStamp(), Gate: store, Publisher: publisher,
			Durable: broker.OrderDurability{Topic: durability},
			SoldOut: order.NewSoldOutCache(c.Sale.SoldOutTTL), Logger: m.logger, Metrics: order.NewMetrics(b.reg),
		},
		Lookup: &order.Lookup{Settled: statuscache.New(caches, c.Sale.KeyPrefix, c.Sale.OrderStatusTTL, &orderdb.Orders{DB: db}), Sales: records,
			Entries: drawstate.New(sales)},
	})
	if err != nil {
		return err
	}
	m.srv = srv
	m.d = b.daemon(c.Common, c.AdminAddr, workers...)
	if err := m.d.Start(); err != nil {
		return errors.Join(err, srv.Release())
	}
	m.logger.Info("api listening", "addr", srv.Scheme()+"://"+srv.Addr(), "sessions", c.Sessions.Mode)
	return nil
}

// sessions builds the configured session mode: redis token sessions (with
// the instance's session cache), or jwt tokens and the revocation feed,
// read whole by its worker before the first token is checked.
func (m *API) sessions(rdb redis.UniversalClient, keys user.Keys, db *sql.DB, hot *redisconn.Pipeliner, monitor *health.Monitor) (
	api.SessionStore, api.Refresher, []jwtauth.JWK, []daemon.Worker, error) {
	c := m.cfg
	if c.Sessions.Mode == config.SessionsJWT {
		tokens := jwtauth.NewTokens(c.Sessions.Keys, c.Sessions.AccessTTL)
		jkeys := jwtauth.Keys{Prefix: c.Sale.KeyPrefix}
		revocations := jwtauth.NewRevocations(rdb, jkeys.Revocations(), tokens.Lifetime(), m.logger)
		revocations.StaleAfter = c.Sessions.RevocationsStale
		// Read whole by its worker, retried while Redis does not answer:
		// the api starts unready and checks no token until then.
		monitor.Add("jwt revocations", jkeys.Revocations(), revocations.Fresh)
		s := &jwtauth.Sessions{Tokens: tokens, Revocations: revocations, Users: user.NewUsers(db),
			Families: jwtauth.NewFamilies(rdb, jkeys, c.Sessions.RefreshTTL, c.Sessions.RefreshGrace)}
		m.logger.Info("jwt sessions", "alg", c.Sessions.Keys.SigningAlg(), "access_ttl", c.Sessions.AccessTTL, "refresh_ttl", c.Sessions.RefreshTTL)
		return s, s, c.Sessions.Keys.PublicKeys(), []daemon.Worker{{Name: "jwt revocations", Run: revocations.Run}}, nil
	}
	sessions := user.NewSessions(rdb, keys, c.HTTP.SessionTTL).WithAutoPipeline(hot)
	if c.HTTP.SessionCache == 0 {
		return sessions, nil, nil, nil, nil
	}
	cached := user.NewCachedSessions(sessions, rdb, c.HTTP.SessionCache, m.logger)
	return cached, nil, nil, []daemon.Worker{{Name: "session cache", Run: cached.Run}}, nil
}

// serve answers requests until ctx ends, then lets the requests in flight
// finish within the shutdown timeout.
func (m *API) serve(ctx context.Context) error {
	served := make(chan error, 1)
	go func() { served <- m.srv.Serve() }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.ShutdownTimeout)
	defer cancel()
	return errors.Join(m.srv.Shutdown(sctx), <-served)
}

// Addr is the bound HTTP address (useful with port 0).
func (m *API) Addr() string { return m.srv.Addr() }

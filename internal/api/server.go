// Package api is the HTTP API: the course's routes at the root path, its
// Result envelope, and one place that maps errors to status codes.
package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/pires/go-proxyproto"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/internal/blog"
	"github.com/seckill/seckill/internal/botcheck"
	"github.com/seckill/seckill/internal/health"
	"github.com/seckill/seckill/internal/jwtauth"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/ratelimit"
	"github.com/seckill/seckill/internal/shop"
	"github.com/seckill/seckill/internal/telemetry"
	"github.com/seckill/seckill/internal/user"
	"github.com/seckill/seckill/internal/voucher"
)

// Server is the API's HTTP server.
type Server struct {
	echo   *echo.Echo
	ln     net.Listener
	logger *slog.Logger
	cfg    Config
	deps   Deps
}

// SessionStore starts, finds and ends login sessions, in the mode the
// program runs: user.Sessions or user.CachedSessions (redis), or
// jwtauth.Sessions (jwt).
type SessionStore interface {
	Start(ctx context.Context, u user.User) (user.Grant, error)
	Load(ctx context.Context, token string) (user.User, bool, error)
	End(ctx context.Context, u user.User, token string, everywhere bool) error
}

// Refresher exchanges a refresh token for a new grant, and ends the login
// a client proves it holds by an access token signed by us (expired or
// not) or its refresh token (the jwt mode).
type Refresher interface {
	Refresh(ctx context.Context, refresh string) (user.Grant, error)
	EndHeld(ctx context.Context, token, refresh string, everywhere bool) error
}

// Deps are the services behind the routes, built by the program's wiring
// (internal/app).
type Deps struct {
	Logger   *slog.Logger
	Monitor  *health.Monitor
	Registry *prometheus.Registry
	Users    *user.Service
	Sessions SessionStore
	// Refresher is nil in the redis mode: POST /user/refresh answers 401.
	Refresher Refresher
	// JWKS are the public keys that verify access tokens; none: no
	// /.well-known/jwks.json.
	JWKS []jwtauth.JWK
	// TLS serves HTTPS (and HTTP/2) on the address; nil: plain HTTP.
	TLS      *tls.Config
	Limiter  *ratelimit.Limiter
	Shops    *shop.Service
	Blogs    *blog.Store
	Vouchers *voucher.Vouchers
	Orders   *order.Service
	Lookup   *order.Lookup
	// BotChecks keep bots from the sales that ask for it: order paths and
	// challenges (botcheck.Store).
	BotChecks BotChecks
}

// BotChecks issues and checks the order paths and challenges of the sales
// that keep bots out (botcheck.Store).
type BotChecks interface {
	CheckOrder(ctx context.Context, userID, voucherID int64, path string) error
	IssuePath(ctx context.Context, userID, voucherID int64) (string, time.Time, error)
	NewChallenge(ctx context.Context, userID, voucherID int64) (botcheck.Puzzle, error)
	Solve(ctx context.Context, userID, voucherID int64, id, answer string) (string, time.Time, error)
	Audio(ctx context.Context, userID int64, id, lang string) ([]byte, error)
	PathUsed()
}

// Listen binds cfg.Addr at once (so a taken port fails the start) and
// builds the routes.
func Listen(cfg Config, deps Deps) (*Server, error) {
	if deps.BotChecks == nil {
		return nil, errors.New("api: no bot checks: a sale that asks for order paths would take orders without one")
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("api listener on %s: %w", cfg.Addr, err)
	}
	if ln, err = proxyProtocolFrom(ln, cfg.TrustedProxies); err != nil {
		return nil, err
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Server.Handler = e
	e.Server.ReadHeaderTimeout = 5 * time.Second
	e.Server.ReadTimeout = 10 * time.Second
	e.Server.WriteTimeout = 15 * time.Second
	e.Server.IdleTimeout = 60 * time.Second
	e.IPExtractor = ipExtractor(cfg.TrustedProxies)

	s := &Server{echo: e, ln: ln, logger: deps.Logger, cfg: cfg, deps: deps}
	e.HTTPErrorHandler = s.handleError
	e.Pre(forwardedProtoFrom(cfg.TrustedProxies))
	e.Use(middleware.RequestIDWithConfig(middleware.RequestIDConfig{TargetHeader: echo.HeaderXRequestID}))
	if telemetry.Enabled() {
		e.Server.Handler = traced(e, cfg.TrustedProxies)
		e.Use(nameSpan)
	}
	e.Use(observe(deps.Registry))
	e.Use(s.allowedMethods())
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{DisableStackAll: true, LogErrorFunc: s.logPanic}))
	e.Use(middleware.BodyLimit(strconv.FormatInt(cfg.BodyLimit, 10)))
	// Strict-Transport-Security on TLS answers only (the middleware checks):
	// a browser that saw the API over HTTPS never tries it in clear again.
	e.Use(middleware.SecureWithConfig(middleware.SecureConfig{HSTSMaxAge: 365 * 24 * 3600, ContentTypeNosniff: "nosniff", XFrameOptions: "DENY"}))
	e.Use(s.loadSession)

	doc, err := openAPIJSON()
	if err != nil {
		ln.Close()
		return nil, err
	}
	e.GET("/openapi.json", serveOpenAPI(doc))
	routeDocs(e)
	routeBuy(e)
	e.GET("/healthz", echo.WrapHandler(health.LiveHandler()))
	e.GET("/readyz", echo.WrapHandler(deps.Monitor.PublicReadyHandler()))

	e.POST("/user/code", s.sendCode, sameSiteOnly(cfg.AllowedOrigins, cfg.TrustedProxies), s.rateLimit("code", cfg.Limits.Code))
	e.POST("/user/login", s.login, s.rateLimit("login", cfg.Limits.Login))
	e.GET("/user/me", s.me, s.requireUser)
	e.GET("/user/info/:id", s.userInfo, s.requireUser)
	e.GET("/user/:id", s.userByID, s.requireUser)
	// The jwt mode's logout proves the login itself (an expired token
	// still ends its login); the redis mode's needs a live session.
	if deps.Refresher != nil {
		e.POST("/user/logout", s.logout)
	} else {
		e.POST("/user/logout", s.logout, s.requireUser)
	}
	e.POST("/user/refresh", s.refresh, s.rateLimit("refresh", cfg.Limits.Login))
	e.GET("/.well-known/jwks.json", s.jwks)

	public := s.rateLimit("public", cfg.Limits.Public)
	e.GET("/shop/:id", s.getShop, public)
	e.GET("/shop-type/list", s.listShopTypes, public)
	e.GET("/shop/of/type", s.shopsOfType, public)
	e.GET("/shop/of/name", s.shopsOfName, public)
	e.GET("/blog/hot", s.hotBlogs, public)
	e.GET("/blog/of/me", s.myBlogs, s.requireUser)
	e.POST("/shop", s.createShop, s.requireAdmin)
	e.PUT("/shop", s.updateShop, s.requireAdmin)
	e.POST("/voucher", s.createVoucher(voucher.TypeOrdinary), s.requireAdmin)
	e.POST("/voucher/seckill", s.createVoucher(voucher.TypeSeckill), s.requireAdmin)
	e.PUT("/voucher/seckill/:id", s.changeSale, s.requireAdmin)
	e.GET("/voucher/list/:shopId", s.listVouchers, public)
	seckill := s.rateLimit("seckill", cfg.Limits.Seckill)
	e.POST("/voucher-order/seckill/:id", s.seckillOrder, s.requireUser, seckill)
	// The order paths: static "path" wins over :path in echo's router, and
	// an issued path is never that word.
	e.POST("/voucher-order/seckill/:id/:path", s.seckillOrder, s.requireUser, seckill)
	e.GET("/voucher-order/seckill/:id/path", s.orderPath, s.requireUser, s.rateLimit("path", cfg.Limits.Seckill))
	challenge := s.rateLimit("challenge", cfg.Limits.Challenge)
	e.GET("/voucher-order/seckill/:id/challenge", s.challenge, s.requireUser, challenge)
	// Answers count apart from the challenges asked for: a buyer who
	// asked for their limit can still answer the last one.
	e.POST("/voucher-order/seckill/:id/path", s.solveChallenge, s.requireUser, s.rateLimit("answer", cfg.Limits.Challenge))
	e.GET("/voucher-order/challenge/:challengeId/audio", s.challengeAudio, s.requireUser, challenge)
	lookup := s.rateLimit("lookup", cfg.Limits.Lookup)
	e.GET("/voucher-order/:id", s.getOrder, s.requireUser, lookup)
	e.GET("/voucher-order/of/voucher/:voucherId", s.getOrderOf, s.requireUser, lookup)
	if cfg.BenchNoop {
		e.POST("/bench/noop", func(c echo.Context) error { return c.JSON(http.StatusOK, OK("noop")) }, s.requireUser)
	}
	return s, nil
}

// ipExtractor takes the client IP from the connection, or from
// X-Forwarded-For when the connection comes from a trusted proxy.
func ipExtractor(trusted []*net.IPNet) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, n := range trusted {
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// proxyProtocolFrom reads a PROXY protocol header (v1 or v2) on the
// connections of the trusted proxies, where it is optional: a balancer in
// TCP mode passes the client's address in it, and the connection's remote
// address is then the client's. Anyone else's connection is not looked at:
// a PROXY header from a client is not HTTP, and gets a 400.
func proxyProtocolFrom(ln net.Listener, trusted []*net.IPNet) (net.Listener, error) {
	if len(trusted) == 0 {
		return ln, nil
	}
	ranges := make([]string, len(trusted))
	for i, n := range trusted {
		ranges[i] = n.String()
	}
	policy, err := proxyproto.PolicyFromRanges(ranges, proxyproto.USE, proxyproto.SKIP)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("api listener: the trusted proxies: %w", err)
	}
	return &proxyproto.Listener{Listener: ln, ConnPolicy: policy, ReadHeaderTimeout: proxyHeaderTimeout}, nil
}

// proxyHeaderTimeout bounds the wait for a trusted proxy's PROXY header,
// which it sends first: with an HTTP-mode balancer, which sends none, the
// wait ends with the request's first bytes.
const proxyHeaderTimeout = 5 * time.Second

// forwardedProtoFrom drops the headers that tell echo the client came over
// TLS (c.Scheme, the HSTS middleware) unless a trusted proxy sent them: on
// plain HTTP a client's X-Forwarded-Proto must not make the refresh cookie
// Secure (a browser would then never send it back) nor switch HSTS on.
func forwardedProtoFrom(trusted []*net.IPNet) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if !fromTrusted(r.RemoteAddr, trusted) {
				for _, h := range []string{echo.HeaderXForwardedProto, echo.HeaderXForwardedProtocol, echo.HeaderXForwardedSsl, echo.HeaderXUrlScheme} {
					r.Header.Del(h)
				}
			}
			return next(c)
		}
	}
}

// Addr is the bound address (useful with port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Serve blocks until Shutdown.
func (s *Server) Serve() error {
	var err error
	if s.deps.TLS != nil {
		// ServeTLS offers HTTP/2 by ALPN; the certificate comes from
		// the config's GetCertificate.
		s.echo.Server.TLSConfig = s.deps.TLS
		err = s.echo.Server.ServeTLS(s.ln, "", "")
	} else {
		err = s.echo.Server.Serve(s.ln)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("api server: %w", err)
	}
	return nil
}

// Scheme is https or http, as the server serves.
func (s *Server) Scheme() string {
	if s.deps.TLS != nil {
		return "https"
	}
	return "http"
}

// Release frees the bound address of a server that will never serve (its
// program failed to start).
func (s *Server) Release() error { return s.ln.Close() }

// Shutdown stops accepting and lets in-flight requests finish until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.echo.Shutdown(ctx) }

func (s *Server) logPanic(c echo.Context, err error, stack []byte) error {
	s.logger.ErrorContext(c.Request().Context(), "panic in handler", "request_id", requestID(c), "path", c.Path(), "err", err, "stack", string(stack))
	return err
}

func requestID(c echo.Context) string {
	return c.Response().Header().Get(echo.HeaderXRequestID)
}

// traced makes every request a server span (otelhttp, the maintained
// net/http instrumentation: the contrib otelecho package is gone, and
// labstack's successor needs echo v5). The probes are no spans: a load
// balancer's every second would outnumber the buyers.
//
// A caller's traceparent header is continued only from a trusted proxy
// (SECKILL_API_TRUSTED_PROXIES, as for X-Forwarded-For). From anyone else
// the request starts a trace of its own, linked to the caller's: a crowd
// that marks every request sampled would otherwise have each one traced
// whatever the sampling ratio.
func traced(h http.Handler, trusted []*net.IPNet) http.Handler {
	return otelhttp.NewHandler(h, "http.server",
		otelhttp.WithFilter(func(r *http.Request) bool { return r.URL.Path != "/healthz" && r.URL.Path != "/readyz" }),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }),
		otelhttp.WithPublicEndpointFn(func(r *http.Request) bool { return !fromTrusted(r.RemoteAddr, trusted) }))
}

// fromTrusted reports whether a connection's remote address is in one of
// the trusted networks.
func fromTrusted(remote string, trusted []*net.IPNet) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	for _, n := range trusted {
		if ip != nil && n.Contains(ip) {
			return true
		}
	}
	return false
}

// nameSpan names the request's span by its route template once echo has
// routed it ("POST /voucher-order/seckill/:id"), as the HTTP conventions
// ask, and tags it with the request id the answer carries.
func nameSpan(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		span := trace.SpanFromContext(c.Request().Context())
		if route := c.Path(); route != "" {
			span.SetName(c.Request().Method + " " + route)
			span.SetAttributes(attribute.String("http.route", route))
		}
		span.SetAttributes(attribute.String("seckill.request_id", requestID(c)))
		return next(c)
	}
}

// observe counts requests and their latency per route template and status.
func observe(reg prometheus.Registerer) echo.MiddlewareFunc {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_http_requests_total", Help: "HTTP requests by method, route template and status.",
	}, []string{"method", "route", "status"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "seckill_http_request_seconds", Help: "HTTP request latency by route template.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	}, []string{"route"})
	reg.MustRegister(requests, latency)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if err != nil {
				// Write the answer now so its status is the one counted.
				c.Error(err)
			}
			// Unknown routes and methods are labelled as one, so a scan of
			// random paths cannot blow up the label set.
			route, status := c.Path(), c.Response().Status
			if route == "" || status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
				route = "unmatched"
			}
			requests.WithLabelValues(c.Request().Method, route, strconv.Itoa(status)).Inc()
			latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
			return nil
		}
	}
}

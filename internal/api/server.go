// Package api is the HTTP API: the course's routes at the root path, its
// Result envelope, and one place that maps errors to status codes.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/seckill/seckill/internal/health"
)

// Server is the API's HTTP server.
type Server struct {
	echo   *echo.Echo
	ln     net.Listener
	logger *slog.Logger
}

// Deps are what the server needs from main.
type Deps struct {
	Logger   *slog.Logger
	Monitor  *health.Monitor
	Registry *prometheus.Registry
}

// Listen binds addr at once (so a taken port fails the start) and builds
// the routes.
func Listen(addr string, deps Deps) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("api listener on %s: %w", addr, err)
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Listener = ln
	e.Server.ReadHeaderTimeout = 5 * time.Second
	e.Server.ReadTimeout = 10 * time.Second
	e.Server.WriteTimeout = 15 * time.Second
	e.Server.IdleTimeout = 60 * time.Second

	s := &Server{echo: e, ln: ln, logger: deps.Logger}
	e.HTTPErrorHandler = s.handleError
	e.Use(middleware.RequestIDWithConfig(middleware.RequestIDConfig{TargetHeader: echo.HeaderXRequestID}))
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{DisableStackAll: true, LogErrorFunc: s.logPanic}))

	e.GET("/healthz", echo.WrapHandler(health.LiveHandler()))
	e.GET("/readyz", echo.WrapHandler(deps.Monitor.ReadyHandler()))
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(deps.Registry, promhttp.HandlerOpts{Registry: deps.Registry})))
	return s, nil
}

// Addr is the bound address (useful with port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Serve blocks until Shutdown.
func (s *Server) Serve() error {
	if err := s.echo.Start(""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("api server: %w", err)
	}
	return nil
}

// Shutdown stops accepting and lets in-flight requests finish until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.echo.Shutdown(ctx) }

func (s *Server) logPanic(c echo.Context, err error, stack []byte) error {
	s.logger.Error("panic in handler", "request_id", requestID(c), "path", c.Path(), "err", err, "stack", string(stack))
	return err
}

// handleError is the one mapping from errors to HTTP answers. A protocol
// error keeps its status with a message meant for the client; anything else
// is a server fault: logged with the request id, answered with a generic
// message so no internal text reaches the client.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code, msg := http.StatusInternalServerError, "internal server error"
	var he *echo.HTTPError
	if errors.As(err, &he) && he.Code < http.StatusInternalServerError {
		code, msg = he.Code, fmt.Sprint(he.Message)
	} else {
		s.logger.Error("request failed", "request_id", requestID(c), "method", c.Request().Method,
			"path", c.Request().URL.Path, "err", err)
		if errors.As(err, &he) {
			code = he.Code
		}
	}
	var writeErr error
	if c.Request().Method == http.MethodHead {
		writeErr = c.NoContent(code)
	} else {
		writeErr = c.JSON(code, Fail(msg))
	}
	if writeErr != nil {
		s.logger.Warn("writing error response", "request_id", requestID(c), "err", writeErr)
	}
}

func requestID(c echo.Context) string {
	return c.Response().Header().Get(echo.HeaderXRequestID)
}

package api

import (
	"context"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/seckill/seckill/internal/ratelimit"
)

// rateLimit applies a route's policy: per client IP always, per user when
// the request is logged in. route names the counters.
func (s *Server) rateLimit(route string, p RoutePolicy) echo.MiddlewareFunc {
	check := func(ctx context.Context, key string, limit ratelimit.Limit, who string) error {
		return s.deps.Limiter.Check(ctx, key, limit, p.FailOpen, who)
	}
	if p.Local {
		local := ratelimit.NewLocal()
		check = func(_ context.Context, key string, limit ratelimit.Limit, who string) error {
			return local.Check(key, limit, who)
		}
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			ctx := c.Request().Context()
			if err := check(ctx, route+":ip:"+clientAddr(c), p.PerIP, "from your address"); err != nil {
				return err
			}
			if u, ok := currentUser(c); ok {
				if err := check(ctx, route+":user:"+strconv.FormatInt(u.ID, 10), p.PerUser, "from your account"); err != nil {
					return err
				}
			}
			return next(c)
		}
	}
}

package api

import (
	"strconv"

	"github.com/labstack/echo/v4"
)

// rateLimit applies a route's policy: per client IP always, per user when
// the request is logged in. route names the counters.
func (s *Server) rateLimit(route string, p RoutePolicy) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			ctx := c.Request().Context()
			if err := s.deps.Limiter.Check(ctx, route+":ip:"+c.RealIP(), p.PerIP, p.FailOpen, "from your address"); err != nil {
				return err
			}
			if u, ok := currentUser(c); ok {
				if err := s.deps.Limiter.Check(ctx, route+":user:"+strconv.FormatInt(u.ID, 10), p.PerUser, p.FailOpen, "from your account"); err != nil {
					return err
				}
			}
			return next(c)
		}
	}
}

package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/internal/user"
)

// The answers of the guards.
var (
	errNoSession          = apperr.New(apperr.Unauthorized, "please log in: no authorization header")
	errUnknownSession     = apperr.New(apperr.Unauthorized, "session expired or unknown: please log in again")
	errSessionUnavailable = apperr.New(apperr.Unavailable, "service temporarily unavailable: retry shortly").Retry(time.Second)
	errNoAdminToken       = apperr.New(apperr.Unauthorized, "admin route: send the admin token in X-Admin-Token")
	errAdminDisabled      = apperr.New(apperr.Forbidden, "admin routes are disabled: the server has no SECKILL_ADMIN_TOKEN")
	errWrongAdminToken    = apperr.New(apperr.Forbidden, "wrong admin token")
)

const (
	ctxUser       = "seckill.user"
	ctxToken      = "seckill.token"
	ctxSessionErr = "seckill.sessionErr"
)

// sessionToken is the authorization header's token, bare or "Bearer x".
func sessionToken(c echo.Context) string {
	h := strings.TrimSpace(c.Request().Header.Get(echo.HeaderAuthorization))
	if scheme, token, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
		return strings.TrimSpace(token)
	}
	return h
}

// loadSession runs on every route, as the course's first interceptor: a
// request that carries a live session has its user in the context and
// pushes the session's expiry back, whether or not the route needs a login.
func (s *Server) loadSession(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		token := sessionToken(c)
		if token == "" {
			return next(c)
		}
		u, ok, err := s.deps.Sessions.Load(c.Request().Context(), token)
		switch {
		case err != nil:
			// Unprotected routes still answer; protected ones report it.
			c.Set(ctxSessionErr, err)
		case ok:
			c.Set(ctxUser, u)
			c.Set(ctxToken, token)
		}
		return next(c)
	}
}

// currentUser is the logged-in user of the request, if any.
func currentUser(c echo.Context) (user.User, bool) {
	u, ok := c.Get(ctxUser).(user.User)
	return u, ok
}

// requireUser is the course's second interceptor: 401 without a session.
func (s *Server) requireUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if _, ok := currentUser(c); ok {
			return next(c)
		}
		if err, ok := c.Get(ctxSessionErr).(error); ok {
			return errSessionUnavailable.Wrap(err)
		}
		if sessionToken(c) == "" {
			return errNoSession
		}
		return errUnknownSession
	}
}

// requireAdmin guards the admin routes with the configured admin token.
// Both sides are hashed first so the comparison takes the same time
// whatever the sent token's length or content.
func (s *Server) requireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	want := sha256.Sum256([]byte(s.cfg.AdminToken))
	return func(c echo.Context) error {
		sent := c.Request().Header.Get("X-Admin-Token")
		if sent == "" {
			return errNoAdminToken
		}
		if s.cfg.AdminToken == "" {
			return errAdminDisabled
		}
		got := sha256.Sum256([]byte(sent))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			return errWrongAdminToken
		}
		return next(c)
	}
}

package api

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/internal/jwtauth"
	"github.com/seckill/seckill/internal/user"
)

// POST /user/code?phone=...
func (s *Server) sendCode(c echo.Context) error {
	phone := c.QueryParam("phone")
	if phone == "" {
		return apperr.Errorf(apperr.Invalid, "missing query parameter: phone")
	}
	if err := s.deps.Users.SendCode(c.Request().Context(), phone, clientAddr(c)); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, OK(nil))
}

// loginForm is the course's LoginFormDTO. Pointers tell a missing field
// from an empty one.
type loginForm struct {
	Phone    *string `json:"phone"`
	Code     *string `json:"code"`
	Password *string `json:"password"`
}

// POST /user/login {phone, code}
func (s *Server) login(c echo.Context) error {
	var f loginForm
	if err := bindJSON(c, &f); err != nil {
		return err
	}
	if f.Phone == nil {
		return apperr.Errorf(apperr.Invalid, "missing field: phone")
	}
	if f.Code == nil {
		if f.Password != nil {
			return user.ErrPasswordLogin
		}
		return apperr.Errorf(apperr.Invalid, "missing field: code")
	}
	ctx := c.Request().Context()
	var g user.Grant
	if _, err := s.deps.Users.Login(ctx, *f.Phone, clientAddr(c), *f.Code, func(u user.User) (err error) {
		g, err = s.deps.Sessions.Start(ctx, u)
		return err
	}); err != nil {
		return err
	}
	return s.grant(c, g)
}

// grant answers a login or a refresh: the access token in data, as the
// course's client expects it, and the refresh token, if any, as a cookie
// that only the refresh route gets and no script can read.
func (s *Server) grant(c echo.Context, g user.Grant) error {
	if g.Refresh != "" {
		setRefreshCookies(c, g.Refresh, g.RefreshTTL)
	}
	return c.JSON(http.StatusOK, OK(g.Access))
}

const refreshCookieName = "seckill_refresh"

// refreshPaths are where the browser sends the refresh cookie: the refresh,
// and the logout that must end the login after the access token expired.
// One cookie per path, not Path=/user: the 7-day secret goes to these two
// routes only (which is also why it has no __Host- prefix, which needs
// Path=/; docs/sessions.md).
var refreshPaths = []string{"/user/refresh", "/user/logout"}

// setRefreshCookies carries value for ttl on each refresh path; a zero ttl
// deletes them.
func setRefreshCookies(c echo.Context, value string, ttl time.Duration) {
	maxAge := int(ttl / time.Second)
	if ttl == 0 {
		maxAge = -1
	}
	for _, path := range refreshPaths {
		c.SetCookie(&http.Cookie{Name: refreshCookieName, Value: value, Path: path, MaxAge: maxAge,
			HttpOnly: true, Secure: c.Scheme() == "https", SameSite: http.SameSiteStrictMode})
	}
}

// refreshCookieValue is the request's refresh cookie, if any.
func refreshCookieValue(c echo.Context) string {
	if ck, err := c.Cookie(refreshCookieName); err == nil {
		return ck.Value
	}
	return ""
}

// errNoRefreshMode answers a refresh in the redis mode, whose sessions
// have no refresh token.
var errNoRefreshMode = apperr.New(apperr.Unauthorized, "this server's sessions have no refresh token: please log in again")

// POST /user/refresh, with the refresh cookie
func (s *Server) refresh(c echo.Context) error {
	if s.deps.Refresher == nil {
		return errNoRefreshMode
	}
	g, err := s.deps.Refresher.Refresh(c.Request().Context(), refreshCookieValue(c))
	if err != nil {
		if apperr.CodeOf(err) == apperr.Unauthorized {
			setRefreshCookies(c, "", 0)
		}
		return err
	}
	return s.grant(c, g)
}

// GET /.well-known/jwks.json: the public keys that verify access tokens;
// an empty set where there are none to publish (the redis mode, HS256
// keys, whose secrets are never published).
func (s *Server) jwks(c echo.Context) error {
	c.Response().Header().Set(echo.HeaderCacheControl, "public, max-age=300")
	keys := s.deps.JWKS
	if keys == nil {
		keys = []jwtauth.JWK{}
	}
	return c.JSON(http.StatusOK, map[string]any{"keys": keys})
}

// GET /user/me
func (s *Server) me(c echo.Context) error {
	u, _ := currentUser(c)
	return c.JSON(http.StatusOK, OK(u))
}

// POST /user/logout[?all=true]: this session, or every session of the user
func (s *Server) logout(c echo.Context) error {
	var everywhere bool
	switch all := c.QueryParam("all"); all {
	case "", "false":
	case "true":
		everywhere = true
	default:
		return apperr.Errorf(apperr.Invalid, "query parameter all: want true or false, got %q", all)
	}
	ctx := c.Request().Context()
	if s.deps.Refresher != nil {
		err := s.deps.Refresher.EndHeld(ctx, sessionToken(c), refreshCookieValue(c), everywhere)
		if err != nil && apperr.CodeOf(err) != apperr.Unauthorized {
			return err
		}
		// A cookie that proved nothing is worth nothing either.
		setRefreshCookies(c, "", 0)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, OK(nil))
	}
	token, _ := c.Get(ctxToken).(string)
	u, _ := currentUser(c)
	if err := s.deps.Sessions.End(ctx, u, token, everywhere); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, OK(nil))
}

package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/internal/user"
)

// POST /user/code?phone=...
func (s *Server) sendCode(c echo.Context) error {
	phone := c.QueryParam("phone")
	if phone == "" {
		return apperr.Errorf(apperr.Invalid, "missing query parameter: phone")
	}
	if err := s.deps.Users.SendCode(c.Request().Context(), phone, c.RealIP()); err != nil {
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
	token, err := s.deps.Users.Login(c.Request().Context(), *f.Phone, c.RealIP(), *f.Code)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, OK(token))
}

// GET /user/me
func (s *Server) me(c echo.Context) error {
	u, _ := currentUser(c)
	return c.JSON(http.StatusOK, OK(u))
}

// POST /user/logout
func (s *Server) logout(c echo.Context) error {
	token, _ := c.Get(ctxToken).(string)
	if err := s.deps.Sessions.Delete(c.Request().Context(), token); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, OK(nil))
}

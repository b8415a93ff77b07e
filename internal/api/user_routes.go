package api

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// POST /user/code?phone=...
func (s *Server) sendCode(c echo.Context) error {
	phone := c.QueryParam("phone")
	if phone == "" {
		return echo.NewHTTPError(http.StatusBadRequest, "missing query parameter: phone")
	}
	if err := s.users.SendCode(c.Request().Context(), phone); err != nil {
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
		return echo.NewHTTPError(http.StatusBadRequest, "missing field: phone")
	}
	if f.Code == nil {
		if f.Password != nil {
			return c.JSON(http.StatusOK, Fail("password login is not supported: log in with a code"))
		}
		return echo.NewHTTPError(http.StatusBadRequest, "missing field: code")
	}
	token, err := s.users.Login(c.Request().Context(), *f.Phone, *f.Code)
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
	if err := s.sessions.Delete(c.Request().Context(), token); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, OK(nil))
}

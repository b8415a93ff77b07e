package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/internal/user"
)

// The routes behind the course's home page, shop list and "my page".

// maxPage bounds the page a client may ask for: deeper pages cost the
// database an OFFSET scan, and no one reads the 10,001st page.
const maxPage = 10_000

// pageParam is the query parameter current, 1 when absent, as the course;
// present, it is a page from 1 to maxPage.
func pageParam(c echo.Context) (int, error) {
	v, present, err := queryOnce(c, "current")
	if err != nil || !present {
		return 1, err
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxPage {
		return 0, apperr.Errorf(apperr.Invalid, "query parameter current: want a page from 1 to %d, got %q", maxPage, v)
	}
	return n, nil
}

// queryOnce is query parameter name's value, and whether it was sent; a
// parameter sent more than once is refused: reading only its first value
// would let the others through unchecked.
func queryOnce(c echo.Context, name string) (string, bool, error) {
	values, present := c.QueryParams()[name]
	if len(values) > 1 {
		return "", true, apperr.Errorf(apperr.Invalid, "query parameter %s: sent %d times, want it once", name, len(values))
	}
	if !present {
		return "", false, nil
	}
	return values[0], true, nil
}

// GET /blog/hot?current=: the notes by likes, ten a page.
func (s *Server) hotBlogs(c echo.Context) error {
	current, err := pageParam(c)
	if err != nil {
		return err
	}
	blogs, err := s.deps.Blogs.Hot(c.Request().Context(), current)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, OK(blogs))
}

// GET /blog/of/me?current=: the user's own notes, ten a page.
func (s *Server) myBlogs(c echo.Context) error {
	current, err := pageParam(c)
	if err != nil {
		return err
	}
	u, _ := currentUser(c)
	blogs, err := s.deps.Blogs.OfUser(c.Request().Context(), u.ID, current)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, OK(blogs))
}

// GET /shop/of/type?typeId=&current=: the shops of a type, five a page.
// The course's client also sends its coordinates (x, y); they must be
// numbers, and the list is by id, not by distance.
func (s *Server) shopsOfType(c echo.Context) error {
	raw, _, err := queryOnce(c, "typeId")
	if err != nil {
		return err
	}
	typeID, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return apperr.Errorf(apperr.Invalid, "query parameter typeId: want a shop type id, got %q", raw)
	}
	for _, coord := range []string{"x", "y"} {
		v, present, err := queryOnce(c, coord)
		if err != nil {
			return err
		}
		if present {
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				return apperr.Errorf(apperr.Invalid, "query parameter %s: want a coordinate, got %q", coord, v)
			}
		}
	}
	current, err := pageParam(c)
	if err != nil {
		return err
	}
	shops, err := s.deps.Shops.OfType(c.Request().Context(), typeID, current)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, OK(shops))
}

// GET /shop/of/name?name=&current=: the shops whose name has name in it,
// ten a page.
func (s *Server) shopsOfName(c echo.Context) error {
	current, err := pageParam(c)
	if err != nil {
		return err
	}
	shops, err := s.deps.Shops.OfName(c.Request().Context(), c.QueryParam("name"), current)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, OK(shops))
}

// GET /user/info/:id: the user's details; success with no data when the
// user has none yet, as the course answers.
func (s *Server) userInfo(c echo.Context) error {
	id, err := pathID(c, "id", "user id")
	if err != nil {
		return err
	}
	info, err := s.deps.Users.Users.Info(c.Request().Context(), id)
	if err != nil {
		return err
	}
	if info == nil {
		return c.JSON(http.StatusOK, OK(nil))
	}
	return c.JSON(http.StatusOK, OK(info))
}

// GET /user/:id: another user's public face (id, nickname, icon); success
// with no data for an id that is no user, as the course answers.
func (s *Server) userByID(c echo.Context) error {
	id, err := pathID(c, "id", "user id")
	if err != nil {
		return err
	}
	u, err := s.deps.Users.Users.ByID(c.Request().Context(), id)
	if errors.Is(err, user.ErrNoUser) {
		return c.JSON(http.StatusOK, OK(nil))
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, OK(u))
}

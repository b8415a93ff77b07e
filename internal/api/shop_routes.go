package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/internal/shop"
)

// GET /shop/:id
func (s *Server) getShop(c echo.Context) error {
	id, err := pathID(c, "id", "shop id")
	if err != nil {
		return err
	}
	sh, err := s.deps.Shops.Get(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, OK(sh))
}

// GET /shop-type/list
func (s *Server) listShopTypes(c echo.Context) error {
	types, err := s.deps.Shops.Types(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, OK(types))
}

// POST /shop (admin)
func (s *Server) createShop(c echo.Context) error {
	var sh shop.Shop
	if err := bindJSON(c, &sh); err != nil {
		return err
	}
	id, err := s.deps.Shops.Create(c.Request().Context(), sh)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, OK(id))
}

// PUT /shop (admin): the whole shop, with its id, as in the course.
func (s *Server) updateShop(c echo.Context) error {
	var sh shop.Shop
	if err := bindJSON(c, &sh); err != nil {
		return err
	}
	if sh.ID <= 0 {
		return apperr.Errorf(apperr.Invalid, "missing field: id (a positive shop id)")
	}
	if err := s.deps.Shops.Update(c.Request().Context(), sh); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, OK(nil))
}

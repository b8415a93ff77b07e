package api

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/internal/voucher"
)

// pathID is the :name path parameter as a positive int64, or a 400.
func pathID(c echo.Context, name, what string) (int64, error) {
	id, err := strconv.ParseInt(c.Param(name), 10, 64)
	if err != nil || id <= 0 {
		return 0, apperr.Errorf(apperr.Invalid, "%s must be a positive integer", what)
	}
	return id, nil
}

// POST /voucher and POST /voucher/seckill (admin)
func (s *Server) createVoucher(kind int) echo.HandlerFunc {
	return func(c echo.Context) error {
		var v voucher.Voucher
		if err := bindJSON(c, &v); err != nil {
			return err
		}
		v.Type = kind
		id, err := s.deps.Vouchers.Create(c.Request().Context(), v)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, OK(id))
	}
}

// PUT /voucher/seckill/:id (admin): add or remove units, move the window.
func (s *Server) changeSale(c echo.Context) error {
	id, err := pathID(c, "id", "voucher id")
	if err != nil {
		return err
	}
	var ch voucher.Change
	if err := bindJSON(c, &ch); err != nil {
		return err
	}
	if err := ch.Validate(); err != nil {
		return err
	}
	stock, err := s.deps.Vouchers.ChangeSale(c.Request().Context(), id, ch)
	if err != nil {
		return err
	}
	if ch.AddStock > 0 {
		s.deps.Orders.SoldOut.Forget(id)
	}
	return c.JSON(http.StatusOK, OK(map[string]int64{"id": id, "stock": stock}))
}

// GET /voucher/list/:shopId
func (s *Server) listVouchers(c echo.Context) error {
	shopID, err := pathID(c, "shopId", "shop id")
	if err != nil {
		return err
	}
	list, err := s.deps.Vouchers.List(c.Request().Context(), shopID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, OK(list))
}

// POST /voucher-order/seckill/:id: the flash sale. The order id is a JSON
// string: JavaScript numbers lose 64-bit integers.
func (s *Server) seckillOrder(c echo.Context) error {
	voucherID, err := pathID(c, "id", "voucher id")
	if err != nil {
		return err
	}
	u, _ := currentUser(c)
	orderID, err := s.deps.Orders.Place(c.Request().Context(), u.ID, voucherID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, OK(strconv.FormatInt(orderID, 10)))
}

// GET /voucher-order/:id: the owner's order, pending, confirmed or failed.
func (s *Server) getOrder(c echo.Context) error {
	orderID, err := pathID(c, "id", "order id")
	if err != nil {
		return err
	}
	u, _ := currentUser(c)
	st, err := s.deps.Lookup.Find(c.Request().Context(), orderID, u.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, OK(st))
}

// GET /voucher-order/of/voucher/:voucherId: the user's order for a
// voucher, in any state, for a client that lost the order id.
func (s *Server) getOrderOf(c echo.Context) error {
	voucherID, err := pathID(c, "voucherId", "voucher id")
	if err != nil {
		return err
	}
	u, _ := currentUser(c)
	st, err := s.deps.Lookup.FindOf(c.Request().Context(), u.ID, voucherID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, OK(st))
}

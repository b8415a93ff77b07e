package api

import (
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/internal/botcheck"
	"github.com/seckill/seckill/internal/order"
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

// POST /voucher and POST /voucher/seckill (admin), with an optional
// Idempotency-Key header (voucher.Create).
func (s *Server) createVoucher(kind int) echo.HandlerFunc {
	return func(c echo.Context) error {
		key, err := idempotencyKey(c)
		if err != nil {
			return err
		}
		var v voucher.Voucher
		if err := bindJSON(c, &v); err != nil {
			return err
		}
		v.Type = kind
		id, err := s.deps.Vouchers.Create(c.Request().Context(), v, key)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, OK(id))
	}
}

// errBadKey is an Idempotency-Key the server does not keep.
var errBadKey = apperr.New(apperr.Invalid, "Idempotency-Key must be 1 to 255 visible ASCII characters")

// idempotencyKey is the request's Idempotency-Key, "" without one.
func idempotencyKey(c echo.Context) (string, error) {
	values := c.Request().Header.Values("Idempotency-Key")
	switch {
	case len(values) == 0:
		return "", nil
	case len(values) > 1:
		return "", errBadKey.With("one Idempotency-Key header, not %d", len(values))
	}
	key := values[0]
	if len(key) == 0 || len(key) > 255 || strings.IndexFunc(key, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0 {
		return "", errBadKey
	}
	return key, nil
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

// POST /voucher-order/seckill/:id and /voucher-order/seckill/:id/:path:
// the flash sale, at the fixed route or at the buyer's order path (the
// sales that ask for one take orders there only). The order id is a JSON
// string: JavaScript numbers lose 64-bit integers.
func (s *Server) seckillOrder(c echo.Context) error {
	voucherID, err := pathID(c, "id", "voucher id")
	if err != nil {
		return err
	}
	u, _ := currentUser(c)
	path := c.Param("path")
	if err := s.deps.BotChecks.CheckOrder(c.Request().Context(), u.ID, voucherID, path); err != nil {
		return err
	}
	orderID, err := s.deps.Orders.Place(c.Request().Context(), u.ID, voucherID)
	if path != "" && errors.Is(err, order.ErrAlreadyBought) {
		s.deps.BotChecks.PathUsed()
	}
	if e, ok := errors.AsType[*order.Entry](err); ok {
		return c.JSON(http.StatusAccepted, OK(EntryOf(voucherID, e)))
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, OK(strconv.FormatInt(orderID, 10)))
}

// Entry is the answer to an attempt that entered a sale's draw: no order
// yet, the one it becomes if drawn, when the draw is made and where its
// outcome is read.
type Entry struct {
	Entered bool      `json:"entered"`
	OrderID int64     `json:"orderId,string"`
	DrawAt  time.Time `json:"drawAt"`
	Outcome string    `json:"outcome"`
}

// EntryOf is e's answer.
func EntryOf(voucherID int64, e *order.Entry) Entry {
	return Entry{Entered: true, OrderID: e.OrderID, DrawAt: e.DrawAt.UTC(), Outcome: "/voucher-order/of/voucher/" + strconv.FormatInt(voucherID, 10)}
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

// OrderPath is an order path issued to a buyer: where to POST the order.
type OrderPath struct {
	Path      string    `json:"path"`
	URL       string    `json:"url"` // the order route with the path, from the root
	ExpiresAt time.Time `json:"expiresAt"`
}

func orderPath(voucherID int64, path string, expires time.Time) OrderPath {
	return OrderPath{Path: path, URL: "/voucher-order/seckill/" + strconv.FormatInt(voucherID, 10) + "/" + path, ExpiresAt: expires}
}

// GET /voucher-order/seckill/:id/path: the buyer's order path, once the
// sale is open, on a sale that issues it without a challenge.
func (s *Server) orderPath(c echo.Context) error {
	voucherID, err := pathID(c, "id", "voucher id")
	if err != nil {
		return err
	}
	u, _ := currentUser(c)
	path, expires, err := s.deps.BotChecks.IssuePath(c.Request().Context(), u.ID, voucherID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, OK(orderPath(voucherID, path, expires)))
}

// ChallengeShown is a challenge as the buyer sees it: its picture inline,
// its reading at a link of its own.
type ChallengeShown struct {
	ChallengeID string    `json:"challengeId"`
	Image       string    `json:"image"` // a data: URL of the PNG
	Audio       string    `json:"audio"` // the digits read aloud (WAV), from the root
	ExpiresAt   time.Time `json:"expiresAt"`
}

// GET /voucher-order/seckill/:id/challenge: a challenge, once the sale is
// open, on a sale that asks for one.
func (s *Server) challenge(c echo.Context) error {
	voucherID, err := pathID(c, "id", "voucher id")
	if err != nil {
		return err
	}
	u, _ := currentUser(c)
	p, err := s.deps.BotChecks.NewChallenge(c.Request().Context(), u.ID, voucherID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, OK(ChallengeShown{
		ChallengeID: p.ID,
		Image:       "data:image/png;base64," + base64.StdEncoding.EncodeToString(p.PNG),
		Audio:       "/voucher-order/challenge/" + p.ID + "/audio",
		ExpiresAt:   p.ExpiresAt,
	}))
}

// Answer is a buyer's answer to a challenge.
type Answer struct {
	ChallengeID string `json:"challengeId"`
	Answer      string `json:"answer"`
}

// POST /voucher-order/seckill/:id/path: the order path for a solved
// challenge. The challenge is used up, right or wrong.
func (s *Server) solveChallenge(c echo.Context) error {
	voucherID, err := pathID(c, "id", "voucher id")
	if err != nil {
		return err
	}
	var a Answer
	if err := bindJSON(c, &a); err != nil {
		return err
	}
	u, _ := currentUser(c)
	path, expires, err := s.deps.BotChecks.Solve(c.Request().Context(), u.ID, voucherID, a.ChallengeID, a.Answer)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, OK(orderPath(voucherID, path, expires)))
}

// GET /voucher-order/challenge/:challengeId/audio?lang=en: the buyer's
// challenge's digits read aloud, for a buyer who cannot see the picture;
// limited like the challenges, since each reading costs a WAV's drawing.
func (s *Server) challengeAudio(c echo.Context) error {
	lang := c.QueryParam("lang")
	if lang == "" {
		lang = "en"
	}
	if !slices.Contains(botcheck.Languages, lang) {
		return apperr.Errorf(apperr.Invalid, "lang must be one of %s", strings.Join(botcheck.Languages, ", "))
	}
	u, _ := currentUser(c)
	wav, err := s.deps.BotChecks.Audio(c.Request().Context(), u.ID, c.Param("challengeId"), lang)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.Blob(http.StatusOK, "audio/wav", wav)
}

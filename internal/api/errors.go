package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/seckill/seckill/internal/ratelimit"
	"github.com/seckill/seckill/internal/seckill"
	"github.com/seckill/seckill/internal/shop"
	"github.com/seckill/seckill/internal/user"
	"github.com/seckill/seckill/internal/voucher"
)

// outcomes are the business outcomes a user should read: HTTP 200,
// success false, and the outcome's own message (never the wrapping text).
var outcomes = []error{
	user.ErrInvalidPhone, user.ErrWrongCode, user.ErrCodeBurned, user.ErrNoCode,
	shop.ErrNotFound,
	seckill.ErrUnknownVoucher, seckill.ErrNotStarted, seckill.ErrEnded, seckill.ErrAlreadyBought, seckill.ErrSoldOut,
}

// handleError is the one mapping from errors to HTTP answers:
//   - a business outcome: 200 with success false and its message;
//   - a rate limit: 429 with Retry-After;
//   - a protocol error (*echo.HTTPError below 500): its status, its message;
//   - anything else is a server fault: logged with the request id and
//     answered with a generic message, so no internal text reaches a client.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code, body := s.answer(err, c)
	var writeErr error
	if c.Request().Method == http.MethodHead {
		writeErr = c.NoContent(code)
	} else {
		writeErr = c.JSON(code, body)
	}
	if writeErr != nil {
		s.logger.Warn("writing error response", "request_id", requestID(c), "err", writeErr)
	}
}

func (s *Server) answer(err error, c echo.Context) (int, Result) {
	for _, o := range outcomes {
		if errors.Is(err, o) {
			return http.StatusOK, Fail(o.Error())
		}
	}
	switch {
	case errors.Is(err, voucher.ErrInvalid), errors.Is(err, shop.ErrInvalid):
		return http.StatusBadRequest, Fail(err.Error())
	case errors.Is(err, voucher.ErrNotFound):
		return http.StatusNotFound, Fail(voucher.ErrNotFound.Error())
	case errors.Is(err, seckill.ErrNotEnoughStock), errors.Is(err, seckill.ErrNotWarmed):
		return http.StatusConflict, Fail(err.Error())
	}
	var notPublished *seckill.NotPublishedError
	if errors.As(err, &notPublished) {
		// The order is reserved and the relay will publish it: the client
		// gets its id to follow it, with a 503 because it is not yet sure.
		c.Response().Header().Set("Retry-After", "5")
		id := strconv.FormatInt(notPublished.OrderID, 10)
		return http.StatusServiceUnavailable, Result{ErrorMsg: "order " + id +
			" is reserved but the order queue is slow: it will be processed; follow it at /voucher-order/" + id, Data: id}
	}
	if errors.Is(err, seckill.ErrNotTaken) {
		c.Response().Header().Set("Retry-After", "5")
		return http.StatusServiceUnavailable, Fail(seckill.ErrNotTaken.Error())
	}
	var exceeded *ratelimit.ExceededError
	if errors.As(err, &exceeded) {
		c.Response().Header().Set("Retry-After", strconv.Itoa(exceeded.RetryAfterSeconds()))
		return http.StatusTooManyRequests, Fail(exceeded.Message)
	}
	if errors.Is(err, ratelimit.ErrUnavailable) {
		// The limiter logged the outage once; not again per request.
		c.Response().Header().Set("Retry-After", "1")
		return http.StatusServiceUnavailable, Fail("service temporarily unavailable: retry shortly")
	}
	var he *echo.HTTPError
	if errors.As(err, &he) && he.Code < http.StatusInternalServerError {
		return he.Code, Fail(s.protocolMessage(he, c))
	}
	code := http.StatusInternalServerError
	if he != nil {
		code = he.Code
	}
	s.logger.Error("request failed", "request_id", requestID(c), "method", c.Request().Method,
		"path", c.Request().URL.Path, "status", code, "err", err)
	if code == http.StatusServiceUnavailable {
		c.Response().Header().Set("Retry-After", "1")
		return code, Fail("service temporarily unavailable: retry shortly")
	}
	return code, Fail("internal server error")
}

// protocolMessage replaces echo's terse built-in messages with ones that
// say what was wrong.
func (s *Server) protocolMessage(he *echo.HTTPError, c echo.Context) string {
	r := c.Request()
	switch he {
	case echo.ErrNotFound:
		return fmt.Sprintf("no such route: %s %s", r.Method, r.URL.Path)
	case echo.ErrMethodNotAllowed:
		return fmt.Sprintf("method %s is not allowed on %s", r.Method, r.URL.Path)
	case echo.ErrStatusRequestEntityTooLarge:
		return fmt.Sprintf("request body too large: at most %d bytes", s.cfg.BodyLimit)
	}
	return fmt.Sprint(he.Message)
}

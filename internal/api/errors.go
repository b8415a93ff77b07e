package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/internal/mysqldb"
	"github.com/seckill/seckill/internal/redisconn"
)

// statusOf is the one mapping from error codes to HTTP statuses. An
// outcome is a business answer the user should read: 200 with success
// false, as the course's client expects.
var statusOf = map[apperr.Code]int{
	apperr.Outcome:       http.StatusOK,
	apperr.Invalid:       http.StatusBadRequest,
	apperr.Unauthorized:  http.StatusUnauthorized,
	apperr.Forbidden:     http.StatusForbidden,
	apperr.NotFound:      http.StatusNotFound,
	apperr.Conflict:      http.StatusConflict,
	apperr.Unprocessable: http.StatusUnprocessableEntity,
	apperr.Unsupported:   http.StatusUnsupportedMediaType,
	apperr.RateLimited:   http.StatusTooManyRequests,
	apperr.Unavailable:   http.StatusServiceUnavailable,
	apperr.Internal:      http.StatusInternalServerError,
}

// handleError is echo's HTTPErrorHandler: every failed request is answered
// here.
//   - an *apperr.Error: the status of its code, its message, its data and
//     Retry-After;
//   - echo's own protocol errors (unknown route, wrong method, body too
//     large): their status and a message that says what was wrong;
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
		s.logger.WarnContext(c.Request().Context(), "writing error response", "request_id", requestID(c), "err", writeErr)
	}
}

func (s *Server) answer(err error, c echo.Context) (int, Result) {
	if e, ok := apperr.As(err); ok && e.Code != apperr.Internal {
		if e.RetryAfter > 0 {
			c.Response().Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(e.RetryAfter)))
		}
		status, ok := statusOf[e.Code]
		if !ok {
			status = http.StatusInternalServerError
		}
		if status >= http.StatusInternalServerError {
			// The component that failed logs its outage once; per request
			// it is detail.
			s.logger.DebugContext(c.Request().Context(), "request refused", "request_id", requestID(c), "path", c.Request().URL.Path, "err", err)
		}
		return status, Result{ErrorMsg: e.Message, Data: e.Data}
	}
	var he *echo.HTTPError
	if errors.As(err, &he) && he.Code < http.StatusInternalServerError {
		return he.Code, Fail(s.protocolMessage(he, c))
	}
	if errors.Is(err, context.Canceled) && c.Request().Context().Err() != nil {
		// The client hung up before anything was done: no server fault,
		// and nobody to read the answer.
		return statusClientClosed, Fail("client closed the request")
	}
	if redisconn.OutOfMemory(err) {
		// Redis at its memory limit refused the write, whole: nothing to
		// undo, and the same request works once memory is freed (the
		// memory alerts tell the operator; docs/operations.md).
		s.logger.DebugContext(c.Request().Context(), "request refused: Redis is at its memory limit", "request_id", requestID(c),
			"path", c.Request().URL.Path, "err", err)
		c.Response().Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(memoryRetry)))
		return http.StatusServiceUnavailable, Fail("the service cannot take more right now (its memory is full): try again shortly")
	}
	if mysqldb.Unreachable(err) {
		// A dependency this route needs is down (the monitor logs the
		// outage once): the request was fine and works again once it is
		// back, so the client is told to retry rather than of a fault.
		s.logger.DebugContext(c.Request().Context(), "request refused: a dependency is unreachable", "request_id", requestID(c),
			"path", c.Request().URL.Path, "err", err)
		c.Response().Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(dependencyRetry)))
		return http.StatusServiceUnavailable, Fail("a service this request needs is unavailable: try again shortly")
	}
	s.logger.ErrorContext(c.Request().Context(), "request failed", "request_id", requestID(c), "method", c.Request().Method,
		"path", c.Request().URL.Path, "err", err)
	return http.StatusInternalServerError, Fail("internal server error")
}

// dependencyRetry is the Retry-After of a request refused while a
// dependency is down: the monitor's first retries come within a second.
// memoryRetry is that of a write Redis refused at its memory limit, which
// a person or an expiry must free.
const (
	dependencyRetry = 2 * time.Second
	memoryRetry     = 5 * time.Second
)

// statusClientClosed is nginx's 499, "client closed request": counted in
// the metrics apart from server faults.
const statusClientClosed = 499

// retryAfterSeconds is d rounded up to whole seconds, at least 1, as the
// Retry-After header wants it.
func retryAfterSeconds(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
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

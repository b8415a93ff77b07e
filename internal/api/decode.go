package api

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seckill/seckill/internal/apperr"
)

// bindJSON decodes the request's JSON body into v, answering every way a
// body can be wrong with a 4xx and a message the client can act on: an
// Invalid or Unsupported error, or echo's 413 from the body limit.
func bindJSON(c echo.Context, v any) error {
	if ct := c.Request().Header.Get(echo.HeaderContentType); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != echo.MIMEApplicationJSON {
			return apperr.Errorf(apperr.Unsupported, "Content-Type must be application/json")
		}
	}
	return decodeJSON(c.Request().Body, v)
}

// decodeJSON reads exactly one JSON value from r into v. Every error it
// returns is an Invalid *apperr.Error, or echo's 413.
func decodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var he *echo.HTTPError
		if errors.As(err, &he) {
			return he
		}
		return apperr.Errorf(apperr.Invalid, "the body must hold one JSON object and nothing after it")
	}
	return nil
}

func decodeError(err error) error {
	var (
		he        *echo.HTTPError
		syntaxErr *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
		timeErr   *time.ParseError
	)
	switch {
	case errors.As(err, &he):
		// The body limit middleware's reader: 413.
		return he
	case errors.Is(err, io.EOF):
		return apperr.Errorf(apperr.Invalid, "the body is empty: want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return apperr.Errorf(apperr.Invalid, "the body ends in the middle of its JSON")
	case errors.As(err, &syntaxErr):
		return apperr.Errorf(apperr.Invalid, "malformed JSON at byte %d", syntaxErr.Offset)
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return apperr.Errorf(apperr.Invalid, "the body must be a JSON object")
		}
		return apperr.Errorf(apperr.Invalid, "field %q must be %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()))
	case errors.As(err, &timeErr):
		return apperr.Errorf(apperr.Invalid, "malformed time %s: want RFC 3339, like 2026-11-22T20:00:00+08:00", timeErr.Value)
	default:
		return apperr.Errorf(apperr.Invalid, "unreadable JSON body")
	}
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64":
		return "a number"
	case "bool":
		return "true or false"
	case "slice", "array":
		return "an array"
	default:
		return "an object"
	}
}

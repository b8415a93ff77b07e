package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"mime"
	"regexp"
	"strconv"
	"strings"
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
	raw, err := io.ReadAll(r)
	if err != nil {
		var he *echo.HTTPError
		if errors.As(err, &he) {
			return he // the body limit middleware's reader: 413
		}
		return apperr.Errorf(apperr.Invalid, "unreadable body")
	}
	err = decodeOne(raw, v)
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && strings.HasPrefix(typeErr.Value, "number") {
		// JSON has one number type: 2205.0 and 2.205e3 are the integer
		// 2205 (as JSON Schema's integer says), which encoding/json
		// refuses for an integer field.
		if exact, ok := integralNumbers(raw); ok {
			err = decodeOne(exact, v)
		}
	}
	if err != nil {
		return decodeError(err)
	}
	return nil
}

func decodeOne(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return apperr.Errorf(apperr.Invalid, "the body must hold one JSON object and nothing after it")
	}
	return nil
}

// integralNumbers is raw with every integral number written as an
// integer; ok is false when raw is no JSON value.
func integralNumbers(raw []byte) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil {
		return nil, false
	}
	var walk func(any) any
	walk = func(x any) any {
		switch t := x.(type) {
		case json.Number:
			if _, err := t.Int64(); err == nil {
				return t
			}
			if f, ok := new(big.Float).SetString(t.String()); ok && f.IsInt() {
				if n, acc := f.Int64(); acc == big.Exact {
					return json.Number(strconv.FormatInt(n, 10))
				}
			}
			return t
		case map[string]any:
			for k, e := range t {
				t[k] = walk(e)
			}
		case []any:
			for i, e := range t {
				t[i] = walk(e)
			}
		}
		return x
	}
	out, err := json.Marshal(walk(doc))
	return out, err == nil
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
		if rfc3339Shape.MatchString(timeErr.Value) {
			// Written as a time, but no time: February 30th.
			return apperr.Errorf(apperr.Unprocessable, "time %s does not exist", timeErr.Value)
		}
		return apperr.Errorf(apperr.Invalid, "malformed time %q: want RFC 3339, like 2026-11-22T20:00:00+08:00", timeErr.Value)
	default:
		return apperr.Errorf(apperr.Invalid, "unreadable JSON body")
	}
}

// rfc3339Shape is what the API document's date-time pattern allows.
var rfc3339Shape = regexp.MustCompile(`^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`)

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

// Package apperr is the project's one error type: a code that says what
// kind of failure it is, and a message meant for the user. Packages declare
// their sentinels with New and callers branch with errors.Is; the HTTP API
// maps each code to one status (internal/api), and anything that is not an
// *Error is an internal fault whose text never reaches a client.
package apperr

import (
	"errors"
	"fmt"
	"time"
)

// Code is the kind of a failure, as a caller branches on it.
type Code string

// The codes. Outcome is a business answer the user should read (sold out,
// wrong code): the request was fine and was answered.
const (
	Outcome      Code = "outcome"
	Invalid      Code = "invalid"
	Unauthorized Code = "unauthorized"
	Forbidden    Code = "forbidden"
	NotFound     Code = "not_found"
	Conflict     Code = "conflict"
	// Unprocessable: well-formed, each field within its bounds, but the
	// fields together break a rule (an end before its begin).
	Unprocessable Code = "unprocessable"
	Unsupported   Code = "unsupported" // a request format the server does not take
	RateLimited   Code = "rate_limited"
	Unavailable   Code = "unavailable"
	Internal      Code = "internal"
)

// Error is a failure with its code and the message a user may read.
type Error struct {
	Code    Code
	Message string
	// RetryAfter, when set, is how long the client should wait before
	// trying again (rate limits, temporary refusals).
	RetryAfter time.Duration
	// Data is what the client still gets with the failure, such as the id
	// of an order that was reserved but not yet confirmed.
	Data any

	parent *Error // the error this one was derived from
	cause  error  // what went wrong underneath, for the log only
}

// New declares a sentinel.
func New(code Code, message string) *Error { return &Error{Code: code, Message: message} }

// Error is the message, and the cause when there is one: for logs. A
// client sees Message alone.
func (e *Error) Error() string {
	if e.cause != nil {
		return e.Message + ": " + e.cause.Error()
	}
	return e.Message
}

// Unwrap makes errors.Is find every error this one was derived from, and
// its cause.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.parent != nil {
		errs = append(errs, e.parent)
	}
	if e.cause != nil {
		errs = append(errs, e.cause)
	}
	return errs
}

func (e *Error) derive() *Error {
	d := *e
	d.parent, d.cause = e, nil
	return &d
}

// With is e with a detail appended to its message; errors.Is(err, e) still
// holds.
func (e *Error) With(format string, args ...any) *Error {
	d := e.derive()
	d.Message = e.Message + ": " + fmt.Sprintf(format, args...)
	return d
}

// Wrap is e caused by cause: the same message for the client, the cause in
// the log and for errors.Is/As.
func (e *Error) Wrap(cause error) *Error {
	d := e.derive()
	d.cause = cause
	return d
}

// Retry is e with a Retry-After.
func (e *Error) Retry(after time.Duration) *Error {
	d := e.derive()
	d.RetryAfter = after
	return d
}

// WithData is e carrying data for the client.
func (e *Error) WithData(data any) *Error {
	d := e.derive()
	d.Data = data
	return d
}

// As is the outermost *Error in err's chain, if any.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// CodeOf is err's code: Internal for anything that is not an *Error.
func CodeOf(err error) Code {
	if e, ok := As(err); ok {
		return e.Code
	}
	return Internal
}

// Errorf is a one-off error of code: a message built for this failure, not
// a sentinel callers branch on.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

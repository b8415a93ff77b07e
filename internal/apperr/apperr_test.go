package apperr_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/apperr"
)

var (
	errSoldOut = apperr.New(apperr.Outcome, "sold out")
	errOther   = apperr.New(apperr.Outcome, "other")
	errBusy    = apperr.New(apperr.Unavailable, "busy").Retry(5 * time.Second)
)

func TestDerivedErrorsKeepTheirSentinelAndCode(t *testing.T) {
	cause := errors.New("connection refused")
	tests := []struct {
		name      string
		err       error
		is        []error
		isNot     []error
		code      apperr.Code
		message   string
		retry     time.Duration
		wantCause bool
	}{
		{"Sentinel", errSoldOut, []error{errSoldOut}, []error{errOther}, apperr.Outcome, errSoldOut.Message, 0, false},
		{"WrappedWithContext", fmt.Errorf("voucher 7: %w", errSoldOut), []error{errSoldOut}, []error{errOther}, apperr.Outcome, errSoldOut.Message, 0, false},
		{"WithDetail", errSoldOut.With("only %d left", 0), []error{errSoldOut}, []error{errOther}, apperr.Outcome, "sold out: only 0 left", 0, false},
		{"DerivedSentinel", errBusy, []error{errBusy}, []error{errSoldOut}, apperr.Unavailable, "busy", 5 * time.Second, false},
		{"DerivedTwice", errBusy.WithData("42").Wrap(cause), []error{errBusy, cause}, []error{errSoldOut}, apperr.Unavailable, "busy", 5 * time.Second, true},
		{"OneOff", apperr.Errorf(apperr.Invalid, "field %q", "x"), nil, []error{errSoldOut}, apperr.Invalid, `field "x"`, 0, false},
		{"PlainError", cause, []error{cause}, []error{errSoldOut}, apperr.Internal, "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, target := range tt.is {
				if !errors.Is(tt.err, target) {
					t.Errorf("errors.Is(%v, %v) = false", tt.err, target)
				}
			}
			for _, target := range tt.isNot {
				if errors.Is(tt.err, target) {
					t.Errorf("errors.Is(%v, %v) = true", tt.err, target)
				}
			}
			if got := apperr.CodeOf(tt.err); got != tt.code {
				t.Errorf("code %s, want %s", got, tt.code)
			}
			e, ok := apperr.As(tt.err)
			if !ok {
				return
			}
			if e.Message != tt.message || e.RetryAfter != tt.retry {
				t.Errorf("message %q retry %v, want %q %v", e.Message, e.RetryAfter, tt.message, tt.retry)
			}
			if errors.Is(e, cause) != tt.wantCause {
				t.Errorf("cause kept: %v, want %v", errors.Is(e, cause), tt.wantCause)
			}
		})
	}
	if errSoldOut.With("x"); errSoldOut.Message != "sold out" {
		t.Fatal("With changed the sentinel itself")
	}
}

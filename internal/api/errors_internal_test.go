package api

import (
	"testing"
	"time"

	"github.com/seckill/seckill/internal/apperr"
)

func TestRetryAfterSecondsRoundsUp(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		d    time.Duration
		want int
	}{{0, 1}, {time.Millisecond, 1}, {time.Second, 1}, {1001 * time.Millisecond, 2}, {59 * time.Second, 59}} {
		if got := retryAfterSeconds(tt.d); got != tt.want {
			t.Errorf("RetryAfter %v -> %d s, want %d", tt.d, got, tt.want)
		}
	}
}

// Every code has its status: a code missing from the table would answer
// 500 for what is no server fault.
func TestEveryCodeHasAStatus(t *testing.T) {
	t.Parallel()
	codes := []apperr.Code{apperr.Outcome, apperr.Invalid, apperr.Unauthorized, apperr.Forbidden, apperr.NotFound,
		apperr.Conflict, apperr.Unprocessable, apperr.Unsupported, apperr.RateLimited, apperr.Unavailable, apperr.Internal}
	if len(statusOf) != len(codes) {
		t.Fatalf("%d statuses for %d codes", len(statusOf), len(codes))
	}
	for _, c := range codes {
		if _, ok := statusOf[c]; !ok {
			t.Errorf("no status for code %s", c)
		}
	}
}

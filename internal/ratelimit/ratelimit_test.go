package ratelimit

import (
	"testing"
	"time"
)

func TestParseLimit(t *testing.T) {
	tests := []struct {
		in      string
		want    Limit
		wantErr bool
	}{
		{"5/1s", Limit{5, time.Second}, false},
		{"20/1m", Limit{20, time.Minute}, false},
		{" 10 / 24h ", Limit{10, 24 * time.Hour}, false},
		{"off", Limit{}, false},
		{"5", Limit{}, true},
		{"0/1s", Limit{}, true},
		{"-1/1s", Limit{}, true},
		{"x/1s", Limit{}, true},
		{"5/", Limit{}, true},
		{"5/soon", Limit{}, true},
		{"5/1us", Limit{}, true},
		{"", Limit{}, true},
	}
	for _, tt := range tests {
		got, err := ParseLimit(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseLimit(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestRetryAfterSecondsRoundsUp(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want int
	}{{0, 1}, {time.Millisecond, 1}, {time.Second, 1}, {1001 * time.Millisecond, 2}, {59 * time.Second, 59}} {
		if got := (&ExceededError{RetryAfter: tt.d}).RetryAfterSeconds(); got != tt.want {
			t.Errorf("RetryAfter %v -> %d s, want %d", tt.d, got, tt.want)
		}
	}
}

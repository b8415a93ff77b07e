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

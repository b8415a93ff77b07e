package config

import (
	"strings"
	"testing"
	"time"
)

func TestReaderNamesTheBadVariable(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		read    func(r *Reader)
		wantErr string
	}{
		{"DefaultsWhenUnset", nil, func(r *Reader) {
			if got := r.Int("N", 7, 0, 10); got != 7 {
				t.Errorf("Int default = %d", got)
			}
			if got := r.Duration("D", time.Second); got != time.Second {
				t.Errorf("Duration default = %v", got)
			}
		}, ""},
		{"EmptyMeansDefault", map[string]string{"S": "  "}, func(r *Reader) {
			if got := r.String("S", "def"); got != "def" {
				t.Errorf("String = %q", got)
			}
		}, ""},
		{"IntNotANumber", map[string]string{"SECKILL_N": "x"}, func(r *Reader) { r.Int("SECKILL_N", 1, 0, 9) }, `invalid SECKILL_N="x": not an integer`},
		{"IntOutOfRange", map[string]string{"SECKILL_N": "99"}, func(r *Reader) { r.Int("SECKILL_N", 1, 0, 9) }, "must be between 0 and 9"},
		{"DurationBad", map[string]string{"SECKILL_D": "10"}, func(r *Reader) { r.Duration("SECKILL_D", time.Second) }, `invalid SECKILL_D="10": not a duration`},
		{"DurationNegative", map[string]string{"SECKILL_D": "-1s"}, func(r *Reader) { r.Duration("SECKILL_D", time.Second) }, "greater than zero"},
		{"BoolBad", map[string]string{"SECKILL_B": "yes please"}, func(r *Reader) { r.Bool("SECKILL_B", false) }, "SECKILL_B"},
		{"OneOfBad", map[string]string{"SECKILL_LOG_FORMAT": "xml"}, func(r *Reader) { r.OneOf("SECKILL_LOG_FORMAT", "text", "text", "json") }, "must be one of text, json"},
		{"HostPortBad", map[string]string{"SECKILL_ADDR": "localhost"}, func(r *Reader) { r.HostPort("SECKILL_ADDR", ":1") }, `invalid SECKILL_ADDR="localhost"`},
		{"HostPortBadPort", map[string]string{"SECKILL_ADDR": "h:99999"}, func(r *Reader) { r.HostPort("SECKILL_ADDR", ":1") }, "port must be"},
		{"HostPortsList", map[string]string{"SECKILL_BROKERS": "a:1, b:2"}, func(r *Reader) {
			if got := r.HostPorts("SECKILL_BROKERS", ""); len(got) != 2 || got[1] != "b:2" {
				t.Errorf("HostPorts = %v", got)
			}
		}, ""},
		{"HostPortsEmpty", map[string]string{"SECKILL_BROKERS": ","}, func(r *Reader) { r.HostPorts("SECKILL_BROKERS", "") }, "needs at least one"},
		{"ErrorsAccumulate", map[string]string{"A": "x", "B": "y"}, func(r *Reader) {
			r.Int("A", 0, 0, 1)
			r.Bool("B", false)
		}, "invalid B"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewFrom(func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			tt.read(r)
			err := r.Err()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

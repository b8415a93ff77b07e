package binlog

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	perrors "github.com/pingcap/errors"
)

func TestPurged(t *testing.T) {
	purge := &mysql.MyError{Code: 1236, State: "HY000", Message: "Could not find first log file name in binary log index file"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"ServerError", purge, true},
		{"TracedAsGoMySQLDoes", perrors.Trace(purge), true},
		{"Wrapped", fmt.Errorf("binlog: %w", perrors.Trace(purge)), true},
		{"AnotherServerError", &mysql.MyError{Code: 1045, Message: "Access denied for user 'canal'@'127.0.0.1' (1236 attempts)"}, false},
		{"APortWith1236", errors.New("dial tcp 127.0.0.1:12360: connect: connection refused"), false},
		{"APositionWith1236", perrors.Trace(errors.New("read binlog event at mysql-bin.000003:1236: EOF")), false},
		{"None", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := purged(tc.err); got != tc.want {
				t.Fatalf("purged(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

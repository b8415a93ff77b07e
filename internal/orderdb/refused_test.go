package orderdb_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/orderdb"
)

func TestRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"IncorrectDatetime", &mysql.MySQLError{Number: 1292, Message: "Incorrect datetime value"}, true},
		{"OutOfRange", &mysql.MySQLError{Number: 1264}, true},
		{"IncorrectInteger", &mysql.MySQLError{Number: 1366}, true},
		{"CheckConstraintMariaDB", &mysql.MySQLError{Number: 4025}, true},
		{"CheckConstraintMySQL", &mysql.MySQLError{Number: 3819}, true},
		{"Wrapped", fmt.Errorf("insert orders: %w", &mysql.MySQLError{Number: 1292}), true},
		{"Deadlock", &mysql.MySQLError{Number: 1213}, false},
		{"LockWaitTimeout", &mysql.MySQLError{Number: 1205}, false},
		{"ReadOnly", &mysql.MySQLError{Number: 1290}, false},
		{"DuplicateKey", &mysql.MySQLError{Number: 1062}, false},
		{"ConnectionLost", driver.ErrBadConn, false},
		{"InvalidConn", mysql.ErrInvalidConn, false},
		{"Deadline", context.DeadlineExceeded, false},
		{"Other", errors.New("1292"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := orderdb.Refused(tc.err); got != tc.want {
				t.Fatalf("Refused(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

package mysqldb_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/mysqldb"
	"github.com/seckill/seckill/internal/testsupport"
)

func TestExplain(t *testing.T) {
	wsrep := &mysql.MySQLError{Number: 1047, Message: "WSREP has not yet prepared node for application use"}
	denied := &mysql.MySQLError{Number: 1045, Message: "Access denied for user 'seckill'@'127.0.0.1' (using password: YES)"}
	for _, tc := range []struct {
		name string
		err  error
		says string // "" when the error is to pass unchanged
	}{
		{"GaleraNodeOutsideAPrimaryComponent", wsrep, "outside a Primary component"},
		{"Wrapped", fmt.Errorf("read: %w", wsrep), "outside a Primary component"},
		{"ClosedByAProxy", driver.ErrBadConn, "a proxy with no healthy server"},
		{"InvalidConnection", mysql.ErrInvalidConn, "a proxy with no healthy server"},
		{"UnexpectedEOF", io.ErrUnexpectedEOF, "a proxy with no healthy server"},
		{"WrongPassword", denied, ""},
		{"Other", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mysqldb.Explain(tc.err)
			if !errors.Is(got, tc.err) {
				t.Fatalf("Explain(%v) = %v: the error itself is lost", tc.err, got)
			}
			if tc.says == "" && got != tc.err {
				t.Fatalf("Explain(%v) = %v, want it unchanged", tc.err, got)
			}
			if tc.says != "" && !strings.Contains(got.Error(), tc.says) {
				t.Fatalf("Explain(%v) = %v, want it to say %q", tc.err, got, tc.says)
			}
		})
	}
	if mysqldb.Explain(nil) != nil {
		t.Fatal("Explain(nil) is not nil")
	}
}

// The test server is one MariaDB (or MySQL) outside any Galera cluster:
// ready, whatever its wsrep status variables say (MariaDB shows
// wsrep_ready OFF without a cluster).
func TestCheckPassesAServerOutsideGalera(t *testing.T) {
	m := testsupport.MustEmptyMySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := mysqldb.Check(ctx, m.DB); err != nil {
		t.Fatalf("Check of the test server: %v", err)
	}
}

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

// Unreachable is a statement no server could take — to be retried, not a
// fault: a refused connect (a real one), a connection that broke, a
// Galera node outside a Primary component. An error about the statement
// or a desynchronised protocol (a client's bug) is not.
func TestUnreachable(t *testing.T) {
	refused := func() error {
		d, err := mysqldb.Open("seckill:seckill@tcp(" + testsupport.FreeAddr(t) + ")/seckill")
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		return d.PingContext(context.Background())
	}()
	wsrep := &mysql.MySQLError{Number: 1047, Message: "WSREP has not yet prepared node for application use"}
	syntax := &mysql.MySQLError{Number: 1064, Message: "You have an error in your SQL syntax"}
	for _, tc := range []struct {
		name        string
		err         error
		unreachable bool
	}{
		{"a refused connect", refused, true},
		{"a connection the server closed", mysql.ErrInvalidConn, true},
		{"closed by a proxy", driver.ErrBadConn, true},
		{"a Galera node outside a Primary component", fmt.Errorf("read: %w", wsrep), true},
		{"a statement's error", syntax, false},
		{"a desynchronised protocol", mysql.ErrPktSync, false},
		{"a malformed packet", mysql.ErrMalformPkt, false},
		{"none", nil, false},
	} {
		if got := mysqldb.Unreachable(tc.err); got != tc.unreachable {
			t.Errorf("%s: Unreachable(%v) = %v, want %v", tc.name, tc.err, got, tc.unreachable)
		}
	}
}

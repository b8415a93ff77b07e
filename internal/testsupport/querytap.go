package testsupport

import (
	"bufio"
	"database/sql"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/mysqldb"
)

// QueryTap stands between a program and MySQL and keeps the text of every
// statement the program sends: what a test counts to show how often a path
// reaches the database, on MySQL and MariaDB alike (a server's global
// Com_select counts every test's statements at once). It reads the client's
// side of the protocol only: each command starts a packet sequence at 0,
// and a COM_QUERY carries its statement's text (mysqldb interpolates the
// parameters, so no statement is prepared).
type QueryTap struct {
	Addr   string
	target string

	mu      sync.Mutex
	queries []string
	// lose is armed by LoseNextAnswer.
	lose atomic.Pointer[loss]
}

type loss struct {
	match    func(query string) bool
	answered func(txn []string)
	// unsent: the statement itself never reaches the server.
	unsent bool
	// delay: the program's connection is cut, the statement reaches the
	// server this much later.
	delay time.Duration
}

// DSNThrough is m's DSN with tap between the program and the server.
func (m *MySQL) DSNThrough(tap *QueryTap) string {
	cfg, err := mysql.ParseDSN(m.DSN)
	if err != nil {
		panic(fmt.Sprintf("the test database's own DSN %q: %v", m.DSN, err))
	}
	cfg.Addr = tap.Addr
	return cfg.FormatDSN()
}

// MustOpenThrough is a pool to m's database through tap, closed when the
// test ends.
func (m *MySQL) MustOpenThrough(tb testing.TB, tap *QueryTap) *sql.DB {
	tb.Helper()
	db, err := mysqldb.Open(m.DSNThrough(tap))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// LoseNextCommitAnswer arms the tap: the next COMMIT goes to the server,
// and when the server's answer comes back the tap calls answered with the
// statements of the transaction it committed (which may kill the server)
// and then closes both sides of that connection without passing the
// answer on. The program saw its commit sent and no answer: it cannot
// tell a commit made from one lost.
func (t *QueryTap) LoseNextCommitAnswer(answered func(txn []string)) {
	t.LoseNextAnswer(func(q string) bool { return strings.EqualFold(strings.TrimSpace(q), "COMMIT") }, answered)
}

// LoseNextAnswer is LoseNextCommitAnswer for the next statement match
// accepts (an UPDATE in autocommit is its own commit); txn is the
// connection's statements since its last COMMIT, the matched one included
// unless it is a COMMIT.
func (t *QueryTap) LoseNextAnswer(match func(query string) bool, answered func(txn []string)) {
	t.lose.Store(&loss{match: match, answered: answered})
}

// LoseNextCommit arms the tap: the next COMMIT never reaches the server.
// The tap calls lost with the transaction's statements and closes both
// sides of the connection, so the server rolls the transaction back while
// the program, which sent its COMMIT, hears nothing: it cannot tell this
// from a commit made whose answer was lost.
func (t *QueryTap) LoseNextCommit(lost func(txn []string)) {
	t.lose.Store(&loss{match: func(q string) bool { return strings.EqualFold(strings.TrimSpace(q), "COMMIT") }, answered: lost, unsent: true})
}

// DelayNextCommit arms the tap: at the next COMMIT it cuts the program's
// connection at once, and sends the COMMIT on to the server wait later,
// as a proxy that cut a session may still deliver what it had taken in
// (HAProxy's shutdown-sessions): the program saw no answer, and the
// commit lands after it looked. landed is called with the transaction's
// statements once the server has answered the COMMIT.
func (t *QueryTap) DelayNextCommit(wait time.Duration, landed func(txn []string)) {
	t.lose.Store(&loss{match: func(q string) bool { return strings.EqualFold(strings.TrimSpace(q), "COMMIT") }, answered: landed, delay: wait})
}

// comQuery is the protocol's COM_QUERY command byte.
const comQuery = 0x03

// MustQueryTap forwards to the MySQL server at target until the test ends.
func MustQueryTap(tb testing.TB, target string) *QueryTap {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	t := &QueryTap{Addr: ln.Addr().String(), target: target}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			go t.forward(client)
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		<-done
	})
	return t
}

// Count is how many statements sent so far contain every one of parts
// (case-insensitive).
func (t *QueryTap) Count(parts ...string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, q := range t.queries {
		q = strings.ToLower(q)
		all := true
		for _, p := range parts {
			all = all && strings.Contains(q, strings.ToLower(p))
		}
		if all {
			n++
		}
	}
	return n
}

func (t *QueryTap) forward(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", t.target)
	if err != nil {
		return
	}
	defer server.Close()
	// drop is set while this connection's next answer is to be lost.
	var drop atomic.Pointer[func()]
	// txn is this connection's statements since its last COMMIT.
	var txn []string
	go func() {
		defer client.Close()
		buf := make([]byte, 32<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 {
				if answered := drop.Swap(nil); answered != nil {
					(*answered)()
					server.Close()
					return
				}
				if _, werr := client.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	r := bufio.NewReader(client)
	header := make([]byte, 4)
	for {
		if _, err := io.ReadFull(r, header); err != nil {
			return
		}
		n := int(header[0]) | int(header[1])<<8 | int(header[2])<<16
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			return
		}
		if seq := header[3]; seq == 0 && n > 0 && payload[0] == comQuery {
			t.mu.Lock()
			t.queries = append(t.queries, string(payload[1:]))
			t.mu.Unlock()
			// The client sends nothing more until it has the answer, and
			// the server nothing unasked: the next bytes back are the
			// COMMIT's answer.
			query := string(payload[1:])
			verb := strings.ToUpper(strings.TrimSpace(query))
			commit := verb == "COMMIT"
			if verb == "ROLLBACK" {
				// What a rolled-back transaction sent is not the next one's.
				txn = nil
			} else if !commit {
				txn = append(txn, query)
			}
			if l := t.lose.Load(); l != nil && l.match(query) && t.lose.CompareAndSwap(l, nil) {
				if l.unsent {
					l.answered(txn)
					server.Close()
					return
				}
				if l.delay > 0 {
					client.Close()
					committed, done := txn, make(chan struct{})
					landed := func() { l.answered(committed); close(done) }
					drop.Store(&landed)
					time.Sleep(l.delay) // the fault: the COMMIT held in the proxy
					if _, err := server.Write(append(header, payload...)); err != nil {
						return
					}
					select {
					case <-done:
					case <-time.After(10 * time.Second):
					}
					return
				}
				committed := txn
				lost := func() { l.answered(committed) }
				drop.Store(&lost)
			}
			if commit {
				txn = nil
			}
		}
		if _, err := server.Write(append(header, payload...)); err != nil {
			return
		}
	}
}

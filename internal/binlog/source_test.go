package binlog_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"log/slog"
	"regexp"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/canal"

	"github.com/seckill/seckill/internal/binlog"
	"github.com/seckill/seckill/internal/testsupport"
)

func source(t *testing.T, m *testsupport.MySQL) binlog.Source {
	var b [4]byte
	_, _ = rand.Read(b[:])
	// Every follower needs a server id no other replica of the server uses.
	id := 100000 + binary.BigEndian.Uint32(b[:])%1000000
	return binlog.Source{Addr: m.Addr, User: m.User, Password: m.Password, Flavor: m.Flavor, ServerID: id}
}

func TestCheckServerAcceptsTheTestServer(t *testing.T) {
	m := testsupport.MustEmptyMySQL(t)
	db, err := source(t, m).Open()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := binlog.CheckServer(ctx, db); err != nil {
		t.Fatalf("CheckServer: %v", err)
	}
}

type rowRecorder struct {
	canal.DummyEventHandler
	rows chan *canal.RowsEvent
}

func (r *rowRecorder) OnRow(e *canal.RowsEvent) error {
	r.rows <- e
	return nil
}

// A row inserted through database/sql reaches the canal follower as a
// RowsEvent carrying the row's values, without mysqldump.
func TestCanalSeesAnInsertedRow(t *testing.T) {
	m := testsupport.MustMySQL(t)
	follower, err := source(t, m).NewCanal(slog.New(slog.DiscardHandler), regexp.QuoteMeta(m.Database)+`\.tb_shop`)
	if err != nil {
		t.Fatal(err)
	}
	rec := &rowRecorder{rows: make(chan *canal.RowsEvent, 16)}
	follower.SetEventHandler(rec)
	pos, err := follower.GetMasterPos()
	if err != nil {
		t.Fatalf("binlog position: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- follower.RunFrom(pos) }()
	defer func() {
		follower.Close()
		<-done
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A change to another table of the same database is filtered out.
	if _, err := m.DB.ExecContext(ctx, "INSERT INTO tb_shop_type (name, icon, sort) VALUES ('filtered', '', 1)"); err != nil {
		t.Fatal(err)
	}
	res, err := m.DB.ExecContext(ctx, `INSERT INTO tb_shop (name, type_id, area, address, x, y, open_hours, score)
		VALUES ('binlog shop', 1, 'area', 'addr', 120.1, 30.2, '10:00-22:00', 45)`)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()

	select {
	case e := <-rec.rows:
		if e.Table.Schema != m.Database || e.Table.Name != "tb_shop" || e.Action != canal.InsertAction {
			t.Fatalf("event %s on %s.%s, want insert on %s.tb_shop", e.Action, e.Table.Schema, e.Table.Name, m.Database)
		}
		idCol, nameCol := e.Table.FindColumn("id"), e.Table.FindColumn("name")
		if idCol < 0 || nameCol < 0 {
			t.Fatalf("table metadata lacks id/name: %v", e.Table.Columns)
		}
		row := e.Rows[0]
		gotID, err := e.Table.GetColumnValue("id", row)
		if err != nil {
			t.Fatal(err)
		}
		if toInt64(gotID) != id || row[nameCol] != "binlog shop" {
			t.Fatalf("row = %v, want id %d name 'binlog shop'", row, id)
		}
	case err := <-done:
		t.Fatalf("follower stopped: %v", err)
	case <-ctx.Done():
		t.Fatal("no RowsEvent within 30s of the insert")
	}
}

func toInt64(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case uint64:
		return int64(n)
	case int32:
		return int64(n)
	case uint32:
		return int64(n)
	}
	return -1
}

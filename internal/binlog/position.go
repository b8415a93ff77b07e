package binlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// PositionFile keeps the binlog position the invalidator has fully handled,
// in a file written atomically (temp file and rename), at most once per
// Every unless forced. It keeps the GTID set with the file and offset when
// the follower tracks one: a file and offset name a place in one server's
// binlog, the GTID set the same place in the binlog of any server of a
// cluster that shares the GTIDs (a Galera cluster's nodes, a replica
// promoted after a failover).
type PositionFile struct {
	Path  string
	Every time.Duration

	mu      sync.Mutex
	pending *savedPosition
	saved   time.Time
}

type savedPosition struct {
	Flavor string `json:"flavor"`
	Name   string `json:"name"`
	Pos    uint32 `json:"pos"`
	GTID   string `json:"gtid,omitempty"`
	Last   string `json:"last,omitempty"`
	LastAt uint32 `json:"lastAt,omitempty"`
}

// Position is where the follower resumes: after GTID when it is set,
// else at File.
type Position struct {
	File mysql.Position
	GTID mysql.GTIDSet
	// Last is the last transaction handled, when known: what the server
	// must still have at its GTID for its history to continue the one
	// followed (see oneBefore).
	Last Transaction
}

// Transaction names one transaction of a MariaDB binlog: its GTID and its
// GTID event's time, which every node of a Galera cluster logs the same
// (the originating node's), and which a transaction that reused the GTID
// after a bootstrap that discarded commits does not have.
type Transaction struct {
	GTID string // domain-server-seqno; empty: unknown
	At   uint32 // Unix seconds
}

// Load is the saved position; ok is false when there is none.
func (f *PositionFile) Load(flavor string) (pos Position, ok bool, err error) {
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, os.ErrNotExist) {
		return pos, false, nil
	}
	if err != nil {
		return pos, false, fmt.Errorf("binlog position %s: %w", f.Path, err)
	}
	var s savedPosition
	if err := json.Unmarshal(b, &s); err != nil {
		return pos, false, fmt.Errorf("binlog position %s: %w", f.Path, err)
	}
	if s.Flavor != flavor {
		return pos, false, fmt.Errorf("binlog position %s is for %s, the server is %s: remove the file to start at the current position", f.Path, s.Flavor, flavor)
	}
	pos.File = mysql.Position{Name: s.Name, Pos: s.Pos}
	pos.Last = Transaction{GTID: s.Last, At: s.LastAt}
	if s.GTID != "" {
		if pos.GTID, err = mysql.ParseGTIDSet(flavor, s.GTID); err != nil {
			return pos, false, fmt.Errorf("binlog position %s: GTID set %q: %w", f.Path, s.GTID, err)
		}
	}
	return pos, true, nil
}

// Save records pos (handled), last its last transaction when known, and
// writes it when due or when forced.
func (f *PositionFile) Save(flavor string, pos mysql.Position, gtid mysql.GTIDSet, last Transaction, force bool) error {
	s := &savedPosition{Flavor: flavor, Name: pos.Name, Pos: pos.Pos, Last: last.GTID, LastAt: last.At}
	if gtid != nil && gtid.String() != "" {
		s.GTID = gtid.String()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending = s
	if !force && time.Since(f.saved) < f.Every {
		return nil
	}
	return f.flushLocked()
}

// Flush writes the last recorded position.
func (f *PositionFile) Flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flushLocked()
}

// Clear forgets the position: the next start begins at the server's
// current one.
func (f *PositionFile) Clear() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending = nil
	if err := os.Remove(f.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func (f *PositionFile) flushLocked() error {
	if f.pending == nil {
		return nil
	}
	b, _ := json.Marshal(f.pending)
	if err := os.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
		return fmt.Errorf("binlog position: %w", err)
	}
	// Written aside, fsynced, renamed over the old one, and the folder
	// fsynced: after a power loss the file is the old position or the new
	// one, never empty or torn.
	tmp := f.Path + ".tmp"
	if err := writeSynced(tmp, b); err != nil {
		return fmt.Errorf("binlog position: %w", err)
	}
	if err := os.Rename(tmp, f.Path); err != nil {
		return fmt.Errorf("binlog position: %w", err)
	}
	if err := syncDir(filepath.Dir(f.Path)); err != nil {
		return fmt.Errorf("binlog position: %w", err)
	}
	f.saved = time.Now()
	return nil
}

func writeSynced(path string, b []byte) error {
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = file.Write(b)
	if err == nil {
		err = file.Sync()
	}
	return errors.Join(err, file.Close())
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

package binlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-mysql-org/go-mysql/canal"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/redisconn"
	"github.com/seckill/seckill/internal/telemetry"
)

// Invalidator follows the binlog of Database's mapped tables and deletes
// the cache keys of every changed row. A delete that fails is handed to the
// retry topic; the handler never returns an error to canal for it, which
// would stop the sync. It also adds every inserted shop to the filter of
// shop ids; an add that fails stops the sync before the row's position is
// saved, and the restart adds it again (a shop insert is rare, and an id
// missing from the filter would answer "not found" for a real shop).
type Invalidator struct {
	Source        Source
	Database      string
	Mapping       map[string]KeyFunc
	Families      []string // key patterns flushed after a purged position
	Redis         redis.UniversalClient
	Retry         *broker.Forwarder // failed deletes, to the retry topic
	Positions     *PositionFile
	DeleteTimeout time.Duration
	Logger        *slog.Logger
	Metrics       *Metrics
	// Shops is the filter of shop ids; nil when none is kept.
	Shops ShopFilter
}

// ShopFilter records the id of a new shop.
type ShopFilter interface {
	Add(ctx context.Context, id int64) error
}

// Metrics are the invalidator's and the retrier's counters.
type Metrics struct {
	lag                                                  prometheus.Histogram
	deletes, failures, retries, deadLets, purges, forked prometheus.Counter
	following                                            prometheus.Gauge
}

// NewMetrics registers the invalidation metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := &Metrics{
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "seckill_binlog_lag_seconds",
			Help: "From the binlog event's time (whole seconds) to the key's delete.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 12)}),
		deletes:  c("seckill_cache_invalidations_total", "Cache keys deleted after a row change."),
		failures: c("seckill_cache_invalidation_failures_total", "Cache key deletes that failed and went to the retry topic."),
		retries:  c("seckill_cache_invalidation_retries_total", "Retried cache key deletes."),
		deadLets: c("seckill_cache_invalidation_dead_letters_total", "Cache keys given up after the last retry."),
		purges: c("seckill_binlog_positions_purged_total",
			"Saved binlog positions the server no longer had: the cached families flushed, the follower continued from the current position."),
		forked: c("seckill_binlog_histories_forked_total",
			"Servers whose binlog had another transaction at the saved position's GTID (a bootstrap that discarded commits, then reused their GTIDs): the cached families flushed, the follower continued from the current position."),
		following: prometheus.NewGauge(prometheus.GaugeOpts{Name: "seckill_binlog_following",
			Help: "1 while the follower is connected and reading the binlog, 0 while it is stopped or reconnecting."}),
	}
	reg.MustRegister(m.lag, m.deletes, m.failures, m.retries, m.deadLets, m.purges, m.forked, m.following)
	return m
}

// errPurged is the server's "position no longer in the binlog" (1236).
const errPurged = 1236

// purgedAnswers is how many purged answers in a row make a position
// purged.
const purgedAnswers = 3

// purged reports whether err is the server saying the position asked for
// is no longer in its binlog: by the server error's code, which go-mysql's
// traced errors unwrap to, never by the text (a port or a position may
// contain 1236).
func purged(err error) bool {
	var me *mysql.MyError
	return errors.As(err, &me) && me.Code == errPurged
}

// Run follows the binlog until ctx ends: from the saved position, or the
// server's current one on a first start. It restarts the follower with
// backoff after errors (a MySQL restart). After a purged position it
// saves the server's current position first, then flushes the key
// families, and follows on from the position saved: a row changed during
// the flush is in the binlog after it, so a reader that filled the cache
// from the old row has its key deleted again.
//
// A position is taken for purged only when the server says so
// purgedAnswers times in a row: right after a failover, the Galera node
// that takes over may have certified the last transactions the follower
// saw and not yet written them to its binlog, and asking for a GTID it
// has not written yet is answered as asking for one it no longer has.
func (inv *Invalidator) Run(ctx context.Context) error {
	policy := backoff.NewExponentialBackOff(backoff.WithMaxElapsedTime(0), backoff.WithMaxInterval(10*time.Second))
	purges := 0
	for {
		err := inv.follow(ctx)
		inv.Metrics.following.Set(0)
		if ctx.Err() != nil {
			return inv.Positions.Flush()
		}
		var fork *errForked
		forked := errors.As(err, &fork)
		if purged(err) {
			purges++
		} else {
			purges = 0
		}
		if forked || purges >= purgedAnswers {
			purges = 0
			if forked {
				inv.Metrics.forked.Inc()
				inv.Logger.Error("the server's binlog is not a continuation of the one followed (a bootstrap that discarded commits reused their GTIDs); flushing the cached families and continuing from the current position",
					"saved", fork.saved.GTID, "saved_at", fork.saved.At, "server", fork.found.GTID, "server_at", fork.found.At)
			} else {
				inv.Metrics.purges.Inc()
				inv.Logger.Error("the saved binlog position is no longer on the server; flushing the cached families and continuing from the current position", "err", firstLine(err))
			}
			cur, cerr := inv.currentPosition()
			if cerr == nil {
				cerr = inv.Positions.Save(inv.Source.Flavor, cur.File, cur.GTID, Transaction{}, true)
			}
			if cerr == nil {
				if ferr := inv.flushFamilies(ctx); ferr != nil {
					inv.Logger.Error("flushing the cached families failed", "err", ferr)
				}
				continue
			}
			// Not flushed: the position to follow on from is unknown yet,
			// and the next purged answers try again.
			err = cerr
		}
		wait := policy.NextBackOff()
		inv.Logger.Warn("binlog follower stopped; restarting", "addr", inv.Source.Addr, "err", firstLine(err), "retry_in", wait, "purged_answers", purges)
		select {
		case <-ctx.Done():
			return inv.Positions.Flush()
		case <-time.After(wait):
		}
	}
}

func (inv *Invalidator) follow(ctx context.Context) error {
	var tables []string
	for _, t := range Tables(inv.Mapping) {
		tables = append(tables, regexp.QuoteMeta(inv.Database)+`\.`+regexp.QuoteMeta(t))
	}
	c, err := inv.Source.NewCanal(inv.Logger.With("component", "canal"), tables...)
	if err != nil {
		return err
	}
	defer c.Close()
	pos, err := inv.startAt(c)
	if err != nil {
		return err
	}
	h := &handler{inv: inv, ctx: ctx}
	c.SetEventHandler(h)
	stop := context.AfterFunc(ctx, c.Close)
	defer stop()
	if pos.GTID != nil {
		from := pos.GTID
		if before, ok := oneBefore(pos); ok {
			from, h.check, h.resumed = before, &pos.Last, pos
		}
		return c.StartFromGTID(from)
	}
	return c.RunFrom(pos.File)
}

// errForked is a server whose binlog has another transaction, or none,
// where the saved position's last one was.
type errForked struct{ saved, found Transaction }

func (e *errForked) Error() string {
	return fmt.Sprintf("the server's binlog has %s at %d where the follower saw %s at %d: another history", e.found.GTID, e.found.At, e.saved.GTID, e.saved.At)
}

// oneBefore is pos's GTID set moved back by its last transaction, from
// which the follower resumes to see that transaction again (its deletes
// are made again, which changes nothing) and check that the server still
// has it: after a Galera bootstrap that discarded commits, the cluster
// hands their GTIDs to new transactions, and a follower that resumed
// after the saved GTID would skip every transaction the new history made
// up to it, without an error (a GTID the server does not have yet is
// answered 1236, the purged path). ok is false when pos does not name its
// last transaction as the newest of its domain in the set (a position
// saved before the check existed, or by the purged path), or on MySQL.
func oneBefore(pos Position) (mysql.GTIDSet, bool) {
	set, isMariaDB := pos.GTID.(*mysql.MariadbGTIDSet)
	if !isMariaDB || pos.Last.GTID == "" {
		return nil, false
	}
	last, err := mysql.ParseMariadbGTID(pos.Last.GTID)
	if err != nil || last.SequenceNumber < 2 {
		return nil, false
	}
	if cur := set.Sets[last.DomainID][last.ServerID]; cur == nil || *cur != *last {
		return nil, false
	}
	before := set.Clone().(*mysql.MariadbGTIDSet)
	before.Sets[last.DomainID][last.ServerID].SequenceNumber--
	return before, true
}

// startAt is where the follower starts: the saved position, or the
// server's current one on a first start; by GTID set whenever the server
// has one, so that the next start can be on another server of the cluster.
// A position saved as a file and offset alone (a MySQL without GTIDs, or
// an older invalidator) is resumed as it is: the server that wrote it is
// the only one where it means the place it meant, and turning it into a
// GTID set on the server reached (MariaDB's BINLOG_GTID_POS) would give a
// wrong set without an error where another node's binlog files have the
// same names.
func (inv *Invalidator) startAt(c *canal.Canal) (Position, error) {
	pos, ok, err := inv.Positions.Load(inv.Source.Flavor)
	if err != nil {
		return pos, err
	}
	switch {
	case ok && pos.GTID != nil:
	case ok:
		inv.Logger.Warn("the saved binlog position has no GTID set: resuming it by file and offset, which name a place in this server's binlog only (after a failover they name another place); remove the position file to start by GTID set at the server's current position",
			"file", pos.File.Name, "pos", pos.File.Pos, "path", inv.Positions.Path)
	default:
		if pos, err = current(c); err != nil {
			return pos, err
		}
	}
	verb := "resuming the binlog"
	if !ok {
		verb = "no saved binlog position: starting at the server's current one"
	}
	if pos.GTID != nil {
		inv.Logger.Info(verb, "gtid", pos.GTID.String(), "server", inv.Source.Addr)
	} else {
		inv.Logger.Info(verb, "file", pos.File.Name, "pos", pos.File.Pos, "server", inv.Source.Addr)
	}
	return pos, nil
}

// current is the server's current position, by GTID set whenever it
// keeps one.
func current(c *canal.Canal) (Position, error) {
	var pos Position
	set, err := c.GetMasterGTIDSet()
	if err != nil {
		return pos, fmt.Errorf("current binlog GTID set: %w", err)
	}
	if set.String() != "" {
		pos.GTID = set
		return pos, nil
	}
	if pos.File, err = c.GetMasterPos(); err != nil {
		return pos, fmt.Errorf("current binlog position: %w", err)
	}
	return pos, nil
}

// currentPosition asks the server its current position on a connection
// of its own.
func (inv *Invalidator) currentPosition() (Position, error) {
	c, err := inv.Source.NewCanal(inv.Logger.With("component", "canal"))
	if err != nil {
		return Position{}, err
	}
	defer c.Close()
	return current(c)
}

// firstLine drops the stack trace go-mysql appends to its errors.
func firstLine(err error) string {
	if err == nil {
		return ""
	}
	line, _, _ := strings.Cut(err.Error(), "\n")
	return line
}

// flushFamilies deletes every key of the mapped families, on every master:
// after a purged position the changes in between are unknown.
func (inv *Invalidator) flushFamilies(ctx context.Context) error {
	for _, pattern := range inv.Families {
		err := redisconn.Scan(ctx, inv.Redis, pattern, func(ctx context.Context, key string) error {
			return inv.Redis.Del(ctx, key).Err()
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// invalidate deletes key, or hands it to the retry topic; false only when
// ctx ended first. logPos is where the row's change ends in the binlog,
// the retry message's "offset".
func (inv *Invalidator) invalidate(ctx context.Context, key string, changed time.Time, logPos uint32) bool {
	dctx, cancel := context.WithTimeout(ctx, inv.DeleteTimeout)
	err := inv.Redis.Del(dctx, key).Err()
	cancel()
	if err == nil {
		inv.Metrics.deletes.Inc()
		inv.Metrics.lag.Observe(time.Since(changed).Seconds())
		return true
	}
	inv.Metrics.failures.Inc()
	// The retry topic holds the binlog until Kafka takes the key: the
	// position does not move past a key neither deleted nor queued.
	m := kafka.Message{Key: []byte(key), Value: []byte(key), Topic: BinlogSource, Partition: -1, Offset: int64(logPos)}
	broker.InjectTrace(ctx, &m)
	if err := inv.Retry.Forward(ctx, m, 1, err); err != nil {
		inv.Logger.Error("cannot queue a failed cache delete", "key", key, "err", err)
		return false
	}
	return true
}

// BinlogSource is the source "topic" of a retry message that came straight
// from the binlog; its offset is the binlog position after the change.
const BinlogSource = "binlog"

// retryDelay is the wait before attempt n: 200 ms doubling, capped at 10 s.
func retryDelay(attempt int) time.Duration {
	d := 200 * time.Millisecond << min(attempt-1, 10)
	return min(d, 10*time.Second)
}

type handler struct {
	canal.DummyEventHandler
	inv *Invalidator
	ctx context.Context
	// writer is the span of the statement whose rows come next, from the
	// traceparent comment of its Rows_query event; invalid when none.
	writer trace.SpanContext
	// mu guards what canal's reading goroutine writes and its Close reads
	// too (Close saves the position).
	mu sync.Mutex
	// current is the transaction under way, or the last one read; done
	// is the last one the saved set holds as its domain's newest, the one
	// a position names (a transaction half read when Close saves is not).
	current, done Transaction
	// check is the saved position's last transaction while the server has
	// yet to show it again (oneBefore); nil once it has, or when not
	// asked. Until then the position saved is the one resumed (resumed),
	// not canal's, which is one transaction back and names no last one:
	// a stop before the check would lose it for good.
	check   *Transaction
	resumed Position
}

// holds reports whether set has t as its domain's newest from t's server.
func holds(set mysql.GTIDSet, t Transaction) bool {
	s, ok := set.(*mysql.MariadbGTIDSet)
	if !ok || t.GTID == "" {
		return false
	}
	g, err := mysql.ParseMariadbGTID(t.GTID)
	if err != nil {
		return false
	}
	cur := s.Sets[g.DomainID][g.ServerID]
	return cur != nil && *cur == *g
}

// OnGTID starts a transaction; the first of the checked domain after a
// resume must be the saved position's last one.
func (h *handler) OnGTID(header *replication.EventHeader, e mysql.BinlogGTIDEvent) error {
	g, ok := e.(*replication.MariadbGTIDEvent)
	if !ok {
		return nil
	}
	gtid := mysql.MariadbGTID{DomainID: g.GTID.DomainID, ServerID: header.ServerID, SequenceNumber: g.GTID.SequenceNumber}
	this := Transaction{GTID: gtid.String(), At: header.Timestamp}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.current = this
	if h.check == nil {
		return nil
	}
	want, err := mysql.ParseMariadbGTID(h.check.GTID)
	if err != nil || want.DomainID != gtid.DomainID {
		return nil
	}
	if this != *h.check {
		return &errForked{saved: *h.check, found: this}
	}
	h.check = nil
	return nil
}

// OnRow never fails for a failed delete (that goes to the retry topic).
// It fails only on shutdown with a key neither deleted nor queued, so that
// canal stops before the transaction's position is saved and the next
// start handles the row again.
//
// The invalidations of a rows event are a span of a trace of their own,
// linked to the statement that changed the rows when its traceparent is
// known.
func (h *handler) OnRow(e *canal.RowsEvent) error {
	changed := time.Unix(int64(e.Header.Timestamp), 0)
	var span trace.Span
	for _, c := range Changes(e) {
		if err := h.addShop(c); err != nil {
			return err
		}
		keys := KeysOf(h.inv.Mapping, c)
		if len(keys) == 0 {
			continue
		}
		ctx := h.ctx
		if span == nil {
			var links []trace.Link
			if h.writer.IsValid() {
				links = []trace.Link{{SpanContext: h.writer}}
			}
			ctx, span = tracer.Start(h.ctx, "invalidate "+e.Table.Name, trace.WithSpanKind(trace.SpanKindConsumer),
				trace.WithNewRoot(), trace.WithLinks(links...), trace.WithAttributes(
					attribute.String("db.collection.name", e.Table.Name), attribute.String("seckill.binlog.action", e.Action),
					attribute.Int64("seckill.binlog.position", int64(e.Header.LogPos))))
			defer span.End()
		} else {
			ctx = trace.ContextWithSpan(h.ctx, span)
		}
		for _, key := range keys {
			if !h.inv.invalidate(ctx, key, changed, e.Header.LogPos) {
				return fmt.Errorf("shutting down with %s neither deleted nor queued: %w", key, h.ctx.Err())
			}
		}
	}
	return nil
}

var tracer = otel.Tracer("github.com/seckill/seckill/internal/binlog")

// OnRowsQueryEvent reads the statement of the rows that follow (MySQL with
// binlog_rows_query_log_events=ON) for the traceparent comment the
// programs' SQL carries while traced. MariaDB's equivalent, the
// Annotate_rows event, does not reach here: go-mysql's canal (v1.13)
// passes only MySQL's Rows_query events to its handler.
func (h *handler) OnRowsQueryEvent(e *replication.RowsQueryEvent) error {
	h.writer = TraceInQuery(string(e.Query))
	return nil
}

// OnXID ends a transaction: the next statement says its own trace.
func (h *handler) OnXID(*replication.EventHeader, mysql.Position) error {
	h.writer = trace.SpanContext{}
	return nil
}

// traceComment finds the W3C traceparent of an sqlcommenter comment
// (/*traceparent='00-<trace id>-<span id>-<flags>'*/).
var traceComment = regexp.MustCompile(`traceparent='([0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2})'`)

// TraceInQuery is the span a statement's traceparent comment names;
// invalid when it has none.
func TraceInQuery(query string) trace.SpanContext {
	m := traceComment.FindStringSubmatch(query)
	if m == nil {
		return trace.SpanContext{}
	}
	l, ok := telemetry.LinkTo(m[1])
	if !ok {
		return trace.SpanContext{}
	}
	return l.SpanContext
}

// addShop puts an inserted shop into the filter of shop ids.
func (h *handler) addShop(c Change) error {
	if h.inv.Shops == nil || c.Table != "tb_shop" || c.Before != nil {
		return nil
	}
	id, ok := rowID(c.After["id"])
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(h.ctx, h.inv.DeleteTimeout)
	defer cancel()
	if err := h.inv.Shops.Add(ctx, id); err != nil {
		return fmt.Errorf("add shop %d to the shop filter: %w", id, err)
	}
	return nil
}

// OnRotate sees the rotate event the server sends first on every
// connection: from then on the follower is reading.
func (h *handler) OnRotate(_ *replication.EventHeader, _ *replication.RotateEvent) error {
	h.inv.Metrics.following.Set(1)
	return nil
}

func (h *handler) OnPosSynced(_ *replication.EventHeader, pos mysql.Position, set mysql.GTIDSet, force bool) error {
	h.inv.Metrics.following.Set(1)
	h.mu.Lock()
	last := Transaction{}
	if h.check != nil {
		pos, set, last = h.resumed.File, h.resumed.GTID, h.resumed.Last
	} else {
		if holds(set, h.current) {
			h.done = h.current
		}
		if holds(set, h.done) {
			last = h.done
		}
	}
	h.mu.Unlock()
	if err := h.inv.Positions.Save(h.inv.Source.Flavor, pos, set, last, force); err != nil {
		h.inv.Logger.Error("saving the binlog position failed", "err", err)
	}
	return nil
}

func (h *handler) OnDDL(_ *replication.EventHeader, pos mysql.Position, q *replication.QueryEvent) error {
	h.inv.Logger.Info("DDL on a followed database", "schema", string(q.Schema), "query", string(q.Query))
	return nil
}

func (h *handler) String() string { return "cache-invalidator" }

package telemetry_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/internal/binlog"
	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/mysqldb"
	"github.com/seckill/seckill/internal/schema"
	"github.com/seckill/seckill/internal/shop"
	"github.com/seckill/seckill/internal/testsupport"
)

// TestInvalidationIsASpan: the binlog follower's invalidation of a changed
// row is a span of its own, its Redis DEL inside. On MySQL (with
// binlog_rows_query_log_events) it links to the traced statement that
// changed the row, through the statement's traceparent comment; MariaDB's
// Annotate_rows events do not reach go-mysql's canal handler, so there the
// span stands alone.
func TestInvalidationIsASpan(t *testing.T) {
	m, r, k := testsupport.MustMySQL(t), testsupport.MustRedis(t), testsupport.MustKafka(t)
	if err := schema.Seed(t.Context(), m.DB); err != nil {
		t.Fatal(err)
	}
	db, err := mysqldb.Open(m.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	retry := broker.NewWriter(k.Brokers, k.MustTopic(t, 1))
	t.Cleanup(func() { _ = retry.Close() })
	var id [4]byte
	_, _ = rand.Read(id[:])
	keys := shop.Keys{Prefix: r.Prefix}
	inv := &binlog.Invalidator{
		Source: binlog.Source{Addr: m.Addr, User: m.User, Password: m.Password, Flavor: m.Flavor,
			ServerID: 100000 + binary.BigEndian.Uint32(id[:])%1000000},
		Database: m.Database, Mapping: binlog.Mapping(keys), Families: keys.Patterns(), Redis: r.Client,
		Retry:         &broker.Forwarder{Writer: retry},
		Positions:     &binlog.PositionFile{Path: filepath.Join(t.TempDir(), "position.json"), Every: 100 * time.Millisecond},
		DeleteTimeout: time.Second, Logger: slog.New(slog.DiscardHandler), Metrics: binlog.NewMetrics(prometheus.NewRegistry()),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- inv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("invalidator: %v", err)
		}
	})

	// A traced request changes shop 1 until the follower has deleted its
	// cached entry (the first changes may come before it follows).
	key := r.Key("cache:shop:{1}")
	var request trace.SpanContext
	testsupport.Wait(t, 15*time.Second, "the follower deleting the changed shop's entry", func() bool {
		r.Client.Set(t.Context(), key, "stale", 0)
		rctx, span := otel.Tracer("test").Start(t.Context(), "PUT /shop", trace.WithSpanKind(trace.SpanKindServer))
		if _, err := db.ExecContext(rctx, "UPDATE tb_shop SET sold = sold + 1 WHERE id = 1"); err != nil {
			t.Fatal(err)
		}
		span.End()
		request = span.SpanContext()
		return gone(t, r, key, time.Second)
	})

	var invalidation tracetest.SpanStub
	found := testsupport.Poll(5*time.Second, func() bool {
		found := false
		for _, s := range spans.GetSpans() {
			if s.Name == "invalidate tb_shop" && s.StartTime.After(time.Now().Add(-time.Minute)) && findDel(s) {
				invalidation, found = s, true
			}
		}
		return found
	})
	if !found {
		t.Fatal("no invalidate tb_shop span with its DEL inside")
	}
	if invalidation.SpanKind != trace.SpanKindConsumer || invalidation.Parent.IsValid() {
		t.Errorf("invalidation span: kind %v parent %v, want a consumer span of a trace of its own", invalidation.SpanKind, invalidation.Parent)
	}
	linked := len(invalidation.Links) == 1 && invalidation.Links[0].SpanContext.TraceID() == request.TraceID()
	switch m.Flavor {
	case "mysql":
		if !linked {
			t.Errorf("on MySQL the invalidation links to the statement's request %s; links: %v", request.TraceID(), invalidation.Links)
		}
	default:
		if len(invalidation.Links) != 0 {
			t.Errorf("on %s the invalidation links to %v: where from?", m.Flavor, invalidation.Links)
		}
	}
}

// findDel reports whether a DEL span ran inside s.
func findDel(s tracetest.SpanStub) bool {
	for _, c := range inTrace(s.SpanContext.TraceID()) {
		if c.Name == "del" && c.Parent.SpanID() == s.SpanContext.SpanID() {
			return true
		}
	}
	return false
}

// gone waits up to d for key to be deleted.
func gone(t *testing.T, r *testsupport.Redis, key string, d time.Duration) bool {
	return testsupport.Poll(d, func() bool {
		n, err := r.Client.Exists(t.Context(), key).Result()
		return err == nil && n == 0
	})
}

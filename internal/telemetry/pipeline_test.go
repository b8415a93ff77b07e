package telemetry_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/telemetry"
	"github.com/seckill/seckill/internal/testsupport"
)

// spans is every span the programs of this test process end: the SDK's
// in-memory exporter, behind a provider that samples everything.
var spans = tracetest.NewInMemoryExporter()

func TestMain(m *testing.M) {
	telemetry.Install(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans), sdktrace.WithSampler(sdktrace.AlwaysSample())))
	os.Exit(m.Run())
}

// sale is an api and an order-writer on one orders topic, Redis prefix
// and MySQL database of the test's own, as the programs run them.
type sale struct {
	api     string
	store   *saletest.Sales
	mysql   *testsupport.MySQL
	topic   string
	codes   *codes
	voucher int64
}

type codes struct {
	mu   sync.Mutex
	last map[string]string
}

func (c *codes) SendCode(_ context.Context, phone, code string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last[phone] = code
	return nil
}

func startSale(t *testing.T, apiEnv, writerEnv map[string]string) *sale {
	t.Helper()
	r, m, k := testsupport.MustRedis(t), testsupport.MustMySQL(t), testsupport.MustKafka(t)
	s := &sale{store: saletest.New(r.Client, r.Prefix), mysql: m, topic: k.MustTopic(t, 3),
		codes: &codes{last: map[string]string{}}, voucher: 7}
	common := map[string]string{
		"SECKILL_MYSQL_DSN": m.DSN, "SECKILL_KAFKA_BROKERS": strings.Join(k.Brokers, ","),
		"SECKILL_KEY_PREFIX": r.Prefix, "SECKILL_ORDERS_TOPIC": s.topic, "SECKILL_ADMIN_ADDR": "127.0.0.1:0",
	}
	maps.Copy(common, r.Env())
	lookup := func(vars map[string]string) config.Lookup {
		return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	}

	apiVars := maps.Clone(common)
	maps.Copy(apiVars, map[string]string{"SECKILL_API_ADDR": "127.0.0.1:0", "SECKILL_RATE_PREFIX": r.Key("rate:"), "SECKILL_ID_BLOCK": "100"})
	maps.Copy(apiVars, apiEnv)
	apiCfg, err := config.LoadAPI(lookup(apiVars))
	if err != nil {
		t.Fatal(err)
	}
	api := app.NewAPI(apiCfg, io.Discard)
	api.CodeSender = s.codes
	if err := api.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Close() })
	testsupport.Eventually(t, "http://"+api.AdminAddr()+"/readyz", http.StatusOK, 20*time.Second)
	s.api = "http://" + api.Addr()

	// The sale is in both stores before the writer starts: its first sale
	// check, finding the voucher in MySQL and not yet in Redis, would
	// reconcile it and pause the sale under the test's order.
	m.MustSeedVoucher(t, s.voucher, 10)
	if err := s.store.Gate.Warm(t.Context(), s.voucher, 10, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	writerVars := maps.Clone(common)
	maps.Copy(writerVars, map[string]string{"SECKILL_ORDERS_DLQ_TOPIC": k.MustTopic(t, 1), "SECKILL_ORDER_GROUP": testsupport.Group(t),
		"SECKILL_RELAY_INTERVAL": "1h"})
	maps.Copy(writerVars, writerEnv)
	writerCfg, err := config.LoadOrderWriter(lookup(writerVars))
	if err != nil {
		t.Fatal(err)
	}
	writer := app.NewOrderWriter(writerCfg, io.Discard)
	if err := writer.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = writer.Close() })

	return s
}

// post sends a request with headers and returns the Result's data.
func post(t *testing.T, url string, header map[string]string, body string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		Success  bool   `json:"success"`
		ErrorMsg string `json:"errorMsg"`
		Data     string `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != http.StatusOK || !out.Success {
		t.Fatalf("POST %s: %d %+v %v", url, res.StatusCode, out, err)
	}
	return out.Data
}

func (s *sale) login(t *testing.T, phone string) string {
	t.Helper()
	post(t, s.api+"/user/code?phone="+phone, nil, "")
	s.codes.mu.Lock()
	code := s.codes.last[phone]
	s.codes.mu.Unlock()
	return post(t, s.api+"/user/login", nil, fmt.Sprintf(`{"phone":%q,"code":%q}`, phone, code))
}

// waitOrder waits for orderID's row in MySQL.
func (s *sale) waitOrder(t *testing.T, orderID string) {
	t.Helper()
	testsupport.Wait(t, 30*time.Second, "order "+orderID+" in MySQL", func() bool {
		var n int
		if err := s.mysql.DB.QueryRow("SELECT COUNT(*) FROM tb_voucher_order WHERE id = ?", orderID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
}

// ended are the spans ended so far whose trace is id, or that link to a
// span of it.
func ended(id trace.TraceID) (own, linked []tracetest.SpanStub) {
	for _, s := range spans.GetSpans() {
		if s.SpanContext.TraceID() == id {
			own = append(own, s)
			continue
		}
		for _, l := range s.Links {
			if l.SpanContext.TraceID() == id {
				linked = append(linked, s)
				break
			}
		}
	}
	return own, linked
}

// inTrace are the spans ended so far of trace id.
func inTrace(id trace.TraceID) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans.GetSpans() {
		if s.SpanContext.TraceID() == id {
			out = append(out, s)
		}
	}
	return out
}

func find(stubs []tracetest.SpanStub, match func(tracetest.SpanStub) bool) (tracetest.SpanStub, bool) {
	i := slices.IndexFunc(stubs, match)
	if i < 0 {
		return tracetest.SpanStub{}, false
	}
	return stubs[i], true
}

func named(name string) func(tracetest.SpanStub) bool {
	return func(s tracetest.SpanStub) bool { return s.Name == name }
}

func attr(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.Emit()
		}
	}
	return ""
}

func names(stubs []tracetest.SpanStub) []string {
	out := make([]string, len(stubs))
	for i, s := range stubs {
		out[i] = s.Name
	}
	return out
}

// childOf checks that child's parent is parent.
func childOf(t *testing.T, child, parent tracetest.SpanStub) {
	t.Helper()
	if child.Parent.SpanID() != parent.SpanContext.SpanID() {
		t.Errorf("span %q: parent %s, want %q (%s)", child.Name, child.Parent.SpanID(), parent.Name, parent.SpanContext.SpanID())
	}
}

// insertOf is the span of the statement that inserts the order rows.
func insertOf(s tracetest.SpanStub) bool {
	return strings.Contains(attr(s, "db.query.text")+attr(s, "db.statement"), "INSERT INTO tb_voucher_order ")
}

// TestOneOrderIsOneTrace: a flash-sale order arriving with a client's
// traceparent is one trace: the HTTP request, the gate and its EVALSHA,
// the Kafka publish; the order-writer's batch is a trace of its own linked
// to it, with the INSERT of the order inside. The gate's EVALSHA is
// redisotel's span when the API sends it alone; auto-pipelined, the gate's
// own span stands for it.
func TestOneOrderIsOneTrace(t *testing.T) {
	for _, autopipeline := range []bool{false, true} {
		t.Run(fmt.Sprintf("autopipeline=%v", autopipeline), func(t *testing.T) {
			oneOrderIsOneTrace(t, autopipeline)
		})
	}
}

func oneOrderIsOneTrace(t *testing.T, autopipeline bool) {
	// The test is the API's trusted proxy: its traceparent is continued.
	s := startSale(t, map[string]string{"SECKILL_REDIS_AUTOPIPELINE": fmt.Sprint(autopipeline), "SECKILL_API_TRUSTED_PROXIES": "127.0.0.1/32"}, nil)
	token := s.login(t, "13800000001")

	var traceID trace.TraceID
	if _, err := rand.Read(traceID[:]); err != nil {
		t.Fatal(err)
	}
	parent := fmt.Sprintf("00-%s-%s-01", traceID, "00f067aa0ba902b7")
	orderID := post(t, fmt.Sprintf("%s/voucher-order/seckill/%d", s.api, s.voucher),
		map[string]string{"authorization": token, "traceparent": parent}, "")
	s.waitOrder(t, orderID)

	var own, linked []tracetest.SpanStub
	// The batch span ends once Redis has the reservation confirmed, just
	// after MySQL's commit. The checks below say what is missing.
	testsupport.Poll(10*time.Second, func() bool {
		own, linked = ended(traceID)
		_, ok := find(linked, named("process "+s.topic))
		return ok
	})

	server, ok := find(own, named("POST /voucher-order/seckill/:id"))
	if !ok {
		t.Fatalf("no server span of the order's route in its trace; spans of the trace: %v", names(own))
	}
	if server.SpanKind != trace.SpanKindServer || server.Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("server span: kind %v, parent %s: want a server span continuing the client's traceparent", server.SpanKind, server.Parent.SpanID())
	}
	if got := attr(server, "http.route"); got != "/voucher-order/seckill/:id" {
		t.Errorf("server span http.route %q", got)
	}
	gateSpan, ok := find(own, named("seckill gate"))
	if !ok {
		t.Fatalf("no gate span in the order's trace: %v", names(own))
	}
	childOf(t, gateSpan, server)
	if got := attr(gateSpan, "seckill.outcome"); got != "accepted" {
		t.Errorf("gate span outcome %q, want accepted", got)
	}
	if got := attr(gateSpan, "db.operation.name"); got != "EVALSHA" {
		t.Errorf("gate span db.operation.name %q, want EVALSHA", got)
	}
	// The session check and the rate limiter run scripts too: the gate's
	// is the one inside its span. Auto-pipelined on one node, the command
	// goes out in a batch of many requests' commands, and the gate's span
	// stands for it; on a Redis Cluster the full-duplex autopipeliner runs
	// each command through the node client's hooks, so redisotel's span is
	// there too. The gate's span says which way the command went.
	_, sent := find(own, func(s tracetest.SpanStub) bool {
		return s.Name == "evalsha" && s.Parent.SpanID() == gateSpan.SpanContext.SpanID()
	})
	pipelined := attr(gateSpan, "seckill.autopipelined") == "true"
	if pipelined != autopipeline {
		t.Errorf("gate span says auto-pipelined %v with SECKILL_REDIS_AUTOPIPELINE=%v", pipelined, autopipeline)
	}
	if want := !pipelined || len(testsupport.RedisCluster()) > 0; sent != want {
		t.Errorf("redisotel's EVALSHA span inside the gate's span: %v, want %v (auto-pipelined: %v, on a cluster: %v); spans of the trace: %v",
			sent, want, pipelined, len(testsupport.RedisCluster()) > 0, names(own))
	}
	publish, ok := find(own, named("send "+s.topic))
	if !ok {
		t.Fatalf("no publish span in the order's trace: %v", names(own))
	}
	childOf(t, publish, server)
	if publish.SpanKind != trace.SpanKindProducer {
		t.Errorf("publish span kind %v", publish.SpanKind)
	}

	batch, ok := find(linked, named("process "+s.topic))
	if !ok {
		t.Fatalf("no order-writer batch span links to the order's trace; spans linking to it: %v", names(linked))
	}
	if batch.SpanContext.TraceID() == traceID || batch.Parent.IsValid() {
		t.Errorf("batch span: a root of a trace of its own wanted, got trace %s parent %v", batch.SpanContext.TraceID(), batch.Parent)
	}
	link := batch.Links[slices.IndexFunc(batch.Links, func(l sdktrace.Link) bool { return l.SpanContext.TraceID() == traceID })]
	if link.SpanContext.SpanID() != publish.SpanContext.SpanID() {
		t.Errorf("batch span links to span %s of the order's trace, want the publish span %s", link.SpanContext.SpanID(), publish.SpanContext.SpanID())
	}
	batchTrace := inTrace(batch.SpanContext.TraceID())
	insert, ok := find(batchTrace, insertOf)
	if !ok {
		t.Fatalf("no INSERT INTO tb_voucher_order span in the batch's trace: %v", names(batchTrace))
	}
	if insert.SpanKind != trace.SpanKindClient || !insert.Parent.IsValid() {
		t.Errorf("INSERT span kind %v parent %v: want a client span inside the batch", insert.SpanKind, insert.Parent)
	}
}

// TestAStrangersTraceIsLinkedNotContinued: a traceparent from a client
// that is no trusted proxy does not decide the API's trace: the request
// starts one of its own, linked to the client's span.
func TestAStrangersTraceIsLinkedNotContinued(t *testing.T) {
	s := startSale(t, nil, nil)
	token := s.login(t, "13800000002")
	var traceID trace.TraceID
	if _, err := rand.Read(traceID[:]); err != nil {
		t.Fatal(err)
	}
	parent := fmt.Sprintf("00-%s-%s-01", traceID, "00f067aa0ba902b7")
	post(t, fmt.Sprintf("%s/voucher-order/seckill/%d", s.api, s.voucher), map[string]string{"authorization": token, "traceparent": parent}, "")

	var linked []tracetest.SpanStub
	testsupport.Poll(5*time.Second, func() bool {
		var own []tracetest.SpanStub
		if own, linked = ended(traceID); len(own) > 0 {
			t.Fatalf("the API continued a stranger's trace: %v", names(own))
		}
		_, ok := find(linked, named("POST /voucher-order/seckill/:id"))
		return ok
	})
	server, ok := find(linked, named("POST /voucher-order/seckill/:id"))
	if !ok {
		t.Fatalf("no server span links to the client's span; spans linking to its trace: %v", names(linked))
	}
	if server.Parent.IsValid() || server.Links[0].SpanContext.SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("server span: parent %v, links %v: want a root linked to the client's span", server.Parent, server.Links)
	}
}

// TestRelayedOrderKeepsItsLink: an order the gate took whose event never
// reached Kafka (the API died between the two) is republished by the
// relay; the relay's span and the writer's batch both link back to the
// request that took it.
func TestRelayedOrderKeepsItsLink(t *testing.T) {
	s := startSale(t, nil, map[string]string{"SECKILL_RELAY_INTERVAL": "200ms", "SECKILL_RELAY_AGE": "300ms"})

	ctx, request := otel.Tracer("test").Start(t.Context(), "POST /voucher-order/seckill/:id", trace.WithSpanKind(trace.SpanKindServer))
	const orderID = 900001
	d, err := s.store.Gate.Try(ctx, s.voucher, 42, orderID)
	request.End()
	if err != nil || d.Err != nil {
		t.Fatalf("gate: %v %v", err, d.Err)
	}
	traceID := request.SpanContext().TraceID()
	s.waitOrder(t, fmt.Sprint(orderID))

	var linked []tracetest.SpanStub
	testsupport.Poll(10*time.Second, func() bool {
		_, linked = ended(traceID)
		_, relayed := find(linked, named("relay republish"))
		_, written := find(linked, named("process "+s.topic))
		return relayed && written
	})
	relay, ok := find(linked, named("relay republish"))
	if !ok {
		t.Fatalf("no relay span links to the request that took the order; spans linking to it: %v", names(linked))
	}
	// The reservation keeps the context of the gate's span, the request's
	// child that took the unit.
	gateSpan, ok := find(inTrace(traceID), named("seckill gate"))
	if !ok {
		t.Fatal("no gate span in the request's trace")
	}
	childOf(t, gateSpan, tracetest.SpanStubFromReadOnlySpan(request.(sdktrace.ReadOnlySpan)))
	if relay.Links[0].SpanContext.SpanID() != gateSpan.SpanContext.SpanID() {
		t.Errorf("relay span links to %s, want the gate's span %s", relay.Links[0].SpanContext.SpanID(), gateSpan.SpanContext.SpanID())
	}
	if _, ok := find(linked, named("process "+s.topic)); !ok {
		t.Fatalf("the writer's batch of the relayed order does not link to its request; spans linking to it: %v", names(linked))
	}
	if _, ok := find(inTrace(relay.SpanContext.TraceID()), named("send "+s.topic)); !ok {
		t.Errorf("no publish span inside the relay's span")
	}
}

// TestDeadLetterKeepsTheTrace: an event the writer cannot settle goes to
// the dead-letter topic with its trace context; the forward is a span of
// the writer's batch linked to the event's trace.
func TestDeadLetterKeepsTheTrace(t *testing.T) {
	k := testsupport.MustKafka(t)
	dlq := k.MustTopic(t, 1)
	s := startSale(t, nil, map[string]string{"SECKILL_ORDERS_DLQ_TOPIC": dlq})

	ctx, request := otel.Tracer("test").Start(t.Context(), "POST /voucher-order/seckill/:id", trace.WithSpanKind(trace.SpanKindServer))
	m := kafka.Message{Key: []byte("7"), Value: []byte(`{"orderId":"1","userId":0}`)}
	broker.InjectTrace(ctx, &m)
	request.End()
	w := broker.NewWriter(k.Brokers, s.topic)
	defer w.Close()
	if err := w.WriteMessages(ctx, m); err != nil {
		t.Fatal(err)
	}

	var letters []broker.DeadLetter
	testsupport.Poll(30*time.Second, func() bool {
		var err error
		if letters, err = broker.ReadDeadLetters(t.Context(), k.Brokers, dlq); err != nil {
			t.Fatal(err)
		}
		return len(letters) > 0
	})
	if len(letters) != 1 {
		t.Fatalf("%d dead letters, want the undecodable event", len(letters))
	}
	if got, want := broker.Header(letters[0].Message(), "traceparent"), broker.Header(m, "traceparent"); got != want || want == "" {
		t.Errorf("dead letter's traceparent %q, want the event's %q", got, want)
	}
	var forward tracetest.SpanStub
	found := testsupport.Poll(10*time.Second, func() bool {
		_, linked := ended(request.SpanContext().TraceID())
		var ok bool
		forward, ok = find(linked, named("send "+dlq))
		return ok
	})
	if !found {
		t.Fatal("no dead-letter span links to the event's trace")
	}
	batch, ok := find(inTrace(forward.SpanContext.TraceID()), named("process "+s.topic))
	if !ok {
		t.Fatal("the dead-letter span is not in the trace of the writer's batch")
	}
	childOf(t, forward, batch)
}

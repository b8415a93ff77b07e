package floor_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/bench/internal/floor"
	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/testsupport"
)

// The floor sells as the gate does at its simplest: a unit to a buyer
// once, nothing past the stock, every order taken as an event in Kafka.
func TestFloorSellsEachUnitOnceAndPublishesIt(t *testing.T) {
	r := testsupport.MustRedis(t)
	k := testsupport.MustKafka(t)
	topic := k.MustTopic(t, 1)
	p := broker.NewProducer(k.Brokers, topic, 0)
	defer p.Close()
	srv := httptest.NewServer((&floor.Server{Redis: r.Client, Producer: p, Prefix: r.Prefix}).Handler())
	defer srv.Close()
	ctx := context.Background()
	if err := floor.Stock(ctx, r.Client, r.Prefix, 7, 2); err != nil {
		t.Fatal(err)
	}
	order := func(buyer string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/voucher-order/seckill/7", nil)
		if buyer != "" {
			req.Header.Set("Authorization", buyer)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(res.Body).Decode(&body)
		return res.StatusCode, body
	}
	for _, c := range []struct {
		buyer   string
		status  int
		success bool
		msg     string
	}{
		{"a", 200, true, ""},
		{"a", 200, false, "already bought"},
		{"b", 200, true, ""},
		{"c", 200, false, "sold out"},
		{"", 400, false, "a voucher id and an Authorization header"},
	} {
		status, body := order(c.buyer)
		if status != c.status || body["success"] != c.success || (c.msg != "" && body["errorMsg"] != c.msg) {
			t.Fatalf("buyer %q: %d %v; want %d success %v %q", c.buyer, status, body, c.status, c.success, c.msg)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := kafka.DialLeader(rctx, "tcp", k.Brokers[0], topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if n, err := conn.ReadLastOffset(); err != nil || n != 2 {
		t.Fatalf("%d events in the topic, %v; want the 2 orders taken", n, err)
	}
	rd := kafka.NewReader(kafka.ReaderConfig{Brokers: k.Brokers, Topic: topic, Partition: 0, MaxWait: 100 * time.Millisecond})
	defer rd.Close()
	for i := range 2 {
		m, err := rd.ReadMessage(rctx)
		if err != nil {
			t.Fatal(err)
		}
		if e, err := broker.DecodeOrder(m.Value); err != nil || e.VoucherID != 7 {
			t.Fatalf("event %d: %+v, %v", i, e, err)
		}
	}
}

package api_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testsupport"
)

// inbox is a CodeSender that keeps the last code per phone, as a phone
// would receive it.
type inbox struct {
	mu    sync.Mutex
	codes map[string]string
}

func (b *inbox) SendCode(_ context.Context, phone, code string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.codes[phone] = code
	return nil
}

func (b *inbox) last(t *testing.T, phone string) string {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	code, ok := b.codes[phone]
	if !ok {
		t.Fatalf("no code was sent to %s", phone)
	}
	return code
}

type testAPI struct {
	URL   string
	Admin string // the admin listener's base URL: /metrics, pprof
	Redis *testsupport.Redis
	MySQL *testsupport.MySQL
	Inbox *inbox
	Logs  *testsupport.SyncBuffer
	Env   map[string]string // the program's configuration
}

// startAPI runs the api program (app.API, as cmd/api does) in the test
// process against the real Redis, a MySQL database and a Kafka topic of
// the test's own. env overrides configuration the way the real program
// reads it.
func startAPI(t *testing.T, env map[string]string) *testAPI {
	t.Helper()
	return startAPIWith(t, env, true, "http")
}

// startAPIWith is startAPI; withInbox false leaves the program's own
// choice of code sender (none, or the log in development mode).
func startAPIWith(t *testing.T, env map[string]string, withInbox bool, scheme string) *testAPI {
	t.Helper()
	r := testsupport.MustRedis(t)
	m := testsupport.MustMySQL(t)
	k := testsupport.MustKafka(t)
	vars := map[string]string{
		"SECKILL_API_ADDR": "127.0.0.1:0", "SECKILL_ADMIN_ADDR": "127.0.0.1:0", "SECKILL_RATE_PREFIX": r.Key("rate:"), "SECKILL_KEY_PREFIX": r.Prefix,
		"SECKILL_MYSQL_DSN": m.DSN, "SECKILL_KAFKA_BROKERS": strings.Join(k.Brokers, ","),
		"SECKILL_ORDERS_TOPIC": k.MustTopic(t, 3), "SECKILL_SOLDOUT_TTL": "1s", "SECKILL_ID_BLOCK": "100",
	}
	maps.Copy(vars, r.Env())
	if _, own := env["SECKILL_REDIS_ADDR"]; own {
		delete(vars, "SECKILL_REDIS_CLUSTER") // a test's Redis of its own
	}
	maps.Copy(vars, env)
	cfg, err := config.LoadAPI(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	logs := &testsupport.SyncBuffer{}
	box := &inbox{codes: map[string]string{}}
	program := app.NewAPI(cfg, logs)
	if withInbox {
		program.CodeSender = box
	}
	if err := program.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := program.Close(); err != nil {
			t.Errorf("api close: %v", err)
		}
	})
	url := scheme + "://" + program.Addr()
	testsupport.Eventually(t, "http://"+program.AdminAddr()+"/readyz", http.StatusOK, 20*time.Second)
	return &testAPI{URL: url, Admin: "http://" + program.AdminAddr(), Redis: r, MySQL: m, Inbox: box, Logs: logs, Env: vars}
}

// envelope is the course's Result as a client decodes it.
type envelope struct {
	Success  bool            `json:"success"`
	ErrorMsg string          `json:"errorMsg"`
	Data     json.RawMessage `json:"data"`
	Total    *int64          `json:"total"`
}

type response struct {
	Status int
	Header http.Header
	Raw    string
	Body   envelope
}

// call sends a request and checks the exchange against the OpenAPI
// document; body may be a string or an io.Reader (sent chunked, without
// Content-Length; gone once sent, so only its answer is checked).
func call(t *testing.T, method, url string, header map[string]string, body any) response {
	t.Helper()
	var rd io.Reader
	var sent []byte // the body, for the contract check; nil when streamed
	switch b := body.(type) {
	case nil:
	case string:
		rd, sent = strings.NewReader(b), []byte(b)
	case io.Reader:
		rd = b
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := body.(string); ok && s != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	_, streamed := body.(io.Reader)
	checkContract(t, req, sent, streamed, res, raw)
	out := response{Status: res.StatusCode, Header: res.Header, Raw: string(raw)}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out.Body); err != nil {
			t.Fatalf("%s %s: the body is not the Result envelope: %v\n%s", method, url, err, raw)
		}
	}
	return out
}

func (a *testAPI) sendCode(t *testing.T, phone string) string {
	t.Helper()
	res := call(t, "POST", a.URL+"/user/code?phone="+phone, nil, nil)
	if res.Status != 200 || !res.Body.Success {
		t.Fatalf("send code to %s: %d %s", phone, res.Status, res.Raw)
	}
	return a.Inbox.last(t, phone)
}

func (a *testAPI) login(t *testing.T, phone, code string) response {
	t.Helper()
	return call(t, "POST", a.URL+"/user/login", nil, `{"phone":"`+phone+`","code":"`+code+`"}`)
}

// loggedIn is a new user's session token.
func (a *testAPI) loggedIn(t *testing.T, phone string) string {
	t.Helper()
	res := a.login(t, phone, a.sendCode(t, phone))
	var token string
	if res.Status != 200 || !res.Body.Success || json.Unmarshal(res.Body.Data, &token) != nil {
		t.Fatalf("login %s: %d %s", phone, res.Status, res.Raw)
	}
	return token
}

//go:build compose

package docker_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
)

// The compose file's system profile, started as a user starts it: the api
// answers, an order taken through it lands in MySQL by the order-writer,
// then the whole of it is torn down. SECKILL_TEST_COMPOSE is the compose
// command ("docker compose", or podman-compose: make test runs this under
// deploy/local/compose.sh, on images built here, with COMPOSE_FILE naming
// the compose file and podman's deviations); the compose file's ports are
// the stack's, so nothing else may hold them.
func TestComposeSystemTakesAnOrder(t *testing.T) {
	command := strings.Fields(os.Getenv("SECKILL_TEST_COMPOSE"))
	if len(command) == 0 {
		t.Fatal("SECKILL_TEST_COMPOSE is not set: the compose command to run the system with (docker compose, or deploy/local/compose.sh run, which make test uses)")
	}
	// The compose file, unless COMPOSE_FILE names the files (make test
	// adds podman's deviations, deploy/docker/podman.yml, so).
	files := []string{"-f", "../docker-compose.yml"}
	if os.Getenv("COMPOSE_FILE") != "" {
		files = nil
	}
	compose := func(ctx context.Context, args ...string) ([]byte, error) {
		full := append(append(append(command[1:len(command):len(command)], "-p", "seckill-system-test"), files...), "--profile", "system")
		full = append(full, args...)
		out, err := exec.CommandContext(ctx, command[0], full...).CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%s %s: %w\n%s", command[0], strings.Join(full, " "), err, out)
		}
		return out, err
	}
	// Within go test's -timeout (make test gives 12 minutes) with the
	// tear-down's 3: a test killed by the timeout would leave the system
	// running.
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if t.Failed() {
			for _, s := range []string{"migrate", "seed", "topics", "api", "order-writer", "cache-invalidator"} {
				out, _ := compose(ctx, "logs", s)
				t.Logf("%s's log:\n%s", s, tail(out, 30))
			}
		}
		if _, err := compose(ctx, "down", "-v"); err != nil {
			t.Errorf("tear down: %v", err)
		}
	})
	// What an earlier run left, if it was killed.
	if _, err := compose(ctx, "down", "-v"); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if _, err := compose(ctx, "up", "-d"); err != nil {
		t.Fatal(err)
	}

	// Each daemon's readiness: the api's, then the order-writer's and the
	// cache-invalidator's on their admin ports (the host's network).
	api := "http://127.0.0.1:8081"
	for name, addr := range map[string]string{"api": api, "order-writer": "http://127.0.0.1:9101", "cache-invalidator": "http://127.0.0.1:9102"} {
		var ready string
		for ready != "ok" {
			select {
			case <-ctx.Done():
				t.Fatalf("the %s was not ready %v after up: %s", name, time.Since(began).Round(time.Second), ready)
			case <-time.After(time.Second):
			}
			ready = readiness(ctx, addr)
		}
	}
	t.Logf("the system answered ready %v after up", time.Since(began).Round(time.Second))

	const phone = "13900139000"
	call(t, ctx, http.MethodPost, api+"/user/code?phone="+phone, "", nil, nil)
	var code string
	for code == "" {
		logs, err := compose(ctx, "logs", "api")
		if err != nil {
			t.Fatal(err)
		}
		if m := regexp.MustCompile(`phone=` + phone + ` code=(\d+)`).FindSubmatch(logs); m != nil {
			code = string(m[1])
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no login code for %s in the api's log", phone)
		case <-time.After(500 * time.Millisecond):
		}
	}
	var token string
	call(t, ctx, http.MethodPost, api+"/user/login", `{"phone":"`+phone+`","code":"`+code+`"}`, nil, &token)

	admin := map[string]string{"X-Admin-Token": "dev-admin-token-change-me"}
	now := time.Now().UTC()
	var voucher int64
	call(t, ctx, http.MethodPost, api+"/voucher/seckill", fmt.Sprintf(
		`{"shopId":1,"title":"compose","payValue":100,"actualValue":1000,"stock":5,"beginTime":%q,"endTime":%q}`,
		now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339)), admin, &voucher)
	var order json.Number
	call(t, ctx, http.MethodPost, fmt.Sprintf("%s/voucher-order/seckill/%d", api, voucher), "", map[string]string{"authorization": token}, &order)

	db, err := sql.Open("mysql", "root:root@tcp(127.0.0.1:13306)/seckill")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for {
		var n int
		err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM tb_voucher_order WHERE id = ? AND voucher_id = ?", order.String(), voucher).Scan(&n)
		if err == nil && n == 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("order %s of voucher %d never reached MySQL (last read: %d rows, %v)", order, voucher, n, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
	t.Logf("order %s of voucher %d in MySQL %v after up", order, voucher, time.Since(began).Round(time.Second))
}

// readiness is a daemon's /readyz answer, "ok" when it is ready.
func readiness(ctx context.Context, api string) string {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, api+"/readyz", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode == http.StatusOK {
		return "ok"
	}
	return fmt.Sprintf("%d %s", res.StatusCode, bytes.TrimSpace(body))
}

// call sends a request and decodes the Result envelope's data into data;
// anything but HTTP 200 with success true fails the test.
func call(t *testing.T, ctx context.Context, method, url, body string, headers map[string]string, data any) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var result struct {
		Success  bool            `json:"success"`
		ErrorMsg string          `json:"errorMsg"`
		Data     json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &result); err != nil || res.StatusCode != http.StatusOK || !result.Success {
		t.Fatalf("%s %s: %d %s", method, url, res.StatusCode, raw)
	}
	if data != nil {
		dec := json.NewDecoder(bytes.NewReader(result.Data))
		dec.UseNumber()
		if err := dec.Decode(data); err != nil {
			t.Fatalf("%s %s: data %s: %v", method, url, result.Data, err)
		}
	}
}

// tail is the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testsupport"
	"github.com/seckill/seckill/internal/user"
)

// balancerSource is the address the shipped HAProxy connects to the api
// instances from, which run.sh makes their only trusted proxy.
func balancerSource(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("../../deploy/local/haproxy.sh", "source").Output()
	if err != nil {
		t.Fatalf("haproxy.sh source: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// clientAt is an HTTP client whose connections come from the loopback
// address local: another machine, as the balancer sees it.
func clientAt(local string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// Behind the shipped HAProxy each client keeps its own address, in HTTP
// mode and in TCP mode. In HTTP mode the balancer sets X-Forwarded-For to
// the connection's source (a client's own header is replaced, not
// appended to); in TCP mode it sends the source in a PROXY v2 header. The
// instances trust exactly the balancer, for either. So a stranger at
// 127.0.0.3 — asking codes for the owner's phone, making wrong tries,
// forging X-Forwarded-For with the owner's address — neither holds the
// owner's cooldown nor burns the code the owner at 127.0.0.2 asked for.
// Before, every client was 127.0.0.1 to the api.
func TestBalancerKeepsEachClientsAddress(t *testing.T) {
	s := newSaleOn(t, stack{testsupport.MustRedis(t), testsupport.MustMySQL(t), testsupport.MustKafka(t)}, nil,
		map[string]string{"SECKILL_DEV_MODE": "true", "SECKILL_API_TRUSTED_PROXIES": balancerSource(t)})
	second, _, _ := s.startAPI(t)
	for _, mode := range []balancerMode{balancerHTTP, balancerTCP} {
		t.Run(string(mode), func(t *testing.T) {
			lb, _ := startLoadBalancer(t, mode, s.api, second)
			owner, stranger := clientAt("127.0.0.2"), clientAt("127.0.0.3")
			phone := fmt.Sprintf("139%08d", rand.IntN(100_000_000))
			forge := map[string]string{"X-Forwarded-For": "127.0.0.2"}

			send := func(c *http.Client, method, path string, header map[string]string, body string) (int, string) {
				t.Helper()
				req, _ := http.NewRequest(method, lb+path, strings.NewReader(body))
				if body != "" {
					req.Header.Set("Content-Type", "application/json")
				}
				for k, v := range header {
					req.Header.Set(k, v)
				}
				res, err := c.Do(req)
				if err != nil {
					t.Fatalf("%s %s: %v", method, path, err)
				}
				defer res.Body.Close()
				raw, _ := io.ReadAll(res.Body)
				return res.StatusCode, string(raw)
			}

			if st, raw := send(stranger, "POST", "/user/code?phone="+phone, forge, ""); st != 200 {
				t.Fatalf("the stranger's code request: %d %s", st, raw)
			}
			// Within the stranger's cooldown, the owner still gets a code of the
			// owner's own, under the owner's address.
			if st, raw := send(owner, "POST", "/user/code?phone="+phone, nil, ""); st != 200 {
				t.Fatalf("the owner's code request after the stranger's: %d %s", st, raw)
			}
			keys := user.Keys{Prefix: s.redis.Prefix}
			code, err := s.redis.Client.HGet(context.Background(), keys.Code(phone, "127.0.0.2"), "code").Result()
			if err != nil {
				t.Fatalf("no code under the owner's address 127.0.0.2 (the api did not see it): %v", err)
			}
			for range 6 {
				send(stranger, "POST", "/user/login", forge, `{"phone":"`+phone+`","code":"000000"}`)
			}
			st, raw := send(owner, "POST", "/user/login", nil, `{"phone":"`+phone+`","code":"`+code+`"}`)
			var r result
			if err := json.Unmarshal([]byte(raw), &r); err != nil || st != 200 || !r.Success {
				t.Fatalf("the owner's login after the stranger's wrong tries: %d %s", st, raw)
			}
		})
	}
}

// balancerMode is haproxy.sh's configuration command.
type balancerMode string

const (
	balancerHTTP balancerMode = "config"     // HTTP mode, X-Forwarded-For
	balancerTCP  balancerMode = "config-tcp" // TCP mode, PROXY v2
)

// startLoadBalancer runs HAProxy, configured by deploy/local/haproxy.sh
// as run.sh configures it, in front of backends: its URL, and its process
// (whose log says when it takes a backend out).
func startLoadBalancer(t *testing.T, mode balancerMode, backends ...string) (string, *testsupport.Process) {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Fatal("haproxy is not installed: deploy/local/stack.sh install puts it there")
	}
	listen := testsupport.FreeAddr(t)
	args := []string{string(mode), listen}
	for _, b := range backends {
		args = append(args, strings.TrimPrefix(b, "http://"))
	}
	cfg, err := exec.Command("../../deploy/local/haproxy.sh", args...).Output()
	if err != nil {
		t.Fatalf("haproxy.sh config: %v", err)
	}
	file := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(file, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	p := testsupport.Start(t, bin, nil, "-db", "-f", file)
	testsupport.Eventually(t, "http://"+listen+"/readyz", 200, 15*time.Second)
	return "http://" + listen, p
}

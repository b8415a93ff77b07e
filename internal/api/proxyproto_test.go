package api_test

import (
	"bufio"
	"net"
	"net/http"
	"net/url"
	"testing"

	"github.com/pires/go-proxyproto"

	"github.com/seckill/seckill/internal/user"
)

// A PROXY protocol header names the client only on a trusted proxy's
// connection (a balancer in TCP mode); from anyone else it is not HTTP,
// and gets a 400 that changes nothing.
func TestProxyHeaderOnlyFromTheProxy(t *testing.T) {
	t.Parallel()
	const client = "203.0.113.7"
	for _, tt := range []struct {
		name    string
		trusted string
		status  int
	}{{"the trusted proxy", "127.0.0.1/32", http.StatusOK}, {"a client, with no proxy trusted", "", http.StatusBadRequest},
		{"a client, with another proxy trusted", "10.0.0.0/8", http.StatusBadRequest}} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			if tt.trusted != "" {
				env["SECKILL_API_TRUSTED_PROXIES"] = tt.trusted
			}
			a := startAPI(t, env)
			u, err := url.Parse(a.URL)
			if err != nil {
				t.Fatal(err)
			}
			conn, err := net.Dial("tcp", u.Host)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			header := proxyproto.HeaderProxyFromAddrs(2, &net.TCPAddr{IP: net.ParseIP(client), Port: 40000}, conn.RemoteAddr())
			if _, err := header.WriteTo(conn); err != nil {
				t.Fatal(err)
			}
			phone := randomPhone()
			req, _ := http.NewRequest("POST", a.URL+"/user/code?phone="+phone, nil)
			if err := req.Write(conn); err != nil {
				t.Fatal(err)
			}
			res, err := http.ReadResponse(bufio.NewReader(conn), req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tt.status {
				t.Fatalf("POST /user/code after a PROXY header naming %s: %d, want %d", client, res.StatusCode, tt.status)
			}
			keys := user.Keys{Prefix: a.Redis.Prefix}
			stored := a.Redis.Client.Exists(t.Context(), keys.Code(phone, client)).Val() == 1
			if stored != (tt.status == http.StatusOK) {
				t.Fatalf("a code stored under the header's address %s: %v; want it only from the trusted proxy", client, stored)
			}
			if a.Redis.Client.Exists(t.Context(), keys.Code(phone, "127.0.0.1")).Val() != 0 {
				t.Fatal("a code stored under the proxy's own address")
			}
		})
	}
}

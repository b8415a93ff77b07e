package api

import (
	"net"
	"net/http/httptest"
	"testing"
)

func TestSameSite(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		origin, scheme, host string
		want                 bool
	}{
		{"http://127.0.0.1:18080", "http", "127.0.0.1:8081", true}, // the course's nginx before the API
		{"http://127.0.0.1", "http", "127.0.0.1:8081", true},
		{"http://localhost:8080", "http", "localhost:8081", true},
		{"http://localhost:8080", "http", "127.0.0.1:8081", false}, // two sites to a browser
		{"http://127.0.0.2:8080", "http", "127.0.0.1:8081", false},
		{"http://[::1]:8080", "http", "[::1]:8081", true},
		{"https://www.shop.example.com", "https", "api.shop.example.com", true},
		{"https://shop.example.com", "https", "shop.example.com:443", true},
		{"http://shop.example.com", "https", "shop.example.com", false}, // schemeful
		{"https://evil.example", "https", "shop.example.com", false},
		{"https://a.github.io", "https", "b.github.io", false}, // a public suffix: two sites
		{"https://a.co.uk", "https", "b.co.uk", false},
		{"https://x.a.co.uk", "https", "a.co.uk", true},
		{"https://SHOP.Example.COM", "https", "shop.example.com", true},
		{"https://shop.example.com.", "https", "shop.example.com", false}, // a browser's site keeps the dot
		{"null", "http", "127.0.0.1:8081", false},
		{"", "http", "127.0.0.1:8081", false},
		{"127.0.0.1:8080", "http", "127.0.0.1:8081", false}, // no scheme: no origin
		{"http://intranet:8080", "http", "intranet:8081", true},
	} {
		if got := sameSite(tt.origin, tt.scheme, tt.host); got != tt.want {
			t.Errorf("sameSite(%q, %q, %q) = %v, want %v", tt.origin, tt.scheme, tt.host, got, tt.want)
		}
	}
}

// The host a proxy forwards counts only from a trusted proxy.
func TestOwnHost(t *testing.T) {
	t.Parallel()
	_, trusted, _ := net.ParseCIDR("10.0.0.0/8")
	for _, tt := range []struct {
		name, remote string
		header       map[string]string
		want         string
	}{
		{"no proxy", "203.0.113.5:4000", nil, "api.internal:8081"},
		{"a client's own X-Forwarded-Host", "203.0.113.5:4000", map[string]string{"X-Forwarded-Host": "evil.example"}, "api.internal:8081"},
		{"a client's own Forwarded", "203.0.113.5:4000", map[string]string{"Forwarded": "host=evil.example"}, "api.internal:8081"},
		{"X-Forwarded-Host from the proxy", "10.1.2.3:4000", map[string]string{"X-Forwarded-Host": "shop.example.com, inner.example"}, "shop.example.com"},
		{"Forwarded from the proxy", "10.1.2.3:4000", map[string]string{"Forwarded": `for=203.0.113.5;Host="shop.example.com:8443";proto=https, for=10.0.0.9`}, "shop.example.com:8443"},
		{"the proxy forwards no host", "10.1.2.3:4000", nil, "api.internal:8081"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "http://api.internal:8081/user/code", nil)
			r.RemoteAddr = tt.remote
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			if got := ownHost(r, []*net.IPNet{trusted}); got != tt.want {
				t.Fatalf("ownHost = %q, want %q", got, tt.want)
			}
		})
	}
}

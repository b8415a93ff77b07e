package api

import (
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"
	"golang.org/x/net/publicsuffix"
)

// sameSite reports whether a browser would call origin (scheme://host[:port])
// the same site as the API reached as scheme://host: the same scheme and
// registrable domain (eTLD+1, by the public suffix list). An IP literal,
// localhost and a name with no registrable part are each their own site.
// Ports do not count, so the course's nginx on :8080 passing /api to the
// API on :8081 is one site, as it is to the browser.
func sameSite(origin, scheme, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return false // "null" among them: a sandboxed or file page
	}
	return strings.EqualFold(u.Scheme, scheme) && site(u.Hostname()) == site(hostOnly(host))
}

// site is a host's registrable domain, or the host itself when it has none.
func site(host string) string {
	host = strings.ToLower(host)
	if host == "" || net.ParseIP(host) != nil {
		return host
	}
	if d, err := publicsuffix.EffectiveTLDPlusOne(host); err == nil {
		return d
	}
	return host
}

// hostOnly drops a port from host, and an IPv6 literal's brackets.
func hostOnly(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}

// ownHost is the host the client asked for: from a trusted proxy
// (SECKILL_API_TRUSTED_PROXIES), the one it forwards in X-Forwarded-Host
// or Forwarded; else the request's own Host, which a proxy such as the
// course's nginx sets to the upstream's address.
func ownHost(r *http.Request, trusted []*net.IPNet) string {
	if fromTrusted(r.RemoteAddr, trusted) {
		if h := firstValue(r.Header.Get("X-Forwarded-Host")); h != "" {
			return h
		}
		if h := forwardedParam(r.Header.Get("Forwarded"), "host"); h != "" {
			return h
		}
	}
	return r.Host
}

// ownScheme is the scheme the client used: from a trusted proxy, the
// proto of its Forwarded header when it sends one, else what echo reads
// (TLS, or X-Forwarded-Proto and its kin, which the API keeps only from
// trusted proxies).
func ownScheme(c echo.Context, trusted []*net.IPNet) string {
	r := c.Request()
	if fromTrusted(r.RemoteAddr, trusted) {
		if p := forwardedParam(r.Header.Get("Forwarded"), "proto"); p != "" {
			return strings.ToLower(p)
		}
	}
	return c.Scheme()
}

// firstValue is the first of a comma-separated header's values: the one
// the proxy nearest the client wrote.
func firstValue(v string) string {
	first, _, _ := strings.Cut(v, ",")
	return strings.TrimSpace(first)
}

// forwardedParam is the parameter name of the first element of an RFC
// 7239 Forwarded header.
func forwardedParam(v, name string) string {
	for _, pair := range strings.Split(firstValue(v), ";") {
		k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if ok && strings.EqualFold(k, name) {
			return strings.Trim(val, `"`)
		}
	}
	return ""
}

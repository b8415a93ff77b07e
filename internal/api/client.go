package api

import (
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/seckill/seckill/internal/apperr"
)

// clientAddr is what every per-address limit counts: the client's IPv4
// address, or its IPv6 /64 — the block one subscriber is given, so that
// counting addresses one by one would give each client 2^64 of them.
func clientAddr(c echo.Context) string {
	raw := c.RealIP()
	ip := net.ParseIP(raw)
	if ip == nil || ip.To4() != nil {
		return raw
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

var errCrossSite = apperr.New(apperr.Forbidden, "cross-site request refused: ask for a code from this site's own pages")

// sameSiteOnly refuses a request another site's page makes its visitors'
// browsers send: POST /user/code is a CORS-simple request, so without this
// any page could make every visitor ask for a code, an SMS each. A browser
// says where the request comes from in Sec-Fetch-Site, which no page can
// set; over plain HTTP to a host that is not loopback, and in browsers
// older than Fetch Metadata, only in Origin, whose site must then be the
// API's own (sameSite, with ownScheme and ownHost) or the origin an
// allowed one. A client that is no
// browser sends neither and is bounded by the rate limits alone.
func sameSiteOnly(allowed []string, trusted []*net.IPNet) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			origin := r.Header.Get(echo.HeaderOrigin)
			if slices.Contains(allowed, origin) {
				return next(c)
			}
			switch r.Header.Get("Sec-Fetch-Site") {
			case "cross-site":
				return errCrossSite
			case "same-origin", "same-site", "none":
				return next(c)
			}
			if origin != "" && !sameSite(origin, ownScheme(c, trusted), ownHost(r, trusted)) {
				return errCrossSite
			}
			return next(c)
		}
	}
}

// allowedMethods answers 405 with Allow (RFC 9110 §15.5.6) for a method
// the path's routes do not take, before echo routes it: echo would hand
// GET /voucher-order/seckill/1 to the parameter route GET
// /voucher-order/:id (a 400 about the id), and GET /user/login to GET
// /user/:id, and its own 405 names no methods. A path's routes are those
// whose template matches it with the most static segments, as echo's
// router prefers a static segment to a parameter.
//
// A request echo routed to a template registered for its method, which no
// more static template could shadow (the flash sale's POST among them) and
// which its path matches, goes through without the scan of every route.
func (s *Server) allowedMethods() echo.MiddlewareFunc {
	type table struct {
		routes []route
		// direct: template -> its segments, for the routes no more
		// static template could shadow, by method.
		direct map[string]map[string][]string
	}
	load := sync.OnceValue(func() table {
		var t table
		for _, r := range s.echo.Routes() {
			if strings.Contains(r.Path, "*") || r.Method == echo.RouteNotFound {
				continue
			}
			t.routes = append(t.routes, route{strings.Split(r.Path, "/"), r.Method})
		}
		t.direct = map[string]map[string][]string{}
		for _, r := range t.routes {
			if shadowed(r.segments, t.routes) {
				continue
			}
			template := strings.Join(r.segments, "/")
			if t.direct[template] == nil {
				t.direct[template] = map[string][]string{}
			}
			t.direct[template][r.method] = r.segments
		}
		return t
	})
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			t := load()
			path := strings.Split(c.Request().URL.Path, "/")
			// echo's router can hand a template a path it does not match
			// segment for segment (GET /voucher-order/seckill/1 to GET
			// /voucher-order/:id): the fast path checks that too.
			if segments, ok := t.direct[c.Path()][c.Request().Method]; ok {
				if _, match := matchSegments(segments, path); match {
					return next(c)
				}
			}
			best, allow := -1, []string{}
			for _, r := range t.routes {
				static, ok := matchSegments(r.segments, path)
				switch {
				case !ok || static < best:
					continue
				case static > best:
					best, allow = static, allow[:0]
				}
				if !slices.Contains(allow, r.method) {
					allow = append(allow, r.method)
				}
			}
			if best < 0 || slices.Contains(allow, c.Request().Method) {
				return next(c)
			}
			slices.Sort(allow)
			c.Response().Header().Set(echo.HeaderAllow, strings.Join(allow, ", "))
			return echo.ErrMethodNotAllowed
		}
	}
}

// route is one registered route: its template's segments and method.
type route struct {
	segments []string
	method   string
}

// shadowed reports whether a path that template matches could also match
// another of routes with more static segments: a template echo prefers.
func shadowed(template []string, routes []route) bool {
	own := staticSegments(template)
	for _, r := range routes {
		if len(r.segments) != len(template) || staticSegments(r.segments) <= own {
			continue
		}
		overlap := true
		for i, seg := range r.segments {
			if !strings.HasPrefix(seg, ":") && !strings.HasPrefix(template[i], ":") && seg != template[i] {
				overlap = false
				break
			}
		}
		if overlap {
			return true
		}
	}
	return false
}

func staticSegments(template []string) int {
	n := 0
	for _, seg := range template {
		if !strings.HasPrefix(seg, ":") {
			n++
		}
	}
	return n
}

// matchSegments reports whether a route template's segments match a
// path's, and how many of them are static.
func matchSegments(template, path []string) (static int, ok bool) {
	if len(template) != len(path) {
		return 0, false
	}
	for i, seg := range template {
		switch {
		case strings.HasPrefix(seg, ":"):
			if path[i] == "" {
				return 0, false
			}
		case seg == path[i]:
			static++
		default:
			return 0, false
		}
	}
	return static, true
}

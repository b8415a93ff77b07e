package api

import (
	"net"
	"slices"

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
// set; an older browser only in Origin, which must then be the API's own
// or an allowed one. A client that is no browser sends neither and is
// bounded by the rate limits alone.
func sameSiteOnly(allowed []string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			switch r.Header.Get("Sec-Fetch-Site") {
			case "cross-site":
				return errCrossSite
			case "same-origin", "same-site", "none":
				return next(c)
			}
			if origin := r.Header.Get(echo.HeaderOrigin); origin != "" && !ownOrigin(c, origin) && !slices.Contains(allowed, origin) {
				return errCrossSite
			}
			return next(c)
		}
	}
}

// ownOrigin: origin is the API's own address as the client reached it.
func ownOrigin(c echo.Context, origin string) bool {
	return origin == c.Scheme()+"://"+c.Request().Host
}

package api

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/swaggest/swgui/v5emb"
)

// routeDocs serves /docs: Swagger UI 5 on /openapi.json, embedded in the
// binary by github.com/swaggest/swgui (its assets gzipped), so a build
// needs Go alone.
func routeDocs(e *echo.Echo) {
	ui := echo.WrapHandler(v5emb.New("seckill API", "/openapi.json", "/docs/"))
	e.GET("/docs", ui)
	e.GET("/docs/*", ui)
}

// buyPage is the buyer's page of a sale, whatever its bot check.
//
//go:embed buy.html
var buyPage []byte

// routeBuy serves GET /buy?voucher=<id>: log in and buy, through a
// sale's challenge when it has one. The page is one file with its script
// inline, on the API's own origin.
func routeBuy(e *echo.Echo) {
	e.GET("/buy", func(c echo.Context) error {
		c.Response().Header().Set("Cache-Control", "no-cache")
		return c.HTMLBlob(http.StatusOK, buyPage)
	})
}

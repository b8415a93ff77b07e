package api

import (
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

package api

import (
	"embed"
	"fmt"
	"io/fs"
	"net/http"

	"github.com/labstack/echo/v4"
)

// docsUI is the page at /docs: Swagger UI on /openapi.json. Its bundle is
// swagger-ui-dist from npm, pinned in deploy/apidoc/package.json, copied in
// by make build (it is 1.7 MB, so it is not committed).
//
//go:embed docsui
var docsUI embed.FS

// docsBundled reports whether this build carries Swagger UI's bundle.
func docsBundled() bool {
	_, err := fs.Stat(docsUI, "docsui/swagger-ui-bundle.js")
	return err == nil
}

// unbundledDocs is /docs in a build made without make build: the document
// is still served, the page says how to get the UI.
const unbundledDocs = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>seckill API</title></head>
<body><p>This build has no Swagger UI: build with <code>make build</code>, which bundles it.
The API document is at <a href="/openapi.json">/openapi.json</a>.</p></body></html>`

// routeDocs serves /docs and its files.
func routeDocs(e *echo.Echo) error {
	if !docsBundled() {
		e.GET("/docs", func(c echo.Context) error { return c.HTML(http.StatusOK, unbundledDocs) })
		return nil
	}
	sub, err := fs.Sub(docsUI, "docsui")
	if err != nil {
		return fmt.Errorf("the /docs page's files: %w", err)
	}
	files := http.StripPrefix("/docs/", http.FileServer(http.FS(sub)))
	e.GET("/docs", func(c echo.Context) error {
		page, err := fs.ReadFile(sub, "index.html")
		if err != nil {
			return err
		}
		return c.HTMLBlob(http.StatusOK, page)
	})
	e.GET("/docs/*", echo.WrapHandler(files))
	return nil
}

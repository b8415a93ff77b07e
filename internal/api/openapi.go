package api

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"
	"go.yaml.in/yaml/v3"
)

// OpenAPI is the API's contract, written by hand next to the handlers it
// describes; the HTTP tests validate every request the server accepts and
// every response against it, so the two cannot drift apart.
//
//go:embed openapi.yaml
var OpenAPI []byte

// openAPIJSON is the document as JSON, for /openapi.json.
func openAPIJSON() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(OpenAPI, &doc); err != nil {
		return nil, fmt.Errorf("the embedded OpenAPI document: %w", err)
	}
	return json.Marshal(doc)
}

// serveOpenAPI answers GET /openapi.json with the document.
func serveOpenAPI(doc []byte) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set(echo.HeaderCacheControl, "public, max-age=300")
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, doc)
	}
}

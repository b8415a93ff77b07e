package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	res, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res, string(body)
}

// The document is served as JSON at /openapi.json, and read at /docs
// through Swagger UI, embedded in every build.
func TestDocumentAndDocsPage(t *testing.T) {
	t.Parallel()
	a := startAPI(t, nil)
	res, body := get(t, a.URL+"/openapi.json")
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") || json.Unmarshal([]byte(body), &doc) != nil ||
		doc.OpenAPI != "3.1.0" || doc.Paths["/voucher-order/seckill/{id}"] == nil {
		t.Fatalf("/openapi.json: %d %s %.200s", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	res, page := get(t, a.URL+"/docs")
	if res.StatusCode != 200 || !strings.Contains(page, "/openapi.json") || !strings.Contains(page, "swagger-ui-bundle.js") {
		t.Fatalf("/docs: %d %.300s", res.StatusCode, page)
	}
	for _, file := range []string{"/docs/swagger-ui-bundle.js", "/docs/swagger-ui.css"} {
		res, body := get(t, a.URL+file)
		if res.StatusCode != 200 || len(body) < 1000 {
			t.Fatalf("%s: %d, %d bytes", file, res.StatusCode, len(body))
		}
	}
}

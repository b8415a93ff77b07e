package api_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/seckill/seckill/internal/api"
)

// contract is the API's OpenAPI document, loaded and validated once for
// every HTTP test of this package.
var contract = sync.OnceValues(func() (routers.Router, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	// The document's server is "/", wherever it is served; the tests'
	// servers are on 127.0.0.1 at ports of their own.
	doc.Servers = nil
	return legacy.NewRouter(doc)
})

// checkContract validates an exchange against the document: every response
// must be one it describes, for its route and status; a request the server
// accepted (a status under 400) must be one it allows. A request the
// server refused may break the document (that is what the bad-input tests
// send); its answer must still be described. A streamed body is gone once
// sent: only the answer to it is checked.
func checkContract(t *testing.T, req *http.Request, body []byte, streamed bool, res *http.Response, raw []byte) {
	t.Helper()
	router, err := contract()
	if err != nil {
		t.Fatalf("the OpenAPI document: %v", err)
	}
	check := req.Clone(context.Background())
	check.Body = io.NopCloser(bytes.NewReader(body))
	route, params, err := router.FindRoute(check)
	if err != nil {
		if res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusMethodNotAllowed {
			return // an unknown route or method: not in the document, as it should not be
		}
		t.Fatalf("%s %s answered %d but the OpenAPI document has no such route: %v", req.Method, req.URL.Path, res.StatusCode, err)
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true, MultiError: true}
	in := &openapi3filter.RequestValidationInput{Request: check, PathParams: params, Route: route, Options: opts}
	if res.StatusCode < 400 && !streamed {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Errorf("%s %s was accepted (%d) but breaks the OpenAPI document: %v", req.Method, req.URL, res.StatusCode, err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: res.StatusCode, Header: res.Header,
		Body: io.NopCloser(bytes.NewReader(raw)), Options: opts}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("%s %s: the %d answer breaks the OpenAPI document: %v\n%s", req.Method, req.URL, res.StatusCode, err, raw)
	}
}

package api

import (
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/seckill/seckill/internal/botcheck"
	"github.com/seckill/seckill/internal/jwtauth"
)

// Every route the server has is in the OpenAPI document, with its method,
// and the document has no route the server lacks: the contract covers the
// whole API (the HTTP tests check what the routes answer against it).
func TestEveryRouteIsInTheDocument(t *testing.T) {
	t.Parallel()
	s, err := Listen(Config{Addr: "127.0.0.1:0"}, Deps{Registry: prometheus.NewRegistry(), JWKS: []jwtauth.JWK{{KID: "k"}},
		BotChecks: botcheck.New(nil, "", nil, nil, botcheck.DefaultConfig, nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.ln.Close()
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`:(\w+)`)
	served := map[string]bool{}
	for _, r := range s.echo.Routes() {
		if strings.HasSuffix(r.Path, "/*") {
			continue // the files of the /docs page
		}
		path := param.ReplaceAllString(r.Path, "{$1}")
		op := strings.ToLower(r.Method) + " " + path
		served[op] = true
		if _, ok := doc.Paths[path][strings.ToLower(r.Method)]; !ok {
			t.Errorf("%s is served but not in the OpenAPI document", op)
		}
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			if !served[method+" "+path] {
				t.Errorf("%s %s is in the OpenAPI document but not served", method, path)
			}
		}
	}
	if len(served) < 25 {
		t.Fatalf("%d routes served, fewer than the API has", len(served))
	}
}

package api_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Schemathesis, a property-based tool no one here wrote, generates
// requests from /openapi.json and checks every answer against the
// document and the document against the server: a 5xx, an answer the
// document does not allow, a request valid by the document that is
// refused (or an invalid one accepted), a wrong method not answered 405
// with Allow — each is a finding, and any finding fails the test. Pinned
// (deploy/apidoc/schemathesis-requirements.txt, make apicheck-tools), every
// check, a fixed seed; logout is left out, since it would end the session
// the run uses. Run in both session modes.
func TestAPIDocumentAgreesWithTheServer(t *testing.T) {
	t.Parallel()
	bin := os.Getenv("SECKILL_TEST_SCHEMATHESIS")
	if bin == "" {
		t.Fatal("SECKILL_TEST_SCHEMATHESIS must name the schemathesis program: make apicheck-tools installs it in .stack/schemathesis (make test sets it)")
	}
	config, err := filepath.Abs("../../deploy/apidoc/schemathesis.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"redis", "jwt"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			env := modeEnv(t, mode)
			env["SECKILL_ADMIN_TOKEN"] = testAdminToken
			// The run asks faster than any client may: the limits would
			// answer 429s instead of exercising the routes.
			for _, r := range []string{"CODE", "LOGIN", "SECKILL", "PUBLIC", "LOOKUP", "CHALLENGE"} {
				env["SECKILL_RATE_"+r+"_IP"], env["SECKILL_RATE_"+r+"_USER"] = "off", "off"
			}
			a := startAPI(t, env)
			now := time.Now()
			a.createVoucher(t, 100, now.Add(-time.Hour), now.Add(time.Hour))
			token := a.loggedIn(t, randomPhone())

			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "--config-file", config, "run", a.URL+"/openapi.json",
				"--checks", "all", "--seed", "20261126", "--max-examples", "40", "--workers", "1",
				"--exclude-path", "/user/logout", "--no-color",
				"-H", "authorization: "+token, "-H", "X-Admin-Token: "+testAdminToken)
			cmd.Dir = t.TempDir() // its report and example database
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("schemathesis found what the document and the server disagree on (%v):\n%s", err, tail(string(out), 12000))
			}
			summary := string(out)
			if i := strings.LastIndex(summary, "Test cases:"); i >= 0 {
				summary = summary[i:]
			}
			t.Logf("%s", strings.TrimSpace(summary))
		})
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

package testsupport

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// With no server variable and no container engine answering, a test that
// needs Redis fails, and says how to provide one: the stack's variables,
// or an engine (podman's included). It never skips.
func TestNoServerAndNoEngineFailsSayingHow(t *testing.T) {
	if os.Getenv("SECKILL_TEST_CHILD") == "1" {
		MustRedis(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNoServerAndNoEngineFailsSayingHow$", "-test.count=1")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SECKILL_TEST_") && !strings.HasPrefix(kv, "DOCKER_HOST=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "SECKILL_TEST_CHILD=1", "DOCKER_HOST=unix://"+t.TempDir()+"/no-engine.sock",
		"TESTCONTAINERS_RYUK_DISABLED=true")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("a test needing Redis passed with no server and no engine:\n%s", out)
	}
	for _, want := range []string{"--- FAIL", "no Redis for integration tests", "SECKILL_TEST_REDIS_ADDR", "deploy/local/engine.sh up"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the failure does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "--- SKIP") {
		t.Errorf("the test was skipped:\n%s", out)
	}
}

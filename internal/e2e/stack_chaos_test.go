//go:build chaos

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The stack's own commands on a stack of its own (other ports, another
// directory; the Kafka jars shared): `up --redis-cluster --mysql-cluster --kafka-brokers 3`,
// `status` lists every server, `down` leaves none of them running. Before,
// status listed no Redis Cluster node and down left all six running: their
// process title keeps the address, not the config file it was matched by.
func TestChaosStackStatusAndDownSeeEveryServer(t *testing.T) {
	script := os.Getenv("SECKILL_TEST_STACK")
	if script == "" {
		t.Fatal("SECKILL_TEST_STACK must name deploy/local/stack.sh (make test sets it)")
	}
	dir := t.TempDir()
	libs := filepath.Join(filepath.Dir(script), "../../.stack/kafka/libs")
	if err := os.MkdirAll(filepath.Join(dir, "kafka"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(libs, filepath.Join(dir, "kafka", "libs")); err != nil {
		t.Fatal(err)
	}
	// Clear of the shared stack's ports and of its cluster buses (+10000),
	// and of the bands the tests' ports are drawn from (20000-26999): a
	// program an earlier test left may hold one.
	env := append(os.Environ(), "SECKILL_STACK_DIR="+dir, "SECKILL_REDIS_PORT=28379", "SECKILL_REDIS_CACHE_PORT=28381", "SECKILL_REDIS_CLUSTER_PORT=17101",
		"SECKILL_MYSQL_PORT=28306", "SECKILL_KAFKA_PORT=28092", "SECKILL_KAFKA_CONTROLLER_PORT=28093", "SECKILL_KAFKA_CLUSTER_PORT=28192",
		"SECKILL_MYSQL_CLUSTER_PORT=28310", "SECKILL_MYSQL_CLUSTER_GCOMM_PORT=28567")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(script, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
			for _, l := range logs {
				raw, _ := os.ReadFile(l)
				lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
				t.Logf("%s, its last lines:\n%s", filepath.Base(l), strings.Join(lines[max(0, len(lines)-25):], "\n"))
			}
			t.Fatalf("stack.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	t.Cleanup(func() {
		cmd := exec.Command(script, "down")
		cmd.Env = env
		_ = cmd.Run()
	})
	run("up", "--redis-cluster", "--mysql-cluster", "--kafka-brokers", "3")

	status := run("status")
	want := []string{"127.0.0.1:28379", "127.0.0.1:28381", "127.0.0.1:28306", "127.0.0.1:28092", "127.0.0.1:28192", "127.0.0.1:28292", "127.0.0.1:28392",
		"127.0.0.1:17101", "127.0.0.1:17102", "127.0.0.1:17103", "127.0.0.1:17104", "127.0.0.1:17105", "127.0.0.1:17106",
		"127.0.0.1:28310", "127.0.0.1:28311", "127.0.0.1:28312", "127.0.0.1:28313"}
	for _, addr := range want {
		if !regexp.MustCompile(`running +pid +\d+ +` + regexp.QuoteMeta(addr) + `\b`).MatchString(status) {
			t.Errorf("status does not list %s as running:\n%s", addr, status)
		}
	}

	run("down")
	if left := ownProcesses(t, dir, []string{":28379", ":28381", ":17101", ":17102", ":17103", ":17104", ":17105", ":17106", ":28306"}); len(left) > 0 {
		t.Fatalf("down left servers of the stack running:\n%s", strings.Join(left, "\n"))
	}
}

// ownProcesses are the command lines that name the stack's directory or
// one of its addresses.
func ownProcesses(t *testing.T, dir string, addrs []string) []string {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, p := range procs {
		raw, err := os.ReadFile(p)
		if err != nil || len(raw) == 0 {
			continue
		}
		line := strings.ReplaceAll(string(raw), "\x00", " ")
		hit := strings.Contains(line, dir)
		for _, a := range addrs {
			hit = hit || strings.Contains(line, "127.0.0.1"+a)
		}
		if hit && !strings.Contains(line, "stack_chaos") && !strings.Contains(line, "e2e.test") {
			found = append(found, line)
		}
	}
	return found
}

package e2e

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testsupport"
)

// podman runs podman and returns its standard output.
func podman(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command("podman", args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

// containerRun are the options every program's container runs with here.
// crun refuses this machine's hybrid cgroups ("cgroups in hybrid mode not
// supported") and podman's default RLIMIT_NPROC (32768) is above what the
// sandbox lets a process set, so runc runs them, with the limits the host
// has; the host's network, so that the stack's loopback addresses are the
// programs' defaults.
func containerRun(t *testing.T) []string {
	t.Helper()
	var limit syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &limit); err != nil {
		t.Fatal(err)
	}
	nofile := strconv.FormatUint(limit.Max, 10)
	return []string{"run", "-d", "--runtime", "runc", "--network", "host",
		"--ulimit", "nofile=" + nofile + ":" + nofile, "--ulimit", "nproc=4096:4096"}
}

// The images make image builds (deploy/image/Containerfile, the final
// stages of the Dockerfile): each holds its static binary as /app, the
// passwd and group files and nothing else (no shell), runs as the
// non-root user 65532, and the three daemons run from them against the
// local stack: ready, and a graceful exit 0 on podman stop (SIGTERM).
func TestProgramsRunFromTheirImages(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatal("podman is not installed: deploy/local/stack.sh install")
	}
	for _, program := range []string{"api", "order-writer", "cache-invalidator", "seckillctl"} {
		image := "localhost/seckill/" + program
		var inspected []struct {
			Config struct {
				Entrypoint   []string
				User         string
				ExposedPorts map[string]any
			}
		}
		if err := json.Unmarshal([]byte(podman(t, "image", "inspect", image)), &inspected); err != nil || len(inspected) != 1 {
			t.Fatalf("%s: %v (make image builds it)", image, err)
		}
		c := inspected[0].Config
		if !slices.Equal(c.Entrypoint, []string{"/app"}) || c.User != "65532:65532" {
			t.Errorf("%s: entrypoint %v, user %q; want [/app] as 65532:65532", image, c.Entrypoint, c.User)
		}
		if _, ok := c.ExposedPorts["8081/tcp"]; (program == "api") != ok {
			t.Errorf("%s exposes %v", image, c.ExposedPorts)
		}
		id := strings.TrimSpace(podman(t, "create", image))
		files := tar.NewReader(strings.NewReader(podman(t, "export", id)))
		podman(t, "rm", id)
		var names []string
		stateOwner := -1
		for {
			h, err := files.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Typeflag == tar.TypeReg {
				names = append(names, strings.TrimPrefix(h.Name, "/"))
			}
			if h.Typeflag == tar.TypeDir && strings.Trim(h.Name, "/") == "state" {
				stateOwner = h.Uid
			}
		}
		slices.Sort(names)
		if want := []string{"app", "etc/group", "etc/passwd"}; !slices.Equal(names, want) {
			t.Errorf("%s holds the files %v, want %v", image, names, want)
		}
		// The binlog position's directory, which a new volume takes
		// with its owner: the program's user may write there.
		if program == "cache-invalidator" && stateOwner != 65532 {
			t.Errorf("%s: /state owned by %d (-1: none), want 65532", image, stateOwner)
		}
	}

	s := stack{testsupport.MustRedis(t), testsupport.MustMySQL(t), testsupport.MustKafka(t)}
	for _, p := range programs {
		name := filepath.Base(p.dir)
		t.Run(name, func(t *testing.T) {
			addr := testsupport.FreeAddr(t)
			env := s.env()
			env[p.listenVar] = addr
			if p.listenVar != "SECKILL_ADMIN_ADDR" {
				env["SECKILL_ADMIN_ADDR"] = testsupport.FreeAddr(t)
			}
			// The binlog position file, in a folder the container's user
			// can write, mounted at the same path.
			dir := t.TempDir()
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			env["SECKILL_BINLOG_POSITION_FILE"] = filepath.Join(dir, "position.json")
			args := append(containerRun(t), "-v", dir+":"+dir)
			for k, v := range env {
				args = append(args, "-e", k+"="+v)
			}
			id := strings.TrimSpace(podman(t, append(args, "localhost/seckill/"+name)...))
			t.Cleanup(func() { exec.Command("podman", "rm", "-f", id).Run() })
			body := testsupport.Eventually(t, "http://"+addr+"/readyz", 200, 30*time.Second)
			if !strings.Contains(body, `"status":"ready"`) {
				t.Fatalf("readyz body = %s\n%s", body, podman(t, "logs", id))
			}
			podman(t, "stop", "-t", "15", id)
			if code := strings.TrimSpace(podman(t, "inspect", id, "--format", "{{.State.ExitCode}}")); code != "0" {
				t.Fatalf("%s exited %s after SIGTERM, want 0\n%s", name, code, podman(t, "logs", id))
			}
		})
	}
}

package testsupport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// builds are the binaries MustBuild made in this test process, by
// package directory.
var builds struct {
	sync.Mutex
	dir  string
	bins map[string]string
}

// MustBuild compiles the main package in dir (relative to the test's
// working directory) once per test process and returns the binary's path:
// the tests that run the same program share it (a link takes seconds, and
// the e2e tests start the api and the order-writer dozens of times). A
// package whose tests use it removes the binaries in its TestMain
// (RemoveBuilds).
func MustBuild(tb testing.TB, dir string) string {
	tb.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		tb.Fatal(err)
	}
	builds.Lock()
	defer builds.Unlock()
	if bin, ok := builds.bins[abs]; ok {
		return bin
	}
	if builds.dir == "" {
		if builds.dir, err = os.MkdirTemp("", "seckill-test-bin-"); err != nil {
			tb.Fatal(err)
		}
		builds.bins = map[string]string{}
	}
	out := filepath.Join(builds.dir, filepath.Base(abs))
	// Built as make image builds the images' binaries (static, -trimpath):
	// the packages compiled for one are in the build cache for the other.
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build %s: %v\n%s", dir, err, msg)
	}
	builds.bins[abs] = out
	return out
}

// RemoveBuilds deletes the binaries MustBuild made: from TestMain, after
// the tests ran.
func RemoveBuilds() {
	builds.Lock()
	defer builds.Unlock()
	if builds.dir != "" {
		_ = os.RemoveAll(builds.dir)
	}
}

// FreeAddr is a loopback address with a port nobody listens on right now,
// chosen below the kernel's ephemeral range (32768 and up): a port the
// kernel hands out for ":0" is also the one it gives the next outgoing
// connection, so a program started on it a moment later could find it taken
// (CI saw "bind: address already in use" that way). The band 23000–26999
// stays clear of the stack's fixed ports, of the cluster buses (27001–27006)
// and of freeClusterPort's pairs.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	for range 100 {
		port := 23000 + rand.IntN(4000)
		if free(port) && handOut(port) {
			return "127.0.0.1:" + strconv.Itoa(port)
		}
	}
	tb.Fatal("no free loopback port in 23000–26999")
	return ""
}

// free reports whether nobody listens on the loopback port right now.
func free(port int) bool {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	_ = ln.Close()
	return true
}

// handOut reserves ports for the caller, unless one of them was handed out
// before in this test process: two parallel tests that drew the same free
// port, neither yet listening, both got it, and the second program's bind
// failed (make test saw it once in a run of the e2e package).
func handOut(ports ...int) bool {
	handed.Lock()
	defer handed.Unlock()
	for _, p := range ports {
		if handed.ports[p] {
			return false
		}
	}
	if handed.ports == nil {
		handed.ports = map[int]bool{}
	}
	for _, p := range ports {
		handed.ports[p] = true
	}
	return true
}

// handed are the ports handOut gave out in this process.
var handed struct {
	sync.Mutex
	ports map[int]bool
}

// Process is a program started by a test, its output kept for assertions.
type Process struct {
	cmd  *exec.Cmd
	out  *SyncBuffer
	done chan struct{}
	err  error
}

// SyncBuffer is a buffer safe for concurrent writers, for capturing the
// logs of code under test.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Start runs bin with exactly env (plus PATH and HOME); the process is
// killed when the test ends if it still runs.
func Start(tb testing.TB, bin string, env map[string]string, args ...string) *Process {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &Process{cmd: cmd, out: &SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", bin, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	tb.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if tb.Failed() {
			tb.Logf("output of %s:\n%s", filepath.Base(bin), withoutDebug(p.Output()))
		}
	})
	return p
}

// withoutDebug is a failed test's view of a program's output: a run at
// debug level logs a line per refused request, thousands in a failure
// test, and CI keeps only the end of a run's output, where they would bury
// the failure itself. A test that needs them reads Output.
func withoutDebug(out string) string {
	var b strings.Builder
	debug := 0
	for line := range strings.Lines(out) {
		if strings.Contains(line, " level=DEBUG ") {
			debug++
			continue
		}
		b.WriteString(line)
	}
	if debug > 0 {
		fmt.Fprintf(&b, "(%d debug lines left out)\n", debug)
	}
	return b.String()
}

// Output is everything the process wrote so far.
func (p *Process) Output() string { return p.out.String() }

// Signal sends sig to the process.
func (p *Process) Signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		tb.Fatalf("signal %v: %v", sig, err)
	}
}

// Wait is the process's exit code, or an error when it did not exit within
// timeout.
func (p *Process) Wait(timeout time.Duration) (int, error) {
	select {
	case <-p.done:
	case <-time.After(timeout):
		return -1, errors.New("process did not exit in time")
	}
	var exitErr *exec.ExitError
	if errors.As(p.err, &exitErr) {
		return exitErr.ExitCode(), nil
	}
	if p.err != nil {
		return -1, p.err
	}
	return 0, nil
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Get fetches url and returns its status and body; status 0 when nothing
// answered.
func Get(ctx context.Context, url string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// Eventually polls url until it answers status, or fails the test after
// timeout with the last answer.
func Eventually(tb testing.TB, url string, status int, timeout time.Duration) string {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	var code int
	var body string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		code, body = Get(ctx, url)
		cancel()
		if code == status {
			return body
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Fatalf("GET %s: want %d within %v, last answer %d %s", url, status, timeout, code, body)
	return ""
}

// Wait polls cond until it holds, failing the test after timeout with what
// it waited for.
func Wait(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	if !Poll(timeout, cond) {
		tb.Fatalf("waited %v for: %s", timeout, what)
	}
}

// Poll polls cond until it holds, for at most timeout, and reports whether
// it held: Wait for a caller that reports the failure itself (with what
// the condition last saw, or by the assertions that follow), that waits on
// a goroutine of its own, or for which a condition not met in time is an
// answer rather than a failure.
func Poll(timeout time.Duration, cond func() bool) bool {
	return PollEvery(timeout, 20*time.Millisecond, cond)
}

// PollEvery is Poll asking cond every interval: for a condition that costs
// the servers under test (a count over MySQL, a consumer group described,
// a page read), asked no more often than the test needs.
func PollEvery(timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
	return true
}

package lock_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/testsupport"
)

// startRedisNode runs a private redis-server, stopped when the test ends.
func startRedisNode(t *testing.T) (*redis.Client, *exec.Cmd) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server is not installed: the Redlock test runs 3 nodes of its own (deploy/local/stack.sh install puts it there)")
	}
	addr := testsupport.FreeAddr(t)
	port := addr[strings.LastIndex(addr, ":")+1:]
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not answer", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c, cmd
}

// Redlock on 3 nodes: it holds with all up and with 1 down (a majority
// answers), excludes a second holder, and refuses with 2 down.
func TestRedlockMajority(t *testing.T) {
	var clients []redis.Scripter
	var procs []*exec.Cmd
	for range 3 {
		c, p := startRedisNode(t)
		clients = append(clients, c)
		procs = append(procs, p)
	}
	rl := lock.NewRedlock("", clients...)
	ctx := context.Background()

	h, err := rl.Acquire(ctx, "job", time.Second)
	if err != nil {
		t.Fatalf("3 of 3 up: %v", err)
	}
	if time.Until(h.Validity) <= 0 || time.Until(h.Validity) > time.Second {
		t.Fatalf("validity %v", time.Until(h.Validity))
	}
	if _, err := rl.Acquire(ctx, "job", time.Second); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("a second holder: %v", err)
	}
	h.Release(ctx)

	_ = procs[0].Process.Kill()
	_ = procs[0].Wait()
	h, err = rl.Acquire(ctx, "job", time.Second)
	if err != nil {
		t.Fatalf("2 of 3 up: %v", err)
	}
	if _, err := rl.Acquire(ctx, "job", time.Second); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("a second holder with 2 of 3 up: %v", err)
	}
	h.Release(ctx)

	_ = procs[1].Process.Kill()
	_ = procs[1].Wait()
	if _, err := rl.Acquire(ctx, "job", time.Second); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("1 of 3 up: %v, want ErrNotObtained", err)
	}
	// The refused attempt released what it took on the live node.
	if n := clients[2].(*redis.Client).Exists(ctx, "lock:{job}").Val(); n != 0 {
		t.Fatal("a refused Redlock left its key on the live node")
	}
}

package lock_test

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/testsupport"
)

// startRedisNode runs a private redis-server, stopped when the test ends.
func startRedisNode(t *testing.T) (*redis.Client, *exec.Cmd) {
	r, cmd := testsupport.MustPrivateRedis(t)
	return r.Node(t), cmd
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
	// The refused attempt released what it took on the live node: no
	// owner is left (only, briefly, the id of that release).
	if owner := clients[2].(*redis.Client).HGet(ctx, "lock:{job}", "owner").Val(); owner != "" {
		t.Fatalf("a refused Redlock left its hold (owner %s) on the live node", owner)
	}
}

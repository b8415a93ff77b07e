package lock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/redisconn"
	"github.com/seckill/seckill/internal/testsupport"
)

var patient = lock.Options{TTL: 2 * time.Second, RetryMin: time.Millisecond, RetryMax: 20 * time.Millisecond, RetryFor: 30 * time.Second}

// increment is a critical section that loses updates unless it runs alone:
// read, pause, write.
func increment(ctx context.Context, rdb redis.UniversalClient, key string) error {
	n, err := rdb.Get(ctx, key).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	time.Sleep(time.Millisecond) // the pause is the point: a window for a second writer to lose an update in
	return rdb.Set(ctx, key, n+1, 0).Err()
}

func TestMutualExclusionAcrossGoroutines(t *testing.T) {
	r := testsupport.MustRedis(t)
	c := lock.New(r.Client, r.Prefix)
	ctx := context.Background()
	counter := r.Key("counter")
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for range 20 {
				l, err := c.Acquire(ctx, "count", patient)
				if err != nil {
					t.Error(err)
					return
				}
				if err := increment(ctx, r.Client, counter); err != nil {
					t.Error(err)
				}
				if err := l.Release(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if n, _ := r.Client.Get(ctx, counter).Int(); n != 400 {
		t.Fatalf("counter %d after 400 locked increments: the lock let two in", n)
	}
}

// The helper process: the test binary run again, incrementing under the
// lock named by the environment.
func TestMain(m *testing.M) {
	if addr, cluster := os.Getenv("LOCK_HELPER_REDIS"), os.Getenv("LOCK_HELPER_CLUSTER"); addr != "" || cluster != "" {
		cfg := redisconn.Config{Addr: addr}
		if cluster != "" {
			cfg.Cluster = strings.Split(cluster, ",")
		}
		os.Exit(helper(cfg, os.Getenv("LOCK_HELPER_PREFIX")))
	}
	os.Exit(m.Run())
}

func helper(cfg redisconn.Config, prefix string) int {
	rdb, err := redisconn.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer rdb.Close()
	c := lock.New(rdb, prefix)
	ctx := context.Background()
	for range 100 {
		l, err := c.Acquire(ctx, "count", patient)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := increment(ctx, rdb, prefix+"counter"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := l.Release(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

func TestMutualExclusionAcrossProcesses(t *testing.T) {
	r := testsupport.MustRedis(t)
	var cmds []*exec.Cmd
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "LOCK_HELPER_REDIS="+r.Addr, "LOCK_HELPER_CLUSTER="+strings.Join(r.Cluster, ","), "LOCK_HELPER_PREFIX="+r.Prefix)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper process: %v", err)
		}
	}
	if n, _ := r.Client.Get(context.Background(), r.Key("counter")).Int(); n != 200 {
		t.Fatalf("counter %d after 2 processes × 100 locked increments", n)
	}
}

func TestOwnershipReentrancyAndRetry(t *testing.T) {
	r := testsupport.MustRedis(t)
	c := lock.New(r.Client, r.Prefix)
	ctx := context.Background()

	t.Run("NonOwnerReleaseDoesNothing", func(t *testing.T) {
		a, err := c.Acquire(ctx, "own", lock.Options{TTL: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond) // the test is about A's 100 ms TTL running out
		b, err := c.Acquire(ctx, "own", lock.Options{TTL: 5 * time.Second})
		if err != nil {
			t.Fatalf("after A's TTL: %v", err)
		}
		if err := a.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Fatalf("A's late release: %v, want ErrNotHeld", err)
		}
		if _, err := c.Acquire(ctx, "own", lock.Options{TTL: time.Second}); !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("A's release freed B's lock: %v", err)
		}
		if err := b.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("Reentrant", func(t *testing.T) {
		a, err := c.Acquire(ctx, "re", lock.Options{TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		again, err := a.Reenter(ctx, lock.Options{TTL: 5 * time.Second})
		if err != nil || again.Fence != a.Fence {
			t.Fatalf("re-enter: %v, fence %d vs %d", err, again.Fence, a.Fence)
		}
		if err := again.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Acquire(ctx, "re", lock.Options{TTL: time.Second}); !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("one release of two holds freed the lock: %v", err)
		}
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if l, err := c.Acquire(ctx, "re", lock.Options{TTL: time.Second}); err != nil {
			t.Fatalf("after both releases: %v", err)
		} else {
			l.Release(ctx)
		}
	})
	t.Run("BoundedRetry", func(t *testing.T) {
		a, _ := c.Acquire(ctx, "busy", lock.Options{TTL: 5 * time.Second})
		start := time.Now()
		_, err := c.Acquire(ctx, "busy", lock.Options{TTL: time.Second, RetryMin: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond, RetryFor: 300 * time.Millisecond})
		if !errors.Is(err, lock.ErrNotObtained) || time.Since(start) > 5*time.Second {
			t.Fatalf("busy lock: %v after %v", err, time.Since(start))
		}
		go func() {
			time.Sleep(100 * time.Millisecond) // the release comes while the acquire below retries: the test is about that retry
			a.Release(ctx)
		}()
		b, err := c.Acquire(ctx, "busy", patient)
		if err != nil {
			t.Fatalf("retrying while the holder releases: %v", err)
		}
		b.Release(ctx)
	})
}

func TestWatchdog(t *testing.T) {
	r := testsupport.MustRedis(t)
	c := lock.New(r.Client, r.Prefix)
	ctx := context.Background()
	// A TTL that a stalled goroutine on a busy machine cannot outlast by
	// accident: the watchdog extends every TTL/3.
	opt := lock.Options{TTL: time.Second, Watchdog: true}

	l, err := c.Acquire(ctx, "long", opt)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * opt.TTL) // three TTLs of work: the test is about the watchdog outliving the TTL
	if _, err := c.Acquire(ctx, "long", lock.Options{TTL: time.Second}); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("the long holder lost its lock despite the watchdog: %v", err)
	}
	if l.Context().Err() != nil {
		t.Fatal("the holder's context was cancelled while it held the lock")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	lost, err := c.Acquire(ctx, "lost", opt)
	if err != nil {
		t.Fatal(err)
	}
	r.Client.Del(ctx, r.Key("lock:{lost}")) // expired, say, during a Redis failover
	select {
	case <-lost.Context().Done():
		if !errors.Is(context.Cause(lost.Context()), lock.ErrNotHeld) {
			t.Fatalf("cause %v, want ErrNotHeld", context.Cause(lost.Context()))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watchdog did not tell the holder that its lock was gone")
	}
}

// A holder paused past its TTL (a GC pause, Kleppmann's example) carries a smaller
// fencing token than the next holder; the resource refuses its late write.
func TestFencingRejectsAPausedHolder(t *testing.T) {
	r := testsupport.MustRedis(t)
	m := testsupport.MustEmptyMySQL(t)
	c := lock.New(r.Client, r.Prefix)
	ctx := context.Background()
	if _, err := m.DB.Exec("CREATE TABLE resource (id INT PRIMARY KEY, value VARCHAR(16), fence BIGINT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	m.DB.Exec("INSERT INTO resource VALUES (1, 'initial', 0)")
	write := func(value string, fence int64) bool {
		res, err := m.DB.Exec("UPDATE resource SET value = ?, fence = ? WHERE id = 1 AND fence < ?", value, fence, fence)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := res.RowsAffected()
		return n == 1
	}

	a, err := c.Acquire(ctx, "fenced", lock.Options{TTL: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // A is paused past its 100 ms TTL: the test is about that pause
	b, err := c.Acquire(ctx, "fenced", lock.Options{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if b.Fence <= a.Fence {
		t.Fatalf("fences %d then %d: not increasing", a.Fence, b.Fence)
	}
	if !write("from B", b.Fence) {
		t.Fatal("the current holder's write was refused")
	}
	if write("from A", a.Fence) {
		t.Fatal("the paused holder's write with an old fence was accepted")
	}
	var value string
	m.DB.QueryRow("SELECT value FROM resource WHERE id = 1").Scan(&value)
	if value != "from B" {
		t.Fatalf("resource holds %q", value)
	}
	b.Release(ctx)
}

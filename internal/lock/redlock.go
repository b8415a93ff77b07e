package lock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
)

// Redlock takes a lock on a majority of N independent Redis nodes, as in
// Redis' own Redlock description: try every node with a short timeout; the lock is
// held if a majority said yes and time is left of the TTL after the
// attempt and the clock drift; otherwise it is released on every node.
//
// It has no fencing token: each node counts on its own, so no token is
// ordered across holders (Kleppmann's critique of Redlock). Where a resource
// must refuse a stale holder, use Client on one Redis and its Fence.
type Redlock struct {
	nodes  []redis.Scripter
	prefix string
}

// NewRedlock locks across nodes.
func NewRedlock(prefix string, nodes ...redis.Scripter) *Redlock {
	return &Redlock{nodes: nodes, prefix: prefix}
}

// RedlockHold is a lock held on a majority of the nodes until Validity.
type RedlockHold struct {
	r        *Redlock
	key      string
	owner    string
	Validity time.Time
}

// Acquire tries once on every node.
func (r *Redlock) Acquire(ctx context.Context, name string, ttl time.Duration) (*RedlockHold, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("redlock: owner token: %w", err)
	}
	h := &RedlockHold{r: r, key: r.prefix + "lock:{" + name + "}", owner: hex.EncodeToString(b)}
	start := time.Now()
	// Each node gets a small share of the TTL, so a dead node cannot eat
	// the validity.
	perNode := max(ttl/20, 20*time.Millisecond)
	var mu sync.Mutex
	var wg sync.WaitGroup
	got := 0
	for _, n := range r.nodes {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, perNode)
			defer cancel()
			res, err := lua.LockAcquire.Run(nctx, n, []string{h.key, h.key + ":fence"}, h.owner, ttl.Milliseconds(), h.owner).Int64Slice()
			if err == nil && res[0] == 1 {
				mu.Lock()
				got++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	drift := ttl/100 + 2*time.Millisecond
	validity := ttl - time.Since(start) - drift
	if got >= len(r.nodes)/2+1 && validity > 0 {
		h.Validity = time.Now().Add(validity)
		return h, nil
	}
	h.Release(context.WithoutCancel(ctx))
	return nil, ErrNotObtained
}

// Release releases the lock on every node (also those that seemed to say
// no: their answer may have been lost on the way back).
func (h *RedlockHold) Release(ctx context.Context) {
	var wg sync.WaitGroup
	for _, n := range h.r.nodes {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			// A hold is taken and released once: its owner token is
			// the id of both calls.
			lua.LockRelease.Run(nctx, n, []string{h.key}, h.owner, h.owner, releaseMemory.Milliseconds())
		})
	}
	wg.Wait()
}

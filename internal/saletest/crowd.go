package saletest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/testsupport"
)

// HotSale is a sale of one voucher in n buckets on the test's Redis (the
// cluster in make test's cluster pass).
func HotSale(t testing.TB, stock int64, n int) (*testsupport.Redis, *Sales, int64) {
	t.Helper()
	r := testsupport.MustRedis(t)
	store := New(r.Client, r.Prefix)
	voucher := 1 + rand.Int64N(1<<40)
	if err := store.Gate.WarmBuckets(context.Background(), voucher, stock, n, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	return r, store, voucher
}

// Crowd is what a crowd of buyers got from a sale: every buyer tries until
// the gate accepts or refuses for good, and tries again on "moving stock".
type Crowd struct {
	mu       sync.Mutex
	Accepted map[int64]int64 // user -> order
	// SoldOutAt are the moments "sold out" answers came back; LastAccept
	// the latest acceptance, on the same machine's clock.
	SoldOutAt  []time.Time
	LastAccept time.Time
	Moving     atomic.Int64 // "moving stock" answers
}

// Buy has users buy voucher, workers at a time.
func Buy(t testing.TB, store *Sales, voucher int64, users []int64, workers int) *Crowd {
	t.Helper()
	c := &Crowd{Accepted: map[int64]int64{}}
	var next atomic.Int64
	var ids atomic.Int64
	ids.Store(rand.Int64N(1 << 50))
	var g errgroup.Group
	for range workers {
		g.Go(func() error {
			for {
				i := next.Add(1) - 1
				if i >= int64(len(users)) {
					return nil
				}
				for tries := 0; ; tries++ {
					oid := ids.Add(1)
					d, err := store.Gate.Try(context.Background(), voucher, users[i], oid)
					if err != nil {
						return err
					}
					if errors.Is(d.Err, order.ErrMovingStock) {
						c.Moving.Add(1)
						if tries == 1000 {
							return fmt.Errorf("user %d told units are moving 1,000 times: they never arrive", users[i])
						}
						continue
					}
					c.mu.Lock()
					switch {
					case d.Err == nil:
						if _, twice := c.Accepted[users[i]]; twice {
							c.mu.Unlock()
							return errors.New("a user was accepted twice")
						}
						c.Accepted[users[i]] = oid
						c.LastAccept = d.AcceptedAt
					case errors.Is(d.Err, order.ErrSoldOut):
						c.SoldOutAt = append(c.SoldOutAt, time.Now())
					default:
						c.mu.Unlock()
						return d.Err
					}
					c.mu.Unlock()
					break
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	return c
}

// Early counts the "sold out" answers that came back before the last unit
// was accepted: each was a lie.
func (c *Crowd) Early() int {
	n := 0
	for _, at := range c.SoldOutAt {
		if at.Before(c.LastAccept.Add(-time.Millisecond)) {
			n++
		}
	}
	return n
}

// HomedIn is the first count user ids from 1<<30 up whose home is bucket
// b of n: the same ids on every call, so that a test can take the next
// ones by asking for more.
func HomedIn(n, b, count int) []int64 {
	var users []int64
	for u := int64(1 << 30); len(users) < count; u++ {
		if salestate.Home(u, n) == b {
			users = append(users, u)
		}
	}
	return users
}

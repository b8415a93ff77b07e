package salestate_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/internal/redisconn"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
)

// An API instance remembers a sale's layout; the sale is made anew under
// the same id with one bucket. Its old buckets gone, the instance reads the
// directory again at its next attempt a second on (it had answered "no
// such voucher" for as long as it ran); its old buckets still there (an
// ended sale's keys wait for their expiry), it sells the new sale once the
// layout it remembers is older than the layout's time to live.
func TestARememberedLayoutFollowsTheSaleMadeAnew(t *testing.T) {
	r := testsupport.MustRedis(t)
	ctx := context.Background()
	api, admin := saletest.New(r.Client, r.Prefix), saletest.New(r.Client, r.Prefix)
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	api.SetLayoutClock(func() time.Time { return time.Unix(0, now.Load()) })
	begin, end := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	for i, oldGone := range []bool{true, false} {
		voucher := 1 + rand.Int64N(1<<40)
		if err := admin.Gate.WarmBuckets(ctx, voucher, 30, 3, begin, end); err != nil {
			t.Fatal(err)
		}
		if d, err := api.Gate.Try(ctx, voucher, 1, 1); err != nil || d.Err != nil {
			t.Fatalf("the first sale: %+v %v", d, err)
		}
		if oldGone {
			for b := range 3 {
				k := salestate.BucketKeys(r.Prefix, voucher, 3, b)
				r.Client.Del(ctx, k.Voucher, k.Buyers, k.Pending, k.PendingAt)
			}
		}
		if err := admin.Gate.WarmBuckets(ctx, voucher, 5, 1, begin, end); err != nil {
			t.Fatal(err)
		}
		if oldGone {
			// A lost bucket makes the gate read the directory at most once
			// a second.
			now.Add(int64(1100 * time.Millisecond))
		} else {
			now.Add(int64(11 * time.Second))
		}
		user := int64(100 + i)
		d, err := api.Gate.Try(ctx, voucher, user, 2)
		if err != nil || d.Err != nil {
			t.Fatalf("old buckets gone %v: the sale made anew: %+v %v, want accepted", oldGone, d, err)
		}
		if s := r.Client.HGet(ctx, salestate.BucketKeys(r.Prefix, voucher, 1, 0).Voucher, salestate.FieldStock).Val(); s != "4" {
			t.Fatalf("old buckets gone %v: the new sale holds %s units, want 4: the unit came from the old sale", oldGone, s)
		}
	}
}

// The slot a tag gets is Redis Cluster's: the examples of its
// specification, and on a cluster the server's own answer.
func TestKeySlotIsTheClustersSlot(t *testing.T) {
	for _, c := range []struct {
		key  string
		slot int
	}{{"foo", 12182}, {"bar", 5061}, {"hello", 866}, {"", 0}} {
		if got := redisconn.KeySlot(c.key); got != c.slot {
			t.Errorf("slot of %q is %d, want %d", c.key, got, c.slot)
		}
	}
	r := testsupport.MustRedis(t)
	cluster, ok := r.Client.(*redis.ClusterClient)
	if !ok {
		return
	}
	for _, tag := range salestate.LayoutOf(12345, 5).Tags {
		want, err := cluster.ClusterKeySlot(context.Background(), tag).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := redisconn.KeySlot(tag); got != int(want) {
			t.Errorf("slot of %q is %d, the cluster says %d", tag, got, want)
		}
	}
}

// A sale of one bucket keeps the layout every sale had: the tag {id}.
func TestOneBucketIsTodaysLayout(t *testing.T) {
	lay := salestate.LayoutOf(42, 1)
	if !slices.Equal(lay.Tags, []string{"42"}) {
		t.Fatalf("tags %v, want [42]", lay.Tags)
	}
	if salestate.BucketKeys("p:", 42, 1, 0) != salestate.KeysFor("p:", 42) {
		t.Fatal("bucket 0 of a one-bucket sale is not the voucher's keys")
	}
}

// Each bucket's slot is in its own N-th of the slot space, which a cluster
// of N masters gives one master each.
func TestBucketsLandOnDifferentMasters(t *testing.T) {
	for _, n := range []int{2, 3, 5, 16} {
		for _, id := range []int64{1, 77, 1 << 40} {
			lay := salestate.LayoutOf(id, n)
			for b, tag := range lay.Tags {
				if s := redisconn.KeySlot(tag); s < b*16384/n || s >= (b+1)*16384/n {
					t.Errorf("voucher %d, %d buckets: bucket %d's slot %d is outside its range", id, n, b, s)
				}
			}
		}
	}
	r := testsupport.MustRedis(t)
	if len(r.Cluster) == 0 {
		return
	}
	var keys []string
	for b := range 3 {
		keys = append(keys, salestate.BucketKeys(r.Prefix, 99, 3, b).Voucher)
	}
	if got := r.MastersOf(t, keys...); got != 3 {
		t.Fatalf("the 3 buckets are on %d masters, want 3 (the test cluster has 3)", got)
	}
}

// Users are spread over the buckets, and a user's home never changes.
func TestHomeSpreadsUsers(t *testing.T) {
	const n, users = 3, 30000
	count := make([]int, n)
	for u := range int64(users) {
		b := salestate.Home(u, n)
		if b != salestate.Home(u, n) || b < 0 || b >= n {
			t.Fatalf("user %d: home %d", u, b)
		}
		count[b]++
	}
	for b, c := range count {
		if c < users/n*9/10 || c > users/n*11/10 {
			t.Errorf("bucket %d is home to %d of %d users: %v", b, c, users, count)
		}
	}
}

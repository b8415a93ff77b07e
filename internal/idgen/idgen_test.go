package idgen_test

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/idgen"
	"github.com/seckill/seckill/internal/testsupport"
)

// Several generators (as several API processes) share one Redis: their ids
// never collide, and each generator's ids increase.
func TestIDsAreUniqueAcrossGeneratorsAndIncrease(t *testing.T) {
	r := testsupport.MustRedis(t)
	kind := r.Key("order")
	ctx := context.Background()
	const gens, perGen = 4, 5000
	ids := make([][]int64, gens)
	var wg sync.WaitGroup
	for g := range gens {
		gen := idgen.New(r.Client, kind, 100)
		wg.Go(func() {
			for range perGen {
				id, err := gen.Next(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				ids[g] = append(ids[g], id)
			}
		})
	}
	wg.Wait()
	seen := map[int64]bool{}
	for g := range gens {
		for i, id := range ids[g] {
			if seen[id] {
				t.Fatalf("id %d made twice", id)
			}
			seen[id] = true
			if i > 0 && id <= ids[g][i-1] {
				t.Fatalf("generator %d: id %d after %d", g, id, ids[g][i-1])
			}
			if id <= 0 {
				t.Fatalf("id %d not positive", id)
			}
		}
	}
	if len(seen) != gens*perGen {
		t.Fatalf("%d ids, want %d", len(seen), gens*perGen)
	}
	// A restarted process leases a new block: no id of before comes back.
	restarted := idgen.New(r.Client, kind, 100)
	id, err := restarted.Next(ctx)
	if err != nil || seen[id] {
		t.Fatalf("after a restart: %d, %v", id, err)
	}
	// The top bits are the seconds since the epoch: the id was made now.
	if got := idgen.Epoch.Add(time.Duration(id>>32) * time.Second); time.Since(got) > 5*time.Second || time.Until(got) > time.Second {
		t.Fatalf("id time %v, want now", got)
	}
}

// The day's counter has no expiry while it counts, so that an eviction
// policy limited to keys with a TTL can never take it (ids would repeat);
// yesterday's expires.
func TestTodaysCounterCannotBeEvicted(t *testing.T) {
	r := testsupport.MustRedis(t)
	ctx := context.Background()
	kind := r.Key("order")
	day := time.Now().UTC()
	today, yesterday := "id:"+kind+":"+day.Format("20060102"), "id:"+kind+":"+day.AddDate(0, 0, -1).Format("20060102")
	r.Client.Set(ctx, today, 0, time.Hour) // as an older version left it
	r.Client.Set(ctx, yesterday, 5000, 0)
	if _, err := idgen.New(r.Client, kind, 100).From(0).Next(ctx); err != nil {
		t.Fatal(err)
	}
	if ttl := r.Client.TTL(ctx, today).Val(); ttl != -1 {
		t.Fatalf("today's counter expires in %v, want no expiry", ttl)
	}
	if ttl := r.Client.TTL(ctx, yesterday).Val(); ttl <= 0 {
		t.Fatalf("yesterday's counter: TTL %v, want an expiry", ttl)
	}
}

// A counter that rolled back with writes Redis lost would hand out ids
// again: the first lease under a new replication id skips a margin, so
// ids stay unique although the counter went back.
func TestLeaseUnderANewReplicationIDSkipsAMargin(t *testing.T) {
	r := testsupport.MustRedis(t)
	ctx := context.Background()
	kind, counter, stamp := todaysLease(t, r)
	g := idgen.New(r.Client, kind, 10).From(0).WithReplicationStamp()
	seen := map[int64]bool{}
	var last int64
	take := func(n int) {
		for range n {
			id, err := g.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if seen[id] {
				t.Fatalf("id %d handed out twice", id)
			}
			seen[id], last = true, id
		}
	}
	take(25)
	if got := r.Client.Get(ctx, stamp).Val(); len(got) != 40 {
		t.Fatalf("lease stamped %q, want this Redis's 40-character replication id", got)
	}
	before, _ := r.Client.Get(ctx, counter).Int64()
	take(10) // under the same replication id the next block follows on
	if after, _ := r.Client.Get(ctx, counter).Int64(); after != before+10 {
		t.Fatalf("counter %d after one more block under the same id, was %d: want the next block", after, before)
	}

	// A failover to a replica that missed the last lease: the counter is
	// back where it was before it, and its stamp is another server's id.
	r.Client.Set(ctx, counter, before, 0)
	r.Client.Set(ctx, stamp, "another-master", 0)
	take(15)
	if seq := last & (1<<32 - 1); seq < before+idgen.LeaseMargin {
		t.Fatalf("sequence %d after the rollback, want above %d + the margin", seq, before)
	}
}

// Right after a failover, an API instance still holds the old master's
// replication id for up to one epoch interval, and the stamp the promoted
// replica copied from its old master is that same id: a lease checked
// against the caller's id skips no margin and repeats ids. The script
// compares the stamp with the server's own id instead.
func TestLeaseRightAfterAFailoverSkipsAMarginWhateverTheCallerThinks(t *testing.T) {
	r := testsupport.MustRedis(t)
	ctx := context.Background()
	kind, counter, stamp := todaysLease(t, r)
	const oldMaster = "0123456789abcdef0123456789abcdef01234567"
	// The promoted replica: the counter and the stamp as its old master
	// last replicated them, its own replication id new.
	r.Client.Set(ctx, counter, 500, 0)
	r.Client.Set(ctx, stamp, oldMaster, 0)
	g := idgen.New(r.Client, kind, 10).From(0).WithReplicationStamp()
	id, err := g.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if seq := id & (1<<32 - 1); seq < 500+idgen.LeaseMargin {
		t.Fatalf("sequence %d right after the failover, want above 500 + the margin", seq)
	}
}

// todaysLease is the test's id kind, today's counter of it and the
// counter's replication stamp (deleted when the test ends).
func todaysLease(t *testing.T, r *testsupport.Redis) (kind, counter, stamp string) {
	kind = r.Key("order")
	counter = "id:" + kind + ":" + time.Now().UTC().Format("20060102")
	stamp = "{" + counter + "}:epoch"
	t.Cleanup(func() { r.Client.Del(context.Background(), stamp) })
	return kind, counter, stamp
}

// The master of a generator's counter dies: the generator leases its next
// block from another counter, on another master, at once, rather than
// stopping every order until the cluster fails the master over; no id is
// handed out twice.
func TestALeaseGoesOnWhenItsCountersMasterDies(t *testing.T) {
	cl := testsupport.MustPrivateCluster(t)
	ctx := context.Background()
	kind := cl.Key("order")
	day := time.Now().UTC().Format("20060102")
	masters := map[string]bool{}
	for k := range idgen.Counters {
		masters[cl.MasterOf(t, idgen.CounterKey(kind, day, k))] = true
	}
	if len(masters) < 2 {
		t.Fatalf("the %d counters live on %d master(s), want several", idgen.Counters, len(masters))
	}
	const first = 1
	g := idgen.New(cl.Client, kind, 10).From(first)
	seen := map[int64]bool{}
	take := func(n int) (counters map[int64]int) {
		counters = map[int64]int{}
		for range n {
			id, err := g.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if seen[id] {
				t.Fatalf("id %d handed out twice", id)
			}
			seen[id] = true
			counters[(id&(1<<32-1))>>30]++
		}
		return counters
	}
	if got := take(25); got[first] != 25 {
		t.Fatalf("ids by counter %v, want all of counter %d", got, first)
	}
	victim := cl.MasterOf(t, idgen.CounterKey(kind, day, first))
	if err := cl.Nodes[victim].Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// A generator that waited for the failover would take from the same
	// counter again, on the promoted replica.
	got := take(25)
	if got[first] > 5 {
		t.Fatalf("ids by counter %v: after counter %d's master died, want them from the others (the leased block aside)", got, first)
	}
}

// The master of a generator's counter freezes (SIGSTOP: no answer, no
// closed connection): the lease leaves it after leaseWait for the next
// counter, within a deadline shorter than the production client's
// timeouts and retries, since every order of the instance waits for the
// lease; no id is handed out twice.
func TestALeaseGoesOnWhenItsCountersMasterFreezes(t *testing.T) {
	cl := testsupport.MustPrivateCluster(t)
	kind := cl.Key("order")
	day := time.Now().UTC().Format("20060102")
	// The counter whose master keeps the fewest others: on three masters
	// two counters may share one, and the lease leaves each in turn.
	on := map[string][]int{}
	for k := range idgen.Counters {
		m := cl.MasterOf(t, idgen.CounterKey(kind, day, k))
		on[m] = append(on[m], k)
	}
	first := 0
	for k := range idgen.Counters {
		if len(on[cl.MasterOf(t, idgen.CounterKey(kind, day, k))]) < len(on[cl.MasterOf(t, idgen.CounterKey(kind, day, first))]) {
			first = k
		}
	}
	g := idgen.New(cl.Client, kind, 10).From(first)
	seen := map[int64]bool{}
	take := func(n int) (counters map[int64]int) {
		counters = map[int64]int{}
		for range n {
			// Shorter than one try of the client's (its 1 s read timeout)
			// on a master that does not answer.
			ctx, cancel := context.WithTimeout(context.Background(), 900*time.Millisecond)
			id, err := g.Next(ctx)
			cancel()
			if err != nil {
				t.Fatalf("an id while counter %d's master is frozen: %v", first, err)
			}
			if seen[id] {
				t.Fatalf("id %d handed out twice", id)
			}
			seen[id] = true
			counters[(id&(1<<32-1))>>30]++
		}
		return counters
	}
	if got := take(15); got[int64(first)] != 15 {
		t.Fatalf("ids by counter %v, want all of counter %d", got, first)
	}
	victim := cl.MasterOf(t, idgen.CounterKey(kind, day, first))
	proc := cl.Nodes[victim].Process
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proc.Signal(syscall.SIGCONT) })
	if got := take(25); got[int64(first)] > 5 {
		t.Fatalf("ids by counter %v: with counter %d's master frozen, want them from the others (its leased block aside)", got, first)
	}
	t.Logf("counters by master %v; counter %d's frozen", on, first)
}

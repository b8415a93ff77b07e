package gate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/lua"
)

// ErrNotSent is the error of an attempt that never reached Redis: the call
// ahead of it failed without a reply from the bucket's master (a timeout, a
// broken connection, the pool's timeout, a panic). The attempt took
// nothing; the api still answers it as undecided, since the buyer's earlier
// attempt, in the call that got no answer, may have taken a unit, and the
// next answer says so.
var ErrNotSent = errors.New("not sent: the call ahead of it failed without a reply from Redis")

// errLeaderPanicked is the answer of a batch whose call panicked.
var errLeaderPanicked = errors.New("the gate call of this batch panicked")

// tries sends the concurrent attempts on one bucket as batches, the way a
// database commits a group: the first attempt on an idle bucket goes at
// once, and those that arrive while a call is in flight go together in
// the next. A crowd therefore costs one script call per round trip rather
// than one per buyer — the call's fixed cost, on the master and in the
// client, was most of an attempt's — while a lone buyer waits for no timer.
// One call per bucket is in flight at a time: a bucket's attempts are
// serialised by its master anyway.
//
// An attempt waits for its answer whatever its context says (the call is
// bounded by the client's timeouts): it cannot leave a batch it is in, and
// one told to lead the next batch must lead it. A call that fails without
// a reply fails every attempt queued behind it at once, unsent, so that a
// stalled master costs the queue one timeout, not one per batch. The queue
// itself is not bounded: a crowd at a sale's opening is what the gate is
// for, and a master that answers drains it a batch per round trip.
type tries struct {
	mu     sync.Mutex
	queues map[string]*tryQueue
	calls  atomic.Int64 // script calls made, for the tests that count batches
}

// tryQueue is one bucket's attempts waiting for the call in flight.
type tryQueue struct {
	waiting []*attempt
	busy    bool // a leader is running a batch, or is told to
}

type attempt struct {
	user, order string
	trace       string
	reply       []int64
	err         error
	finished    bool          // under tries.mu
	wake        chan struct{} // finished, or the attempt leads the next batch
}

// try decides one attempt on the bucket whose keys are keys, through a
// batch: its four numbers. The batch runs under the leader's context, made
// uncancellable so that one buyer who leaves does not fail the others.
func (t *tries) try(ctx context.Context, rdb redis.Scripter, keys []string, n int, user, order, trace string) ([]int64, error) {
	a := &attempt{user: user, order: order, trace: trace, wake: make(chan struct{}, 1)}
	queue := keys[0] + "/" + strconv.Itoa(n)
	t.mu.Lock()
	if t.queues == nil {
		t.queues = map[string]*tryQueue{}
	}
	q := t.queues[queue]
	if q == nil {
		q = &tryQueue{}
		t.queues[queue] = q
	}
	q.waiting = append(q.waiting, a)
	lead := !q.busy
	q.busy = true
	t.mu.Unlock()
	if !lead {
		<-a.wake
		t.mu.Lock()
		finished := a.finished
		t.mu.Unlock()
		if finished {
			return a.reply, a.err
		}
	}
	// Leading: a is at the head of the queue, so first in its batch.
	t.mu.Lock()
	batch := q.waiting[:min(len(q.waiting), salestate.MaxBatch)]
	q.waiting = q.waiting[len(batch):]
	t.mu.Unlock()
	done := false
	defer func() {
		// A panic in the call must not leave the bucket busy for ever, its
		// batch and those queued behind it waiting.
		if !done {
			t.finish(queue, q, batch, nil, errLeaderPanicked)
		}
	}()
	t.calls.Add(1)
	replies, err := runBatch(context.WithoutCancel(ctx), rdb, keys, n, batch)
	t.finish(queue, q, batch, replies, err)
	done = true
	return a.reply, a.err
}

// finish answers a batch and hands the queue on: to the oldest waiting
// attempt, which leads the next batch, or to no one. A call that failed
// without a reply from Redis (a timeout, a broken connection, the pool's
// timeout, a panic; not a script error or a redirection, which are
// replies) also answers every waiting attempt as not sent: they would
// each wait for a call of their own to fail the same way.
func (t *tries) finish(queue string, q *tryQueue, batch []*attempt, replies []int64, err error) {
	var unsent []*attempt
	t.mu.Lock()
	for i, b := range batch {
		b.err = err
		if err == nil {
			b.reply = replies[4*i : 4*i+4]
		}
		b.finished = true
	}
	var reply redis.Error
	if err != nil && !errors.As(err, &reply) {
		unsent, q.waiting = q.waiting, nil
		for _, w := range unsent {
			w.err, w.finished = ErrNotSent, true
		}
	}
	if len(q.waiting) > 0 {
		q.waiting[0].wake <- struct{}{}
	} else {
		q.busy = false
		delete(t.queues, queue)
	}
	t.mu.Unlock()
	for _, b := range batch[1:] {
		b.wake <- struct{}{}
	}
	for _, w := range unsent {
		w.wake <- struct{}{}
	}
}

// runBatch is one call of the gate script for a batch: its four numbers
// per attempt, in order.
func runBatch(ctx context.Context, rdb redis.Scripter, keys []string, n int, batch []*attempt) ([]int64, error) {
	args := make([]any, 0, 1+3*len(batch))
	args = append(args, n)
	for _, a := range batch {
		args = append(args, a.user, a.order, a.trace)
	}
	res, err := lua.Seckill.Run(ctx, rdb, keys, args...).Int64Slice()
	if err != nil {
		return nil, err
	}
	if len(res) != 4*len(batch) {
		return nil, fmt.Errorf("%d numbers for %d attempts: %v", len(res), len(batch), res)
	}
	return res, nil
}

package ratelimit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Local checks limits in this process only, with token buckets
// (golang.org/x/time/rate): no Redis round trip per request, at the price of
// a looser bound, since each of N API instances allows the limit on its
// own (at most N times the limit in all, fewer when a load balancer keeps
// a client on one instance). It suits limits that guard the servers
// against floods where the business rule is enforced elsewhere, like the
// flash sale's (the gate allows one order per user whatever the rate); a
// limit that must hold exactly across instances, like login codes', stays
// in Redis (Limiter).
type Local struct {
	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	lim    *rate.Limiter
	period time.Duration
	last   time.Time
}

// sweepEvery is how often idle buckets are dropped: a bucket idle for its
// whole period is full again, the same as a new one.
const sweepEvery = time.Minute

// NewLocal is an empty local limiter.
func NewLocal() *Local { return &Local{buckets: map[string]*bucket{}, lastSweep: time.Now()} }

// Check is one request against limit, counted under key: ErrExceeded,
// detailed with who and when to retry, once the limit is reached.
func (l *Local) Check(key string, limit Limit, who string) error {
	if limit.Off() {
		return nil
	}
	now := time.Now()
	l.mu.Lock()
	b := l.buckets[key]
	if b == nil || b.period != limit.Period {
		b = &bucket{lim: rate.NewLimiter(rate.Every(limit.Period/time.Duration(limit.Rate)), limit.Rate), period: limit.Period}
		l.buckets[key] = b
	}
	b.last = now
	r := b.lim.ReserveN(now, 1)
	delay := r.DelayFrom(now)
	if delay > 0 {
		r.CancelAt(now)
	}
	if now.Sub(l.lastSweep) > sweepEvery {
		for k, b := range l.buckets {
			if now.Sub(b.last) > b.period {
				delete(l.buckets, k)
			}
		}
		l.lastSweep = now
	}
	l.mu.Unlock()
	if delay > 0 {
		return ErrExceeded.With("%s: slow down and retry later", who).Retry(delay)
	}
	return nil
}

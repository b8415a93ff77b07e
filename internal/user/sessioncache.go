package user

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// CachedSessions remembers loaded sessions in this process for a short
// TTL, so that a user's requests do not each cost a Redis round trip. A
// logout deletes the session in Redis and tells every API instance on a
// Redis channel, and each drops the token from its cache at once; if an
// instance misses the message (its subscription was reconnecting), the
// session ends there when its cache entry expires. So a logout takes effect
// everywhere within the cache TTL, and within milliseconds normally.
type CachedSessions struct {
	*Sessions
	rdb     redis.UniversalClient
	ttl     time.Duration
	channel string
	logger  *slog.Logger

	mu      sync.RWMutex
	entries map[string]cachedSession
}

type cachedSession struct {
	user  User
	until time.Time
}

// maxCached bounds the cache: past it, lookups go to Redis until the next
// sweep.
const maxCached = 1 << 20

// NewCachedSessions caches s's sessions for ttl; logouts travel on the
// channel keys.Logouts().
func NewCachedSessions(s *Sessions, rdb redis.UniversalClient, ttl time.Duration, logger *slog.Logger) *CachedSessions {
	return &CachedSessions{Sessions: s, rdb: rdb, ttl: ttl, channel: s.keys.Logouts(), logger: logger,
		entries: map[string]cachedSession{}}
}

// Create starts a session for u and caches it here: a user who logs in on
// this instance is known to it without a round trip.
func (c *CachedSessions) Create(ctx context.Context, u User) (string, error) {
	token, err := c.Sessions.Create(ctx, u)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	if len(c.entries) < maxCached {
		c.entries[token] = cachedSession{user: u, until: time.Now().Add(c.ttl)}
	}
	c.mu.Unlock()
	return token, nil
}

// Start logs u in: the grant is the session token.
func (c *CachedSessions) Start(ctx context.Context, u User) (Grant, error) {
	token, err := c.Create(ctx, u)
	return Grant{Access: token}, err
}

// End ends the session of token, or with everywhere every session of u: in
// Redis, in this cache, and through the channel in every other instance's.
func (c *CachedSessions) End(ctx context.Context, u User, token string, everywhere bool) error {
	tokens, err := c.Sessions.end(ctx, u, token, everywhere)
	if err != nil {
		return err
	}
	for _, t := range tokens {
		c.forget(t)
		if err := c.rdb.Publish(ctx, c.channel, t).Err(); err != nil {
			c.logger.WarnContext(ctx, "logout: telling the other API instances failed; their cached copy ends within the cache TTL", "ttl", c.ttl, "err", err)
		}
	}
	return nil
}

// Load is the session's user, from the cache when it was loaded less than
// the TTL ago. A session found in the cache keeps its Redis expiry from its
// last load: at most the cache TTL less of its idle timeout.
func (c *CachedSessions) Load(ctx context.Context, token string) (User, bool, error) {
	now := time.Now()
	c.mu.RLock()
	e, hit := c.entries[token]
	c.mu.RUnlock()
	if hit && now.Before(e.until) {
		return e.user, true, nil
	}
	u, ok, err := c.Sessions.Load(ctx, token)
	if err != nil || !ok {
		return u, ok, err
	}
	c.mu.Lock()
	if len(c.entries) < maxCached {
		c.entries[token] = cachedSession{user: u, until: now.Add(c.ttl)}
	}
	c.mu.Unlock()
	return u, true, nil
}

func (c *CachedSessions) forget(token string) {
	c.mu.Lock()
	delete(c.entries, token)
	c.mu.Unlock()
}

// Run drops the tokens other instances log out, and the expired entries,
// until ctx ends. go-redis resubscribes by itself after Redis restarts.
func (c *CachedSessions) Run(ctx context.Context) error {
	sub := c.rdb.Subscribe(ctx, c.channel)
	defer sub.Close()
	logouts := sub.Channel()
	sweep := time.NewTicker(c.ttl)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-logouts:
			if !ok {
				return nil
			}
			c.forget(m.Payload)
		case now := <-sweep.C:
			c.mu.Lock()
			for token, e := range c.entries {
				if now.After(e.until) {
					delete(c.entries, token)
				}
			}
			c.mu.Unlock()
		}
	}
}

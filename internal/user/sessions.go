package user

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/redisconn"
)

// User is what a session knows of its user: the course's UserDTO.
type User struct {
	ID       int64  `json:"id"`
	NickName string `json:"nickName"`
	Icon     string `json:"icon"`
}

// Sessions are login sessions in Redis: a hash per random token, expiring
// after TTL without a request.
type Sessions struct {
	rdb  redis.Cmdable
	hot  *redisconn.Pipeliner
	keys Keys
	ttl  time.Duration
}

// WithAutoPipeline loads sessions through ap (the client's asynchronous
// autopipeliner): a lookup's two commands join the batch that concurrent
// requests share, instead of taking a round trip of their own.
func (s *Sessions) WithAutoPipeline(ap *redisconn.Pipeliner) *Sessions {
	s.hot = ap
	return s
}

// NewSessions keeps sessions under keys for ttl after their last use.
func NewSessions(rdb redis.Cmdable, keys Keys, ttl time.Duration) *Sessions {
	return &Sessions{rdb: rdb, keys: keys, ttl: ttl}
}

// tokenBytes is 128 bits: unguessable, and short in a header.
const tokenBytes = 16

// Create starts a session for u and returns its token.
func (s *Sessions) Create(ctx context.Context, u User) (string, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("session token: %w", err)
	}
	token := hex.EncodeToString(b)
	key := s.keys.Session(token)
	cmds, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, "id", strconv.FormatInt(u.ID, 10), "nickName", u.NickName, "icon", u.Icon)
		p.Expire(ctx, key, s.ttl)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("store session: %w", redisconn.TxError(err, cmds))
	}
	// The user's index is in another slot: a second step. A session
	// missing from it (this step failed) still ends with its idle timeout.
	index := s.keys.userSessions(u.ID)
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.SAdd(ctx, index, token)
		p.Expire(ctx, index, userIndexTTL)
		return nil
	}); err != nil {
		return "", fmt.Errorf("index session: %w", err)
	}
	return token, nil
}

// userIndexTTL is how long a user's index of sessions is kept after their
// last login: "log out everywhere" ends the sessions started within it (a
// session kept alive by use for longer than this without another login of
// its user is not in the index).
const userIndexTTL = 7 * 24 * time.Hour

// Start logs u in: the grant is the session token.
func (s *Sessions) Start(ctx context.Context, u User) (Grant, error) {
	token, err := s.Create(ctx, u)
	return Grant{Access: token}, err
}

// End ends the session of token, or with everywhere every session of u.
func (s *Sessions) End(ctx context.Context, u User, token string, everywhere bool) error {
	_, err := s.end(ctx, u, token, everywhere)
	return err
}

// end is End, returning the tokens it ended.
func (s *Sessions) end(ctx context.Context, u User, token string, everywhere bool) ([]string, error) {
	index := s.keys.userSessions(u.ID)
	if !everywhere {
		if err := s.Delete(ctx, token); err != nil {
			return nil, err
		}
		if err := s.rdb.SRem(ctx, index, token).Err(); err != nil {
			return nil, fmt.Errorf("unindex session: %w", err)
		}
		return []string{token}, nil
	}
	tokens, err := s.rdb.SMembers(ctx, index).Result()
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	tokens = append(tokens, token)
	// One DEL per key: they are in different slots.
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, t := range tokens {
			if WellFormedToken(t) {
				p.Del(ctx, s.keys.Session(t))
			}
		}
		p.Del(ctx, index)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("end sessions: %w", err)
	}
	return tokens, nil
}

// WellFormedToken reports whether token could be one of ours; anything else
// is not looked up at all.
func WellFormedToken(token string) bool {
	if len(token) != 2*tokenBytes {
		return false
	}
	_, err := hex.DecodeString(token)
	return err == nil
}

// Load returns the session's user and pushes its expiry TTL into the
// future; ok is false when there is no such session.
func (s *Sessions) Load(ctx context.Context, token string) (u User, ok bool, err error) {
	if !WellFormedToken(token) {
		return User{}, false, nil
	}
	key := s.keys.Session(token)
	var fields *redis.MapStringStringCmd
	if s.hot != nil {
		fields = redis.NewMapStringStringCmd(ctx, "hgetall", key)
		err = s.hot.Do(ctx, key, fields, redis.NewBoolCmd(ctx, "expire", key, max(1, int64(s.ttl/time.Second))))
	} else {
		_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			fields = p.HGetAll(ctx, key)
			p.Expire(ctx, key, s.ttl)
			return nil
		})
	}
	if err != nil {
		return User{}, false, fmt.Errorf("load session: %w", err)
	}
	m := fields.Val()
	if len(m) == 0 {
		return User{}, false, nil
	}
	id, err := strconv.ParseInt(m["id"], 10, 64)
	if err != nil {
		return User{}, false, fmt.Errorf("session %s…: bad user id %q", token[:6], m["id"])
	}
	return User{ID: id, NickName: m["nickName"], Icon: m["icon"]}, true, nil
}

// Delete ends the session.
func (s *Sessions) Delete(ctx context.Context, token string) error {
	if !WellFormedToken(token) {
		return nil
	}
	if err := s.rdb.Del(ctx, s.keys.Session(token)).Err(); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

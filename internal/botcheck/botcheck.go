// Package botcheck keeps scalper bots from a flash sale's stock, as an
// option of each sale (docs/bot-defence.md). A sale in the path mode takes
// orders only at a path issued to each buyer once the sale is open, so no
// request can be prepared before it; in the challenge mode the path is
// issued only for a solved picture challenge (with its audio reading),
// which a person answers in seconds and a bot farm must pay someone or a
// solver for, per account and per sale. The mode is fixed for the sale's
// life: stored in MySQL with the voucher, kept in Redis, and remembered by
// each api instance once read, so the order route's check costs a map
// read.
//
// The package owns its Redis keys, all under the deployment's prefix:
//
//	botcheck:mode:{<voucher id>}   the sale's mode; written at its creation
//	                               (voucher.Vouchers.Create, after the sale
//	                               is warmed), rewritten from MySQL when
//	                               missing
//	botcheck:keys                  the path tokens' MAC keys (keys.go), made
//	                               by the first api instance that needs one,
//	                               rotated by seckillctl path-keys; unused
//	                               when the keys come from a file
//	botcheck:challenge:<id>        a challenge's "user:voucher:digits", until
//	                               it is answered (right or wrong) or expires
package botcheck

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/internal/order"
)

// Mode is how a sale keeps bots out.
type Mode string

// The modes of a sale.
const (
	// None: anyone logged in orders at POST /voucher-order/seckill/{id},
	// as the course's client does.
	None Mode = "none"
	// Path: orders only at a path issued to the buyer once the sale is
	// open.
	Path Mode = "path"
	// Challenge: the path only for a solved challenge.
	Challenge Mode = "challenge"
)

// ParseMode reads a sale's mode; "" is None.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "", None:
		return None, nil
	case Path, Challenge:
		return Mode(s), nil
	}
	return "", fmt.Errorf("botCheck %q: want none, path or challenge", s)
}

// The answers callers branch on.
var (
	// ErrNoPath is an order without a path for a sale that asks for one.
	ErrNoPath = apperr.New(apperr.Forbidden, "this sale takes orders at a path issued to each buyer once it is open: "+
		"GET /voucher-order/seckill/{id}/path (or solve its challenge) and order at the path it gives")
	// ErrPathMalformed is a path that is not one this server issues.
	ErrPathMalformed = apperr.New(apperr.Invalid, "malformed order path")
	// ErrPathInvalid is a path not issued to this user for this voucher
	// (another's, another sale's, or made up).
	ErrPathInvalid = apperr.New(apperr.Forbidden, "this order path was not issued to you for this voucher")
	// ErrPathExpired is a path past its lifetime.
	ErrPathExpired = apperr.New(apperr.Forbidden, "this order path has expired: ask for a new one")
	// ErrSolveFirst is a path asked for without a challenge's answer, on a
	// sale that issues paths only for one.
	ErrSolveFirst = apperr.New(apperr.Forbidden, "this sale issues order paths only for a solved challenge: "+
		"GET /voucher-order/seckill/{id}/challenge, then POST its id and your answer to /voucher-order/seckill/{id}/path")
	// ErrNoChallenge is a challenge sale's path asked for on a sale of
	// another mode, or a challenge asked for on a sale without one.
	ErrNoChallenge = apperr.New(apperr.Conflict, "this sale has no challenge: GET /voucher-order/seckill/{id}/path")
	// ErrChallengeGone is an answer to a challenge that is not live: never
	// issued, another user's or sale's, answered already, or expired.
	ErrChallengeGone = apperr.New(apperr.Forbidden, "no such challenge: it expired or was answered already; ask for a new one")
	// ErrAnswerMalformed is an answer or a challenge id of the wrong shape.
	ErrAnswerMalformed = apperr.New(apperr.Invalid, "malformed challenge answer")
	// ErrWrongAnswer is a wrong answer to a live challenge, which it
	// used up: a business outcome the user reads, like a wrong login code.
	ErrWrongAnswer = apperr.New(apperr.Outcome, "wrong answer: ask for a new challenge")
	// ErrReadingsUsedUp is a challenge read aloud MaxReadings times
	// already: each reading is a WAV drawn on the api's CPU.
	ErrReadingsUsedUp = apperr.New(apperr.Outcome, "this challenge was read aloud as often as it may be: ask for a new one")
)

// Modes is where a sale's mode is kept for good: the voucher's row.
type Modes interface {
	// BotCheck is voucherID's mode; found is false when there is no such
	// flash-sale voucher.
	BotCheck(ctx context.Context, voucherID int64) (m Mode, found bool, err error)
}

// Windows is the sale's window as the gate holds it, with the gate's
// clock (its Redis server's) at the read: order.ErrUnknownVoucher when
// there is no sale.
type Windows interface {
	Window(ctx context.Context, voucherID int64) (begin, end, now time.Time, err error)
}

// Config is the lifetimes of what the package issues.
type Config struct {
	PathTTL      time.Duration // an order path's
	ChallengeTTL time.Duration // a challenge's
	Digits       int           // a challenge's length
	// KeysFile holds the paths' keys (KeyFile); "" keeps them in Redis.
	KeysFile string
}

// DefaultConfig is a path good for a minute (a buyer orders at once) and
// a challenge for two (a person reads or hears six digits).
var DefaultConfig = Config{PathTTL: time.Minute, ChallengeTTL: 2 * time.Minute, Digits: 6}

// Store issues and checks paths and challenges, and knows each sale's mode.
type Store struct {
	rdb     redis.UniversalClient
	prefix  string
	modes   Modes
	windows Windows
	cfg     Config
	metrics *Metrics
	// Now is the clock the windows and lifetimes are read by.
	Now func() time.Time

	mu    sync.RWMutex
	known map[int64]Mode

	windowsMu sync.Mutex
	seen      map[int64]window

	keys       KeySource
	ring       atomic.Pointer[heldRing]
	refreshing sync.Mutex // one read of the keys at a time
}

// New keeps the package's keys under prefix.
func New(rdb redis.UniversalClient, prefix string, modes Modes, windows Windows, cfg Config, metrics *Metrics) *Store {
	var keys KeySource = NewRedisKeys(rdb, prefix)
	if cfg.KeysFile != "" {
		keys = FileKeys(cfg.KeysFile)
	}
	return &Store{rdb: rdb, prefix: prefix, modes: modes, windows: windows, cfg: cfg, metrics: metrics,
		Now: time.Now, known: map[int64]Mode{}, seen: map[int64]window{}, keys: keys}
}

// window is a sale's window as read at a time.
// window is a sale's window as read at read (this host's clock), and how
// far the gate's clock (its Redis server's) was ahead of this host's then.
type window struct {
	begin, end, read time.Time
	ahead            time.Duration
}

// windowTTL is how long an instance issues paths by a window it read:
// under a crowd, the sale's buyers ask for their paths in the same
// seconds, and one read a second serves them all. A window an admin moves
// is followed within it; the gate checks every order against the window
// it holds whatever path it comes with.
const windowTTL = time.Second

func (s *Store) modeKey(voucherID int64) string {
	return s.prefix + "botcheck:mode:{" + strconv.FormatInt(voucherID, 10) + "}"
}

// challengeKey names the buyer: another user who learnt a challenge's id
// cannot use it up.
func (s *Store) challengeKey(userID int64, id string) string {
	return s.prefix + "botcheck:challenge:" + strconv.FormatInt(userID, 10) + ":" + id
}

// keepMode is how long a sale's mode stays in Redis after its end: past
// that, a sale extended later has it read from MySQL again.
const keepMode = 7 * 24 * time.Hour

// SetMode records a new sale's mode in Redis (voucher.Vouchers.Create).
func (s *Store) SetMode(ctx context.Context, voucherID int64, m Mode, end time.Time) error {
	if err := s.rdb.SetArgs(ctx, s.modeKey(voucherID), string(m), redis.SetArgs{ExpireAt: end.Add(keepMode)}).Err(); err != nil {
		return fmt.Errorf("bot check of voucher %d in Redis: %w", voucherID, err)
	}
	return nil
}

// ModeOf is voucherID's mode: remembered once read, since it never
// changes; otherwise read from Redis, and from MySQL when Redis lost it
// while the gate has the sale (then written back). A voucher with no sale
// in Redis is order.ErrUnknownVoucher, the gate's own answer, and not
// remembered: a sale a reconcile puts back has its mode read then.
func (s *Store) ModeOf(ctx context.Context, voucherID int64) (Mode, error) {
	s.mu.RLock()
	m, ok := s.known[voucherID]
	s.mu.RUnlock()
	if ok {
		return m, nil
	}
	v, err := s.rdb.Get(ctx, s.modeKey(voucherID)).Result()
	switch {
	case err == nil:
		if m, err = ParseMode(v); err != nil {
			return "", fmt.Errorf("bot check of voucher %d in Redis: %w", voucherID, err)
		}
	case errors.Is(err, redis.Nil):
		// The mode is missing from a sale the gate has in the moment
		// between the sale's warming and the mode's writing, or when
		// Redis lost it: MySQL says. No sale: the gate answers, and
		// made-up voucher ids cost MySQL nothing.
		if _, _, _, err := s.windows.Window(ctx, voucherID); errors.Is(err, order.ErrUnknownVoucher) {
			return "", err
		} else if err != nil {
			return "", fmt.Errorf("bot check of voucher %d: %w", voucherID, err)
		}
		found := false
		if m, found, err = s.modes.BotCheck(ctx, voucherID); err != nil {
			return "", fmt.Errorf("bot check of voucher %d: %w", voucherID, err)
		}
		if !found {
			return "", order.ErrUnknownVoucher
		}
		// Best effort: the next instance reads MySQL again if it fails.
		_ = s.rdb.Set(ctx, s.modeKey(voucherID), string(m), keepMode).Err()
	default:
		return "", fmt.Errorf("bot check of voucher %d: %w", voucherID, err)
	}
	s.mu.Lock()
	s.known[voucherID] = m
	s.mu.Unlock()
	return m, nil
}

// open is nil while voucherID's sale is open by the gate's clock: the
// gate's own answers otherwise (not started, ended, no such sale). An api
// whose clock runs ahead must not hand out paths before the gate opens.
func (s *Store) open(ctx context.Context, voucherID int64) error {
	local := s.Now()
	s.windowsMu.Lock()
	w, ok := s.seen[voucherID]
	s.windowsMu.Unlock()
	if !ok || local.Sub(w.read) >= windowTTL || local.Before(w.read) {
		begin, end, gateNow, err := s.windows.Window(ctx, voucherID)
		if err != nil {
			return err
		}
		w = window{begin: begin, end: end, read: local, ahead: gateNow.Sub(local)}
		s.windowsMu.Lock()
		s.seen[voucherID] = w
		s.windowsMu.Unlock()
	}
	now := local.Add(w.ahead)
	begin, end := w.begin, w.end
	switch {
	case now.Before(begin):
		return order.ErrNotStarted
	case !now.Before(end):
		return order.ErrEnded
	}
	return nil
}

package botcheck

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dchest/captcha"
	"github.com/redis/go-redis/v9"
)

// A challenge is six digits drawn distorted in a picture (dchest/captcha),
// also read aloud for those who cannot see it. Its id is 16 random bytes
// (22 base64url characters): it is the only way to its digits, so its
// audio can be fetched by a plain link. The first answer uses it up,
// right or wrong.
const challengeIDLen = 22

// Picture sizes: large enough to read on a phone.
const (
	imageWidth  = 240
	imageHeight = 80
)

// A Puzzle is the challenge a buyer is shown.
type Puzzle struct {
	ID        string
	PNG       []byte
	ExpiresAt time.Time
}

// NewChallenge is a challenge for userID on voucherID, while the sale is
// open, on a sale of mode Challenge.
func (s *Store) NewChallenge(ctx context.Context, userID, voucherID int64) (Puzzle, error) {
	m, err := s.ModeOf(ctx, voucherID)
	if err != nil {
		return Puzzle{}, err
	}
	if m != Challenge {
		return Puzzle{}, ErrNoChallenge
	}
	if err := s.open(ctx, voucherID); err != nil {
		return Puzzle{}, err
	}
	raw := make([]byte, 16)
	if _, err := rand.Read(raw); err != nil {
		return Puzzle{}, err
	}
	id := base64.RawURLEncoding.EncodeToString(raw)
	digits := captcha.RandomDigits(s.cfg.Digits)
	value := fmt.Sprintf("%d:%d:%s", userID, voucherID, digitString(digits))
	if err := s.rdb.Set(ctx, s.challengeKey(userID, id), value, s.cfg.ChallengeTTL).Err(); err != nil {
		return Puzzle{}, fmt.Errorf("challenge: %w", err)
	}
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return Puzzle{}, err
	}
	png, err := picture(seed, digits)
	if err != nil {
		return Puzzle{}, err
	}
	s.metrics.challenge("issued")
	return Puzzle{ID: id, PNG: png, ExpiresAt: s.Now().Add(s.cfg.ChallengeTTL)}, nil
}

// MaxReadings is how often a challenge may be read aloud: a person who
// missed it plays it again, in the browser, from the one fetched.
const MaxReadings = 3

// Languages are the readings a challenge's audio comes in.
var Languages = []string{"en", "zh", "ru", "ja", "pt"}

// Audio is userID's challenge id's digits read aloud (WAV) in lang, while
// it is live: ErrChallengeGone otherwise.
func (s *Store) Audio(ctx context.Context, userID int64, id, lang string) ([]byte, error) {
	if !wellFormedID(id) {
		return nil, ErrAnswerMalformed
	}
	v, err := s.rdb.Get(ctx, s.challengeKey(userID, id)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, ErrChallengeGone
	}
	if err != nil {
		return nil, fmt.Errorf("challenge: %w", err)
	}
	_, _, digits, ok := parseChallenge(v)
	if !ok {
		return nil, fmt.Errorf("challenge %s in Redis: %q", id, v)
	}
	// Each reading counts against the challenge, for its lifetime.
	// Counted and given its lifetime in one transaction: a count left
	// without an expiry would outlive the challenge.
	readings := s.challengeKey(userID, id) + ":readings"
	var count *redis.IntCmd
	if _, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		count = p.Incr(ctx, readings)
		p.ExpireNX(ctx, readings, s.cfg.ChallengeTTL)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("challenge readings: %w", err)
	}
	if count.Val() > MaxReadings {
		s.metrics.challenge("readings_used_up")
		return nil, ErrReadingsUsedUp
	}
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, err
	}
	return reading(seed, id, digits, lang)
}

// Solve takes userID's answer to challenge id for voucherID and, when it
// is right and the sale open, issues the order path. The challenge is used
// up either way.
func (s *Store) Solve(ctx context.Context, userID, voucherID int64, id, answer string) (string, time.Time, error) {
	answer = strings.ReplaceAll(answer, " ", "")
	if !wellFormedID(id) || answer == "" || len(answer) > 32 || strings.Trim(answer, "0123456789") != "" {
		s.metrics.challenge("malformed")
		return "", time.Time{}, ErrAnswerMalformed
	}
	m, err := s.ModeOf(ctx, voucherID)
	if err != nil {
		return "", time.Time{}, err
	}
	if m != Challenge {
		return "", time.Time{}, ErrNoChallenge
	}
	v, err := s.rdb.GetDel(ctx, s.challengeKey(userID, id)).Result()
	if errors.Is(err, redis.Nil) {
		s.metrics.challenge("gone")
		return "", time.Time{}, ErrChallengeGone
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("challenge: %w", err)
	}
	user, voucher, digits, ok := parseChallenge(v)
	if !ok {
		return "", time.Time{}, fmt.Errorf("challenge %s in Redis: %q", id, v)
	}
	if user != userID || voucher != voucherID {
		s.metrics.challenge("gone")
		return "", time.Time{}, ErrChallengeGone
	}
	if digitString(digits) != answer {
		s.metrics.challenge("wrong")
		return "", time.Time{}, ErrWrongAnswer
	}
	s.metrics.challenge("solved")
	return s.issue(ctx, userID, voucherID)
}

func wellFormedID(id string) bool { return base64URL(id, challengeIDLen) }

func digitString(digits []byte) string {
	b := make([]byte, len(digits))
	for i, d := range digits {
		b[i] = '0' + d
	}
	return string(b)
}

func parseChallenge(v string) (userID, voucherID int64, digits []byte, ok bool) {
	parts := strings.Split(v, ":")
	if len(parts) != 3 {
		return 0, 0, nil, false
	}
	u, err1 := strconv.ParseInt(parts[0], 10, 64)
	w, err2 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil || strings.Trim(parts[2], "0123456789") != "" {
		return 0, 0, nil, false
	}
	digits = make([]byte, len(parts[2]))
	for i := range parts[2] {
		digits[i] = parts[2][i] - '0'
	}
	return u, w, digits, true
}

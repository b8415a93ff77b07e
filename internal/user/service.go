// Package user is SMS-code login and Redis token sessions, as in the course
// (the 黑马点评 course's Redis project): a code per phone in Redis, a user row per phone in MySQL, a
// session hash per random token in Redis.
package user

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/internal/redisconn"
)

// Service is the login flow.
type Service struct {
	Codes  *Codes
	Users  *Users
	Sender CodeSender // nil: codes are refused with ErrNoSender
}

// ErrNoSender refuses a code when no CodeSender is configured: better no
// code than one that ends up where someone else can read it.
var ErrNoSender = apperr.New(apperr.Unavailable, "login codes cannot be sent right now: no SMS provider is configured")

// SendCode issues a code for phone, asked from the client address addr,
// and sends it.
func (s *Service) SendCode(ctx context.Context, phone, addr string) error {
	if !ValidPhone(phone) {
		return ErrInvalidPhone
	}
	if s.Sender == nil {
		return ErrNoSender
	}
	code, err := s.Codes.Issue(ctx, phone, addr)
	if err != nil {
		return err
	}
	if err := s.Sender.SendCode(ctx, phone, code); err != nil {
		return fmt.Errorf("send login code: %w", err)
	}
	return nil
}

// codeLength is the length of every code Issue makes: anything else is
// wrong without asking Redis, and costs no try.
const codeLength = 6

// Login checks phone's code, asked from the same client address addr,
// finds or creates the user and starts its session with start (in the
// mode the caller runs). The code is used up only once start succeeded:
// a login that fails after the check (MySQL gone, Redis at its memory
// limit refusing the session) gives the code back, and its retry works.
func (s *Service) Login(ctx context.Context, phone, addr, code string, start func(User) error) (User, error) {
	if !ValidPhone(phone) {
		return User{}, ErrInvalidPhone
	}
	if len(code) != codeLength {
		return User{}, ErrWrongCode
	}
	if err := s.Users.Reachable(ctx); err != nil {
		return User{}, err
	}
	// The hold ends even when the request's context has: a code left held
	// stays unusable until it expires.
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), holdEndTimeout)
	defer cancel()
	hold, err := s.Codes.Verify(ctx, phone, addr, code)
	if err != nil {
		if redisconn.Unreachable(err) {
			// The check's reply was lost, not its run: a hold it took is
			// given back, so that the retry finds the code.
			_ = s.Codes.Release(ectx, hold)
		}
		return User{}, err
	}
	u, err := s.Users.FindOrCreate(ctx, phone)
	if err == nil {
		err = start(u)
	}
	if err != nil {
		if rerr := s.Codes.Release(ectx, hold); rerr != nil {
			return User{}, errors.Join(err, rerr)
		}
		return User{}, err
	}
	// A spend that fails leaves the login standing, its session stored:
	// the code stays held, so nobody else can use it, until it expires.
	_ = s.Codes.Spend(ectx, hold)
	return u, nil
}

// holdEndTimeout bounds spending or releasing a held code.
const holdEndTimeout = 2 * time.Second

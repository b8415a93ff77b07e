// Package user is SMS-code login and Redis token sessions, as in the course
// (the 黑马点评 course's Redis project): a code per phone in Redis, a user row per phone in MySQL, a
// session hash per random token in Redis.
package user

import (
	"context"
	"fmt"

	"github.com/seckill/seckill/internal/apperr"
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

// Login checks phone's code, asked from the same client address addr, and
// finds or creates the user; the caller starts the session (in the mode it
// runs).
func (s *Service) Login(ctx context.Context, phone, addr, code string) (User, error) {
	if !ValidPhone(phone) {
		return User{}, ErrInvalidPhone
	}
	if len(code) != codeLength {
		return User{}, ErrWrongCode
	}
	if err := s.Users.Reachable(ctx); err != nil {
		return User{}, err
	}
	if err := s.Codes.Verify(ctx, phone, addr, code); err != nil {
		return User{}, err
	}
	return s.Users.FindOrCreate(ctx, phone)
}

package jwtauth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seckill/seckill/internal/user"
)

// UserFinder reads a user's row: a refresh re-reads it, so a deleted user
// gets no new token and a renamed one gets the new name.
type UserFinder interface {
	ByID(ctx context.Context, id int64) (user.User, error)
}

// Sessions is the jwt session mode.
type Sessions struct {
	Tokens      *Tokens
	Families    *Families
	Revocations *Revocations
	Users       UserFinder
	Now         func() time.Time
}

func (s *Sessions) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Load checks an access token locally: signature, time claims, and this
// instance's copy of the revocations. ok is false for any token that does
// not pass; the reason is not told to the client.
func (s *Sessions) Load(_ context.Context, token string) (user.User, bool, error) {
	c, err := s.Tokens.Verify(token)
	if err != nil {
		return user.User{}, false, nil
	}
	u, _ := c.User()
	if s.Revocations.Revoked(c.Family, u.ID, c.IssuedAt.Time) {
		return user.User{}, false, nil
	}
	return u, true, nil
}

// Start logs u in: a new refresh family and its first access token.
func (s *Sessions) Start(ctx context.Context, u user.User) (user.Grant, error) {
	now := s.now()
	fid, refresh, err := s.Families.Start(ctx, u.ID, now)
	if err != nil {
		return user.Grant{}, err
	}
	access, err := s.Tokens.Issue(u, fid, now)
	if err != nil {
		return user.Grant{}, err
	}
	return user.Grant{Access: access, Refresh: refresh, RefreshTTL: s.Families.TTL()}, nil
}

// Refresh exchanges a refresh token for a new access token and the next
// refresh token.
func (s *Sessions) Refresh(ctx context.Context, refresh string) (user.Grant, error) {
	if refresh == "" {
		return user.Grant{}, ErrNoRefresh
	}
	r, err := s.Families.Rotate(ctx, refresh)
	if errors.Is(err, ErrRefreshReused) {
		// Somebody holds a token they should not: the family's access
		// tokens go too, whoever refreshed them.
		fid, _ := FamilyOf(refresh)
		return user.Grant{}, errors.Join(err, s.Revocations.RevokeFamily(ctx, fid, s.now()))
	}
	if err != nil {
		return user.Grant{}, err
	}
	if cutoff, ok := s.Revocations.UserCutoff(r.UserID); ok && r.Created.Before(cutoff) {
		return user.Grant{}, errors.Join(ErrRefreshUnknown, s.Families.Revoke(ctx, r.Family))
	}
	u, err := s.Users.ByID(ctx, r.UserID)
	if errors.Is(err, user.ErrNoUser) {
		return user.Grant{}, errors.Join(ErrRefreshUnknown, s.Families.Revoke(ctx, r.Family))
	}
	if err != nil {
		return user.Grant{}, err
	}
	access, err := s.Tokens.Issue(u, r.Family, s.now())
	if err != nil {
		return user.Grant{}, err
	}
	return user.Grant{Access: access, Refresh: r.Token, RefreshTTL: s.Families.TTL()}, nil
}

// End logs out the session of access token token: its refresh family is
// deleted and every access token of the family denied on every instance.
// everywhere ends every session of u.
func (s *Sessions) End(ctx context.Context, u user.User, token string, everywhere bool) error {
	now := s.now()
	if everywhere {
		if err := s.Revocations.RevokeUser(ctx, u.ID, now); err != nil {
			return err
		}
		return s.Families.RevokeUser(ctx, u.ID)
	}
	// The route's check passed a moment ago; the token may have expired
	// since, and its family must end all the same.
	fid, err := s.Tokens.familyOf(token)
	if err != nil {
		return fmt.Errorf("logout: %w", err)
	}
	if err := s.Revocations.RevokeFamily(ctx, fid, now); err != nil {
		return err
	}
	return s.Families.Revoke(ctx, fid)
}

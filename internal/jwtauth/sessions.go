package jwtauth

import (
	"context"
	"errors"
	"time"

	"github.com/seckill/seckill/internal/apperr"
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
	if !s.Revocations.Loaded() {
		return user.User{}, false, ErrNotLoaded
	}
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
	// The user is read before the token is rotated: a MySQL outage fails
	// the refresh with nothing used up, and the retry with the same token
	// works once MySQL answers (rotated first, a retry after the reuse
	// grace would be taken for a stolen token and end the login).
	var holder user.User
	if _, uid, ok, err := s.Families.Holder(ctx, refresh); err != nil {
		return user.Grant{}, err
	} else if ok {
		if holder, err = s.Users.ByID(ctx, uid); err != nil && !errors.Is(err, user.ErrNoUser) {
			return user.Grant{}, err
		}
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
	gen, err := s.Families.Generation(ctx, r.UserID)
	if err != nil {
		return user.Grant{}, err
	}
	if gen > r.Gen {
		// Started before a "log out everywhere" that did not delete it.
		return user.Grant{}, errors.Join(ErrRefreshUnknown, s.Families.Revoke(ctx, r.Family))
	}
	u := holder
	if u.ID != r.UserID {
		// Not read before the rotation (the user gone then, or the token
		// not the family's when it was read).
		u, err = s.Users.ByID(ctx, r.UserID)
		if errors.Is(err, user.ErrNoUser) {
			return user.Grant{}, errors.Join(ErrRefreshUnknown, s.Families.Revoke(ctx, r.Family))
		}
		if err != nil {
			return user.Grant{}, err
		}
	}
	access, err := s.Tokens.Issue(u, r.Family, s.now())
	if err != nil {
		return user.Grant{}, err
	}
	return user.Grant{Access: access, Refresh: r.Token, RefreshTTL: s.Families.TTL()}, nil
}

// ErrNothingHeld answers a logout that proves no login: neither a token
// signed by us nor a live refresh token.
var ErrNothingHeld = apperr.New(apperr.Unauthorized, "nothing to log out: please log in")

// End logs out the session of access token token: its refresh family is
// deleted and every access token of the family denied on every instance.
// everywhere ends every session of u.
func (s *Sessions) End(ctx context.Context, u user.User, token string, everywhere bool) error {
	if everywhere {
		return s.endUser(ctx, u.ID)
	}
	return s.EndHeld(ctx, token, "", false)
}

// EndHeld logs out the login the client proves it holds: an access token
// signed by us, expired or not (the course's page never refreshes, so
// after the access TTL its token has expired), or else the login's refresh
// token. everywhere ends every login of its user.
func (s *Sessions) EndHeld(ctx context.Context, token, refresh string, everywhere bool) error {
	var fid string
	var uid int64
	if c, err := s.Tokens.held(token); err == nil {
		u, _ := c.User()
		if s.Revocations.Revoked(c.Family, u.ID, c.IssuedAt.Time) {
			return ErrNothingHeld // logged out already
		}
		fid, uid = c.Family, u.ID
	} else {
		var ok bool
		if fid, uid, ok, err = s.Families.Holder(ctx, refresh); err != nil {
			return err
		} else if !ok {
			return ErrNothingHeld
		}
	}
	if everywhere {
		return s.endUser(ctx, uid)
	}
	if err := s.Families.Revoke(ctx, fid); err != nil {
		return err
	}
	return s.Revocations.RevokeFamily(ctx, fid, s.now())
}

// endUser ends every login of user uid. The refresh side first: the raised
// generation is what makes it exact.
func (s *Sessions) endUser(ctx context.Context, uid int64) error {
	if err := s.Families.RevokeUser(ctx, uid); err != nil {
		return err
	}
	return s.Revocations.RevokeUser(ctx, uid, s.now())
}

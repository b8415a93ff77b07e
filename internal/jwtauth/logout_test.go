package jwtauth

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testsupport"
	"github.com/seckill/seckill/internal/user"
)

// sessionsOn is the jwt mode on the test's Redis, as an API instance runs
// it; rdb is what the revocation feed writes through.
func sessionsOn(t *testing.T, r *testsupport.Redis, rdb revocationRedis) *Sessions {
	t.Helper()
	spec, err := NewKeySpec("hs-1", HS256)
	if err != nil {
		t.Fatal(err)
	}
	file, err := json.Marshal(KeyFile{Sign: "hs-1", Keys: []KeySpec{spec}})
	if err != nil {
		t.Fatal(err)
	}
	ring, err := ParseKeys(file)
	if err != nil {
		t.Fatal(err)
	}
	keys := Keys{Prefix: r.Prefix}
	tokens := NewTokens(ring, time.Minute)
	return &Sessions{Tokens: tokens, Families: NewFamilies(r.Client, keys, time.Hour, 0),
		Revocations: NewRevocations(rdb, keys.Revocations(), tokens.Lifetime(), slog.New(slog.NewTextHandler(io.Discard, nil))),
		Users:       anyUser{}}
}

type anyUser struct{}

func (anyUser) ByID(_ context.Context, id int64) (user.User, error) { return user.User{ID: id}, nil }

// "Log out everywhere" is exact for the refresh side: a family that the
// logout did not delete — started by a login racing it (not yet in the
// user's index when the logout read it), or whose delete failed — is
// refused at its next refresh, however long after; not only while this
// instance still remembers the logout (the access tokens' lifetime).
func TestLogoutEverywhereIsExactForRefresh(t *testing.T) {
	r := testsupport.MustRedis(t)
	ctx := t.Context()
	s := sessionsOn(t, r, r.Client)
	const uid = 7001
	forget := func() { s.Revocations.sweep(time.Now().Add(s.Tokens.Lifetime() + time.Second)) }

	t.Run("a login racing the logout", func(t *testing.T) {
		_, refresh, err := s.Families.Start(ctx, uid, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		fid, _ := FamilyOf(refresh)
		// The logout read the index before this login wrote itself there.
		r.Client.SRem(ctx, s.Families.keys.userFamilies(uid), fid)
		if err := s.End(ctx, user.User{ID: uid}, "", true); err != nil {
			t.Fatal(err)
		}
		forget()
		if _, err := s.Refresh(ctx, refresh); !errors.Is(err, ErrRefreshUnknown) {
			t.Fatalf("a family the logout everywhere missed refreshed: %v", err)
		}
	})

	t.Run("a family whose delete failed", func(t *testing.T) {
		_, refresh, err := s.Families.Start(ctx, uid, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		fid, _ := FamilyOf(refresh)
		key := s.Families.keys.Family(fid)
		dump, err := r.Client.Dump(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.End(ctx, user.User{ID: uid}, "", true); err != nil {
			t.Fatal(err)
		}
		if err := r.Client.Restore(ctx, key, time.Hour, dump).Err(); err != nil {
			t.Fatal(err)
		}
		forget()
		if _, err := s.Refresh(ctx, refresh); !errors.Is(err, ErrRefreshUnknown) {
			t.Fatalf("a family whose delete failed refreshed after a logout everywhere: %v", err)
		}
	})

	t.Run("a login after the logout", func(t *testing.T) {
		_, refresh, err := s.Families.Start(ctx, uid, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Refresh(ctx, refresh); err != nil {
			t.Fatalf("a login after the logout everywhere does not refresh: %v", err)
		}
	})
}

// flakyXAdd fails its next n scripts (the feed is written by one), as a
// Redis that is failing over would.
type flakyXAdd struct {
	redis.UniversalClient
	fails atomic.Int32
}

var errFlaky = errors.New("flaky: connection reset")

func (f *flakyXAdd) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if f.fails.Add(-1) >= 0 {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(errFlaky)
		return cmd
	}
	return f.UniversalClient.EvalSha(ctx, sha, keys, args...)
}

// A revocation that could not be written at once (a reuse deletes the
// family in one slot, the feed is another) is retried until written:
// another instance, which knows only the feed, comes to refuse the
// family's access tokens.
func TestRevocationIsRetriedUntilWritten(t *testing.T) {
	r := testsupport.MustRedis(t)
	ctx := t.Context()
	flaky := &flakyXAdd{UniversalClient: r.Client}
	s := sessionsOn(t, r, flaky)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Revocations.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	// Only a following instance queues a revocation it could not write
	// (the api is not ready before): a reuse before the follower's first
	// read, on a loaded machine, was lost here (CI, once).
	testsupport.Wait(t, 10*time.Second, "the revocations' follower following", s.Revocations.following.Load)

	const uid = 7002
	g, err := s.Start(ctx, user.User{ID: uid})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Tokens.Verify(g.Access)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Refresh(ctx, g.Refresh); err != nil {
		t.Fatal(err)
	}
	flaky.fails.Store(3)
	if _, err := s.Refresh(ctx, g.Refresh); !errors.Is(err, ErrRefreshReused) {
		t.Fatalf("the retired token presented again: %v, want a reuse", err)
	}
	if !s.Revocations.Revoked(c.Family, uid, c.IssuedAt.Time) {
		t.Fatal("the instance that saw the reuse still accepts the family's access token")
	}
	other := sessionsOn(t, r, r.Client).Revocations
	testsupport.Wait(t, 10*time.Second, "the reuse's revocation in the feed", func() bool {
		if err := other.Load(ctx); err != nil {
			t.Fatal(err)
		}
		return other.Revoked(c.Family, uid, c.IssuedAt.Time)
	})
}

// The feed is trimmed by Redis's clock: an instance whose clock runs an
// hour ahead does not cut entries that still revoke live tokens. Before,
// the writer computed the cut from its own clock.
func TestFeedIsTrimmedByRedisClock(t *testing.T) {
	r := testsupport.MustRedis(t)
	ctx := t.Context()
	honest := sessionsOn(t, r, r.Client).Revocations
	const revoked = "AAAAAAAAAAAAAAAAAAAAAAAAAA"
	if err := honest.RevokeFamily(ctx, revoked, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Enough entries after it that an approximate trim could drop the
	// stream's first node.
	for range 150 {
		if err := honest.RevokeUser(ctx, 1, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	ahead := sessionsOn(t, r, r.Client).Revocations
	if err := ahead.RevokeUser(ctx, 2, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	fresh := sessionsOn(t, r, r.Client).Revocations
	if err := fresh.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if !fresh.Revoked(revoked, 3, time.Now()) {
		t.Fatal("a revocation a moment old was trimmed by an instance whose clock runs ahead")
	}
}

// The follower that cannot read reports it: Fresh fails once it has gone
// StaleAfter without a read, and passes again after a read.
func TestFollowerThatStopsReadingIsNotFresh(t *testing.T) {
	r := testsupport.MustRedis(t)
	rev := sessionsOn(t, r, r.Client).Revocations
	now := time.Now()
	rev.Now = func() time.Time { return now }
	rev.StaleAfter = 3 * time.Second
	if err := rev.Fresh(t.Context()); err == nil {
		t.Fatal("fresh before any read")
	}
	if err := rev.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := rev.Fresh(t.Context()); err != nil {
		t.Fatalf("right after a read: %v", err)
	}
	now = now.Add(4 * time.Second)
	if err := rev.Fresh(t.Context()); err == nil {
		t.Fatal("fresh after 4 s without a read, bound 3 s")
	}
}

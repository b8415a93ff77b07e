package user_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testsupport"
	"github.com/seckill/seckill/internal/user"
)

// A stall past the production client's read timeout makes go-redis send
// the script again; the login must still go through, once.
func TestLoginCodesWhenRedisStalls(t *testing.T) {
	r, _ := testsupport.MustPrivateRedis(t)
	rdb := testsupport.MustProductionClient(t, r.Addr)
	ctx := context.Background()
	codes := user.NewCodes(rdb, user.Keys{Prefix: r.Prefix}, user.DefaultCodePolicy)
	const stall = 1500 * time.Millisecond

	done := testsupport.StallRedis(t, r.Addr, stall)
	code, err := codes.Issue(ctx, "13800138000", addr)
	<-done
	if err != nil {
		t.Fatalf("code asked for during a stall: %v; want the code", err)
	}

	done = testsupport.StallRedis(t, r.Addr, stall)
	err = verify(ctx, codes, "13800138000", addr, code)
	<-done
	if err != nil {
		t.Fatalf("right code during a stall: %v; want logged in", err)
	}
	if err := verify(ctx, codes, "13800138000", addr, code); err == nil {
		t.Fatal("the code worked twice")
	}
}

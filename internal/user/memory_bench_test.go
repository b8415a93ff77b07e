package user_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testsupport"
	"github.com/seckill/seckill/internal/user"
)

// The Redis bytes a logged-in buyer's session and a login code waiting to
// be used hold, for sizing a sale's Redis (the sessions of everyone who
// logs in for it, the codes of the minutes before it opens). On a Redis of
// its own, so that only these keys count.
func BenchmarkRedisBytesPerSession(b *testing.B) {
	r, _ := testsupport.MustPrivateRedis(b)
	sessions := user.NewSessions(r.Client, user.Keys{Prefix: r.Prefix}, time.Hour)
	ctx := context.Background()
	before := testsupport.UsedMemory(b, r.Client)
	for i := range b.N {
		if _, err := sessions.Create(ctx, user.User{ID: int64(1 + i), NickName: "user_" + strconv.Itoa(1e9+i), Icon: ""}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(testsupport.UsedMemory(b, r.Client)-before)/float64(b.N), "bytes/session")
}

func BenchmarkRedisBytesPerLoginCode(b *testing.B) {
	r, _ := testsupport.MustPrivateRedis(b)
	policy := user.DefaultCodePolicy
	policy.SiteDailyMax = 1 << 30
	codes := user.NewCodes(r.Client, user.Keys{Prefix: r.Prefix}, policy)
	ctx := context.Background()
	before := testsupport.UsedMemory(b, r.Client)
	for i := range b.N {
		phone := "139" + strconv.Itoa(10_000_000+i)
		if _, err := codes.Issue(ctx, phone, "10.0."+strconv.Itoa(i/250%250)+"."+strconv.Itoa(i%250)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(testsupport.UsedMemory(b, r.Client)-before)/float64(b.N), "bytes/code")
}

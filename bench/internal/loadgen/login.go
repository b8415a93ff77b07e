package loadgen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/internal/user"
)

// LoginConfig is a login load run.
type LoginConfig struct {
	API       string // base URL
	Users     int    // distinct phones
	Workers   uint64
	KeyPrefix string // the API's SECKILL_KEY_PREFIX
	// ClientAddr is the address the API sees this generator connect from:
	// a code belongs to the phone and the address that asked for it.
	// Empty means 127.0.0.1, the generator beside the API (make bench).
	ClientAddr string
}

// Login measures POST /user/login: first the users' first logins (each
// creates a tb_user row), then a second login of the same users. A login
// needs a fresh code per request, so the codes are issued beforehand
// through the code store itself (with its cooldown lifted), the way
// /user/code would, and not counted in the run.
func Login(ctx context.Context, rdb redis.UniversalClient, cfg LoginConfig) ([]Report, error) {
	// Phones in 199xxxxxxxx with a random block, so reruns meet new users.
	base := rand.IntN(90_000_000)
	phones := make([]string, cfg.Users)
	for i := range phones {
		phones[i] = fmt.Sprintf("199%08d", base+i)
	}
	policy := user.DefaultCodePolicy
	policy.Cooldown, policy.DailyMax = time.Millisecond, 1000
	codes := user.NewCodes(rdb, user.Keys{Prefix: cfg.KeyPrefix}, policy)
	addr := cfg.ClientAddr
	if addr == "" {
		addr = "127.0.0.1"
	}

	var reports []Report
	for _, round := range []string{"login (new users)", "login (returning users)"} {
		reqs := make([]Request, len(phones))
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(32)
		for i, phone := range phones {
			g.Go(func() error {
				code, err := codes.Issue(gctx, phone, addr)
				if err != nil {
					return fmt.Errorf("issue code for %s: %w", phone, err)
				}
				reqs[i] = Request{
					Method: http.MethodPost, URL: cfg.API + "/user/login",
					Header: http.Header{"Content-Type": {"application/json"}},
					Body:   fmt.Appendf(nil, `{"phone":%q,"code":%q}`, phone, code),
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return reports, err
		}
		// The cooldown is 1 ms: make sure it has passed before the next
		// round issues codes again.
		time.Sleep(5 * time.Millisecond)
		rep, err := Run(round, reqs, Options{Workers: cfg.Workers})
		reports = append(reports, rep)
		if err != nil {
			return reports, err
		}
	}
	return reports, nil
}

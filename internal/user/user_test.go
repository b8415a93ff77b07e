package user_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/internal/redisconn"
	"github.com/seckill/seckill/internal/testsupport"
	"github.com/seckill/seckill/internal/user"
)

func TestValidPhone(t *testing.T) {
	tests := []struct {
		phone string
		valid bool
	}{
		{"13800138000", true},
		{"19912345678", true},
		{"15000000000", true},
		{"12800138000", false}, // second digit 2
		{"10800138000", false},
		{"23800138000", false},
		{"1380013800", false},   // 10 digits
		{"138001380000", false}, // 12 digits
		{"", false},
		{"1380013800a", false},
		{"+8613800138000", false},
		{" 13800138000", false},
		{"13800138000\n", false},
		{"１3800138000", false}, // a full-width digit
		{"1380013800٠", false}, // an Arabic-Indic zero
	}
	for _, tt := range tests {
		if got := user.ValidPhone(tt.phone); got != tt.valid {
			t.Errorf("ValidPhone(%q) = %v, want %v", tt.phone, got, tt.valid)
		}
	}
}

// randomPhone is a valid phone no other test run uses, so tests share the
// real Redis without seeing each other's codes.
func randomPhone() string {
	return fmt.Sprintf("1%d%09d", 3+rand.IntN(7), rand.IntN(1_000_000_000))
}

func TestCodeIsSingleUseAndBoundToItsPhone(t *testing.T) {
	r := testsupport.MustRedis(t)
	ctx := context.Background()
	codes := user.NewCodes(r.Client, user.Keys{Prefix: r.Prefix}, user.DefaultCodePolicy)
	phone, other := randomPhone(), randomPhone()
	code, err := codes.Issue(ctx, phone, addr)
	if err != nil {
		t.Fatal(err)
	}
	if len(code) != 6 {
		t.Fatalf("code %q is not six digits", code)
	}
	if err := verify(ctx, codes, other, addr, code); !errors.Is(err, user.ErrNoCode) {
		t.Fatalf("another phone with this code: %v, want ErrNoCode", err)
	}
	if err := verify(ctx, codes, phone, addr, code); err != nil {
		t.Fatalf("right code: %v", err)
	}
	if err := verify(ctx, codes, phone, addr, code); !errors.Is(err, user.ErrNoCode) {
		t.Fatalf("the same code a second time: %v, want ErrNoCode", err)
	}
}

func TestWrongTriesBurnTheCode(t *testing.T) {
	r := testsupport.MustRedis(t)
	ctx := context.Background()
	policy := user.DefaultCodePolicy
	policy.Cooldown = time.Millisecond
	codes := user.NewCodes(r.Client, user.Keys{Prefix: r.Prefix}, policy)

	t.Run("FourWrongThenRight", func(t *testing.T) {
		phone := randomPhone()
		code, _ := codes.Issue(ctx, phone, addr)
		for i := range 4 {
			if err := verify(ctx, codes, phone, addr, wrong(code)); !errors.Is(err, user.ErrWrongCode) {
				t.Fatalf("wrong try %d: %v, want ErrWrongCode", i+1, err)
			}
		}
		if err := verify(ctx, codes, phone, addr, code); err != nil {
			t.Fatalf("right code after 4 wrong tries: %v", err)
		}
	})
	t.Run("FiveWrongBurnIt", func(t *testing.T) {
		phone := randomPhone()
		code, _ := codes.Issue(ctx, phone, addr)
		for i := range 4 {
			if err := verify(ctx, codes, phone, addr, wrong(code)); !errors.Is(err, user.ErrWrongCode) {
				t.Fatalf("wrong try %d: %v", i+1, err)
			}
		}
		if err := verify(ctx, codes, phone, addr, wrong(code)); !errors.Is(err, user.ErrCodeBurned) {
			t.Fatalf("5th wrong try: %v, want ErrCodeBurned", err)
		}
		if err := verify(ctx, codes, phone, addr, code); !errors.Is(err, user.ErrNoCode) {
			t.Fatalf("6th try, with the right code: %v, want ErrNoCode (burned)", err)
		}
	})
	t.Run("ANewCodeResetsTheTries", func(t *testing.T) {
		phone := randomPhone()
		first, _ := codes.Issue(ctx, phone, addr)
		for range 4 {
			_ = verify(ctx, codes, phone, addr, wrong(first))
		}
		time.Sleep(5 * time.Millisecond) // past the 1 ms cooldown, which Redis times (no clock to inject)
		second, err := codes.Issue(ctx, phone, addr)
		if err != nil {
			t.Fatal(err)
		}
		if err := verify(ctx, codes, phone, addr, wrong(second)); !errors.Is(err, user.ErrWrongCode) {
			t.Fatalf("first wrong try on a new code: %v, want ErrWrongCode", err)
		}
		if err := verify(ctx, codes, phone, addr, second); err != nil {
			t.Fatalf("new code: %v", err)
		}
	})
}

func wrong(code string) string {
	if code == "000000" {
		return "111111"
	}
	return "000000"
}

func TestCodeLimitsPerPhone(t *testing.T) {
	r := testsupport.MustRedis(t)
	ctx := context.Background()

	t.Run("Cooldown", func(t *testing.T) {
		codes := user.NewCodes(r.Client, user.Keys{Prefix: r.Prefix}, user.DefaultCodePolicy)
		phone := randomPhone()
		if _, err := codes.Issue(ctx, phone, addr); err != nil {
			t.Fatal(err)
		}
		_, err := codes.Issue(ctx, phone, addr)
		exceeded, _ := apperr.As(err)
		if !errors.Is(err, user.ErrCodeCooldown) {
			t.Fatalf("second code within a minute: %v, want ErrCodeCooldown", err)
		}
		if exceeded.RetryAfter <= 55*time.Second || exceeded.RetryAfter > time.Minute {
			t.Fatalf("RetryAfter = %v, want just under a minute", exceeded.RetryAfter)
		}
		if _, err := codes.Issue(ctx, randomPhone(), addr); err != nil {
			t.Fatalf("another phone is not limited: %v", err)
		}
	})
	t.Run("DailyMax", func(t *testing.T) {
		policy := user.DefaultCodePolicy
		policy.Cooldown = time.Millisecond
		codes := user.NewCodes(r.Client, user.Keys{Prefix: r.Prefix}, policy)
		phone := randomPhone()
		for i := range policy.DailyMax {
			if _, err := codes.Issue(ctx, phone, addr); err != nil {
				t.Fatalf("code %d of %d: %v", i+1, policy.DailyMax, err)
			}
			time.Sleep(3 * time.Millisecond) // past the 1 ms cooldown, which Redis times: the test counts codes, not refusals
		}
		_, err := codes.Issue(ctx, phone, addr)
		exceeded, _ := apperr.As(err)
		if !errors.Is(err, user.ErrCodeDailyMax) {
			t.Fatalf("code %d in a day: %v, want ErrCodeDailyMax", policy.DailyMax+1, err)
		}
		if exceeded.RetryAfter <= 0 || exceeded.RetryAfter > 24*time.Hour {
			t.Fatalf("RetryAfter = %v, want until the end of the day", exceeded.RetryAfter)
		}
	})
}

// Sessions behave the same whether they are loaded on a round trip of
// their own or through the client's autopipeliner, as the api does.
func TestSessions(t *testing.T) {
	for _, autoPipelined := range []bool{false, true} {
		t.Run(map[bool]string{false: "Plain", true: "AutoPipelined"}[autoPipelined], func(t *testing.T) {
			r := testsupport.MustRedis(t)
			sessions := user.NewSessions(r.Client, user.Keys{Prefix: r.Prefix}, 30*time.Minute)
			if autoPipelined {
				ap, err := redisconn.AutoPipeliner(r.Client)
				if err != nil {
					t.Fatal(err)
				}
				sessions.WithAutoPipeline(ap)
			}
			testSessions(t, r, sessions)
		})
	}
}

func testSessions(t *testing.T, r *testsupport.Redis, sessions *user.Sessions) {
	ctx := context.Background()
	want := user.User{ID: 42, NickName: "user_abc", Icon: "/imgs/a.png"}
	token, err := sessions.Create(ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	if !user.WellFormedToken(token) {
		t.Fatalf("token %q is not 32 hex digits", token)
	}
	key := user.Keys{Prefix: r.Prefix}.Session(token)
	r.Client.Expire(ctx, key, time.Minute)
	got, ok, err := sessions.Load(ctx, token)
	if err != nil || !ok || got != want {
		t.Fatalf("Load = %+v, %v, %v; want %+v", got, ok, err, want)
	}
	if ttl := r.Client.TTL(ctx, key).Val(); ttl < 29*time.Minute {
		t.Fatalf("TTL after Load = %v, want refreshed to 30m", ttl)
	}
	for _, bad := range []string{"", "nope", token + "0", "zz" + token[2:]} {
		if _, ok, err := sessions.Load(ctx, bad); ok || err != nil {
			t.Fatalf("Load(%q) = %v, %v; want no session", bad, ok, err)
		}
	}
	if err := sessions.Delete(ctx, token); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := sessions.Load(ctx, token); ok {
		t.Fatal("session still there after Delete")
	}
}

// Two first logins of one phone at once make one user.
func TestFindOrCreateMakesOneUserPerPhone(t *testing.T) {
	m := testsupport.MustMySQL(t)
	users := user.NewUsers(m.DB)
	ctx := context.Background()
	phone := randomPhone()
	const logins = 8
	ids := make([]int64, logins)
	var wg sync.WaitGroup
	for i := range logins {
		wg.Go(func() {
			u, err := users.FindOrCreate(ctx, phone)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = u.ID
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] || id == 0 {
			t.Fatalf("ids = %v, want one user", ids)
		}
	}
	var rows int
	if err := m.DB.QueryRow("SELECT COUNT(*) FROM tb_user WHERE phone = ?", phone).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("rows for the phone = %d, %v; want 1", rows, err)
	}
	u, _ := users.FindOrCreate(ctx, phone)
	if len(u.NickName) != len("user_")+10 || u.NickName[:5] != "user_" {
		t.Fatalf("nickname %q, want user_ and 10 random characters", u.NickName)
	}
}

// addr is the client address of the tests' code requests and logins.
const addr = "192.0.2.1"

func verify(ctx context.Context, codes *user.Codes, phone, addr, code string) error {
	_, err := codes.Verify(ctx, phone, addr, code)
	return err
}

// A right code is held for its login: no other attempt gets it; released
// (the login failed after the check), it works again; spent, never.
func TestARightCodeIsHeldUntilItsLoginEnds(t *testing.T) {
	r := testsupport.MustRedis(t)
	ctx := context.Background()
	codes := user.NewCodes(r.Client, user.Keys{Prefix: r.Prefix}, user.DefaultCodePolicy)
	phone := randomPhone()
	code, err := codes.Issue(ctx, phone, addr)
	if err != nil {
		t.Fatal(err)
	}
	hold, err := codes.Verify(ctx, phone, addr, code)
	if err != nil {
		t.Fatalf("right code: %v", err)
	}
	if err := verify(ctx, codes, phone, addr, code); !errors.Is(err, user.ErrNoCode) {
		t.Fatalf("the code while a login holds it: %v, want ErrNoCode", err)
	}
	if err := codes.Release(ctx, hold); err != nil {
		t.Fatal(err)
	}
	if err := codes.Spend(ctx, hold); err != nil {
		t.Fatal(err)
	}
	again, err := codes.Verify(ctx, phone, addr, code)
	if err != nil {
		t.Fatalf("the code released by its failed login: %v, want it to work (a spend of the old hold must not use it up)", err)
	}
	if err := codes.Spend(ctx, again); err != nil {
		t.Fatal(err)
	}
	if err := codes.Release(ctx, again); err != nil {
		t.Fatal(err)
	}
	if err := verify(ctx, codes, phone, addr, code); !errors.Is(err, user.ErrNoCode) {
		t.Fatalf("the code spent by its login: %v, want ErrNoCode", err)
	}
}

// A login whose session cannot be started gives its code back, and the
// retry with the same code logs in; a login that started its session has
// used the code up.
func TestALoginUsesItsCodeUpOnlyOnceItsSessionStarted(t *testing.T) {
	r := testsupport.MustRedis(t)
	m := testsupport.MustMySQL(t)
	ctx := context.Background()
	keys := user.Keys{Prefix: r.Prefix}
	codes := user.NewCodes(r.Client, keys, user.DefaultCodePolicy)
	svc := &user.Service{Codes: codes, Users: user.NewUsers(m.DB)}
	phone := randomPhone()
	code, err := codes.Issue(ctx, phone, addr)
	if err != nil {
		t.Fatal(err)
	}
	refused := errors.New("the session store refused the session")
	if _, err := svc.Login(ctx, phone, addr, code, func(user.User) error { return refused }); !errors.Is(err, refused) {
		t.Fatalf("a login whose session was refused: %v; want the refusal", err)
	}
	if held, err := r.Client.HExists(ctx, keys.Code(phone, addr), "held").Result(); err != nil || held {
		t.Fatalf("the code after the refused login: held %v (%v); want released", held, err)
	}
	var started user.User
	u, err := svc.Login(ctx, phone, addr, code, func(u user.User) error { started = u; return nil })
	if err != nil || u.ID == 0 || started != u {
		t.Fatalf("the retry with the same code: %+v, %v (session started for %+v); want logged in", u, err, started)
	}
	if fields, err := r.Client.HGetAll(ctx, keys.Code(phone, addr)).Result(); err != nil || fields["code"] != "" || fields["held"] != "" {
		t.Fatalf("the code after its login: %v (%v); want used up, neither there nor held", fields, err)
	}
	if _, err := svc.Login(ctx, phone, addr, code, func(user.User) error { return nil }); !errors.Is(err, user.ErrNoCode) {
		t.Fatalf("the code a second time: %v; want ErrNoCode", err)
	}
}

// A code request that Redis's memory limit refuses leaves nothing behind.
// The site's budget is on a master that is full, the phone's keys on one
// with room: the request fails (OOM), and its retry once Redis has room
// gets a code. It met the cooldown of a code stored for the failed request
// and never sent, when the budget was counted after the code was stored.
func TestACodeRefusedAtTheMemoryLimitLeavesNoCooldown(t *testing.T) {
	cl := testsupport.MustPrivateCluster(t)
	ctx := context.Background()
	keys := user.Keys{Prefix: cl.Prefix}
	codes := user.NewCodes(cl.Client, keys, user.DefaultCodePolicy)
	const addr = "203.0.113.7"
	site := cl.MasterOf(t, codes.SiteDayKey())
	phone := ""
	for i := 0; phone == ""; i++ {
		if p := fmt.Sprintf("138%08d", i); cl.MasterOf(t, keys.Code(p, addr)) != site {
			phone = p
		}
	}
	full := redis.NewClient(&redis.Options{Addr: site})
	defer full.Close()
	for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"maxmemory", "1"}} {
		if err := full.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := codes.Issue(ctx, phone, addr); !redisconn.OutOfMemory(err) {
		t.Fatalf("a code whose budget's master is full: %v, want Redis's OOM", err)
	}
	if err := full.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := codes.Issue(ctx, phone, addr); err != nil {
		t.Fatalf("the retry once Redis has room: %v, want a code", err)
	}
}

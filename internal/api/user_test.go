package api_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/user"
	"time"
)

func randomPhone() string {
	return fmt.Sprintf("1%d%09d", 3+rand.IntN(7), rand.IntN(1_000_000_000))
}

func TestLoginFlow(t *testing.T) {
	t.Parallel()
	a := startAPI(t, nil)
	phone := randomPhone()

	res := call(t, "POST", a.URL+"/user/code?phone="+phone, nil, nil)
	if res.Status != 200 || strings.TrimSpace(res.Raw) != `{"success":true}` {
		t.Fatalf("send code: %d %s", res.Status, res.Raw)
	}
	code := a.Inbox.last(t, phone)
	if !regexp.MustCompile(`^[0-9]{6}$`).MatchString(code) {
		t.Fatalf("code %q is not six digits", code)
	}
	if stored := a.Redis.Client.HGet(t.Context(), user.Keys{Prefix: a.Redis.Prefix}.Code(phone, "127.0.0.1"), "code").Val(); stored != code {
		t.Fatalf("login:code:{%s}:127.0.0.1 holds %q, the phone got %q", phone, stored, code)
	}

	res = a.login(t, phone, code)
	var token string
	if res.Status != 200 || !res.Body.Success || json.Unmarshal(res.Body.Data, &token) != nil {
		t.Fatalf("login: %d %s", res.Status, res.Raw)
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(token) {
		t.Fatalf("token %q is not 128 random bits in hex", token)
	}
	key := user.Keys{Prefix: a.Redis.Prefix}.Session(token)
	if ttl := a.Redis.Client.TTL(t.Context(), key).Val(); ttl < 29*time.Minute || ttl > 30*time.Minute {
		t.Fatalf("session TTL %v, want 30m", ttl)
	}

	for _, header := range []string{token, "Bearer " + token} {
		res = call(t, "GET", a.URL+"/user/me", map[string]string{"authorization": header}, nil)
		var me struct {
			ID       int64   `json:"id"`
			NickName string  `json:"nickName"`
			Icon     *string `json:"icon"`
		}
		if res.Status != 200 || !res.Body.Success || json.Unmarshal(res.Body.Data, &me) != nil {
			t.Fatalf("me with %q: %d %s", header, res.Status, res.Raw)
		}
		var dbID int64
		var dbNick string
		if err := a.MySQL.DB.QueryRow("SELECT id, nick_name FROM tb_user WHERE phone = ?", phone).Scan(&dbID, &dbNick); err != nil {
			t.Fatal(err)
		}
		if me.ID != dbID || me.NickName != dbNick || !strings.HasPrefix(me.NickName, "user_") || me.Icon == nil {
			t.Fatalf("me = %s, want the tb_user row (%d, %s)", res.Body.Data, dbID, dbNick)
		}
	}

	res = call(t, "POST", a.URL+"/user/logout", map[string]string{"authorization": token}, nil)
	if res.Status != 200 || !res.Body.Success {
		t.Fatalf("logout: %d %s", res.Status, res.Raw)
	}
	res = call(t, "GET", a.URL+"/user/me", map[string]string{"authorization": token}, nil)
	if res.Status != 401 || res.Body.Success {
		t.Fatalf("me after logout: %d %s, want 401", res.Status, res.Raw)
	}

	var users int
	if err := a.MySQL.DB.QueryRow("SELECT COUNT(*) FROM tb_user").Scan(&users); err != nil || users != 1 {
		t.Fatalf("%d users after one login (%v)", users, err)
	}
}

func TestCodeRulesOverHTTP(t *testing.T) {
	t.Parallel()
	a := startAPI(t, map[string]string{"SECKILL_CODE_COOLDOWN": "1ms"})
	phone, other := randomPhone(), randomPhone()

	code := a.sendCode(t, phone)
	if res := a.login(t, other, code); res.Status != 200 || res.Body.Success || res.Body.ErrorMsg != user.ErrNoCode.Message {
		t.Fatalf("phone A's code for phone B: %d %s", res.Status, res.Raw)
	}
	if res := a.login(t, phone, code); !res.Body.Success {
		t.Fatalf("first use: %s", res.Raw)
	}
	if res := a.login(t, phone, code); res.Status != 200 || res.Body.Success || res.Body.ErrorMsg != user.ErrNoCode.Message {
		t.Fatalf("second use of a code: %d %s", res.Status, res.Raw)
	}

	time.Sleep(5 * time.Millisecond) // past the 1 ms code cooldown, which Redis times (no clock to inject)
	code = a.sendCode(t, phone)
	bad := "000000"
	if code == bad {
		bad = "111111"
	}
	for i := 1; i <= 5; i++ {
		res := a.login(t, phone, bad)
		if res.Status != 200 || res.Body.Success || (res.Body.ErrorMsg != user.ErrWrongCode.Message && res.Body.ErrorMsg != user.ErrCodeBurned.Message) {
			t.Fatalf("wrong try %d: %d %s", i, res.Status, res.Raw)
		}
	}
	if res := a.login(t, phone, code); res.Body.Success || res.Body.ErrorMsg != user.ErrNoCode.Message {
		t.Fatalf("6th try with the right code after 5 wrong ones: %s, want the code burned", res.Raw)
	}
}

// The first middleware refreshes the session on every route, protected or
// not, so a user browsing public pages stays logged in. With the session
// cache (the default) Redis sees a user's session once per cache TTL, and
// refreshes it then; this is the uncached contract, per request.
func TestSessionTTLRefreshedOnUnprotectedRoute(t *testing.T) {
	t.Parallel()
	a := startAPI(t, map[string]string{"SECKILL_SESSION_CACHE_TTL": "off"})
	token := a.loggedIn(t, randomPhone())
	key := user.Keys{Prefix: a.Redis.Prefix}.Session(token)
	ctx := t.Context()
	for _, path := range []string{"/healthz", "/no-such-page"} {
		a.Redis.Client.Expire(ctx, key, time.Minute)
		call(t, "GET", a.URL+path, map[string]string{"authorization": token}, nil)
		if ttl := a.Redis.Client.TTL(ctx, key).Val(); ttl < 29*time.Minute {
			t.Fatalf("TTL after GET %s = %v, want refreshed to 30m", path, ttl)
		}
	}
	// Without the session header nothing is touched.
	a.Redis.Client.Expire(ctx, key, time.Minute)
	call(t, "GET", a.URL+"/healthz", nil, nil)
	if ttl := a.Redis.Client.TTL(ctx, key).Val(); ttl > time.Minute {
		t.Fatalf("TTL %v changed by a request without the token", ttl)
	}
}

// Two API instances cache sessions for a minute; a logout on one takes
// effect on the other at once (the logout channel), not after the cache
// TTL.
func TestLogoutReachesEveryInstance(t *testing.T) {
	t.Parallel()
	logoutOnOneInstance(t, map[string]string{"SECKILL_SESSION_CACHE_TTL": "1m"})
}

// logoutOnOneInstance starts two API instances with env on one Redis and
// one MySQL, logs a user in on the first and checks the session on both,
// logs out on the first, and waits (5 s at most) until the second refuses
// the token too. It returns the token and env, for more instances.
func logoutOnOneInstance(t *testing.T, env map[string]string) (map[string]string, string) {
	t.Helper()
	a := startAPI(t, env)
	env["SECKILL_KEY_PREFIX"], env["SECKILL_MYSQL_DSN"] = a.Redis.Prefix, a.MySQL.DSN
	b := startAPI(t, env)
	token := a.loggedIn(t, randomPhone())
	auth := map[string]string{"authorization": token}
	for _, api := range []*testAPI{a, b} {
		if res := call(t, "GET", api.URL+"/user/me", auth, nil); res.Status != 200 {
			t.Fatalf("me on %s: %d %s", api.URL, res.Status, res.Raw)
		}
	}
	if res := call(t, "POST", a.URL+"/user/logout", auth, nil); res.Status != 200 {
		t.Fatalf("logout: %d %s", res.Status, res.Raw)
	}
	took := waitLoggedOut(t, b, token, "the other instance, after the logout")
	t.Logf("the other instance refused the token %v after the logout", took.Round(time.Millisecond))
	if res := call(t, "GET", a.URL+"/user/me", auth, nil); res.Status != 401 {
		t.Fatalf("me after logout on the instance that logged out: %d", res.Status)
	}
	return env, token
}

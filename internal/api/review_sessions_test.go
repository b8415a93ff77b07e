package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/internal/jwtauth"
	"github.com/seckill/seckill/internal/testsupport"
)

// expiredCopy is token re-signed with the same claims but an expiry in the
// past: what a client holds after the access TTL passed idle. Re-signing
// stands in for waiting out SECKILL_JWT_ACCESS_TTL (a minute at least).
func expiredCopy(t *testing.T, token string, hs jwtauth.KeySpec) string {
	t.Helper()
	var c jwtauth.Claims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &c); err != nil {
		t.Fatal(err)
	}
	c.IssuedAt = jwt.NewNumericDate(time.Now().Add(-20 * time.Minute))
	c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-5 * time.Minute))
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, c)
	tok.Header["kid"] = hs.KID
	s, err := tok.SignedString(decodeKey(t, hs))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A logout ends the login whenever the client proves it holds it: an
// access token whose signature is valid though it expired, or the refresh
// cookie alone. Before, /user/logout refused an expired token with 401 and
// the 7-day login lived on.
func TestLogoutAfterTheAccessTokenExpired(t *testing.T) {
	t.Parallel()
	keys, hs, _ := jwtKeys(t, "hs-1")
	a := startAPI(t, map[string]string{"SECKILL_SESSION_MODE": "jwt", "SECKILL_JWT_KEYS": keys, "SECKILL_CODE_COOLDOWN": "1ms", "SECKILL_JWT_ACCESS_TTL": "1m"})

	t.Run("expired access token", func(t *testing.T) {
		access, refresh := a.loginGrant(t, randomPhone())
		expired := expiredCopy(t, access, hs)
		wantLoggedOut(t, call(t, "GET", a.URL+"/user/me", map[string]string{"authorization": expired}, nil), "the expired copy")
		res := call(t, "POST", a.URL+"/user/logout", map[string]string{"authorization": expired}, nil)
		if res.Status != 200 || !res.Body.Success {
			t.Fatalf("logout with an expired token: %d %s, want 200", res.Status, res.Raw)
		}
		if c := refreshCookieOf(t, res); c == nil || c.MaxAge >= 0 {
			t.Fatalf("the logout does not delete the refresh cookie: %+v", c)
		}
		wantLoggedOut(t, a.refresh(t, refresh), "the refresh cookie after a logout with an expired token")
		wantLoggedOut(t, call(t, "GET", a.URL+"/user/me", map[string]string{"authorization": access}, nil), "the family's live access token after that logout")
	})

	t.Run("refresh cookie only", func(t *testing.T) {
		phone := randomPhone()
		time.Sleep(2 * time.Millisecond) // past the 1 ms code cooldown, which Redis times (no clock to inject)
		res := a.login(t, phone, a.sendCode(t, phone))
		access := tokenOf(t, res)
		var forLogout *http.Cookie
		for _, c := range (&http.Response{Header: res.Header}).Cookies() {
			if c.Name == "seckill_refresh" && strings.HasPrefix("/user/logout", c.Path) {
				forLogout = c
			}
		}
		if forLogout == nil || !forLogout.HttpOnly || forLogout.SameSite != http.SameSiteStrictMode {
			t.Fatalf("the login sets no HttpOnly, SameSite=Strict refresh cookie that a browser sends to /user/logout: %v", res.Header.Values("Set-Cookie"))
		}
		out := call(t, "POST", a.URL+"/user/logout", map[string]string{"Cookie": "seckill_refresh=" + forLogout.Value}, nil)
		if out.Status != 200 || !out.Body.Success {
			t.Fatalf("logout with the refresh cookie only: %d %s, want 200", out.Status, out.Raw)
		}
		wantLoggedOut(t, a.refresh(t, forLogout.Value), "the refresh cookie after its logout")
		waitLoggedOut(t, a, access, "the family's access token after a cookie logout")
	})

	t.Run("nothing to prove", func(t *testing.T) {
		_, refresh := a.loginGrant(t, randomPhone())
		fid, _ := jwtauth.FamilyOf(refresh)
		forged := fid + ".AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
		for name, h := range map[string]map[string]string{
			"no credentials": nil,
			"unsigned token": {"authorization": "abc.def.ghi"},
			"made-up cookie": {"Cookie": "seckill_refresh=" + forged},
		} {
			wantLoggedOut(t, call(t, "POST", a.URL+"/user/logout", h, nil), "logout with "+name)
		}
		if res := a.refresh(t, refresh); res.Status != 200 {
			t.Fatalf("the login after logouts that proved nothing: %d %s", res.Status, res.Raw)
		}
	})
}

// A made-up refresh cookie for a victim's family (its id is in every access
// token) is a plain 401 that changes nothing; only a secret the family
// really issued and retired counts as a reuse. Before, any unknown secret
// deleted the family: anyone could log anyone out everywhere.
func TestMadeUpRefreshCookieChangesNothing(t *testing.T) {
	t.Parallel()
	env := modeEnv(t, "jwt")
	env["SECKILL_JWT_REFRESH_GRACE"] = "off"
	a := startAPI(t, env)
	access, refresh := a.loginGrant(t, randomPhone())
	fid, _ := jwtauth.FamilyOf(refresh)
	for _, secret := range []string{"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_"} {
		res := a.refresh(t, fid+"."+secret)
		wantLoggedOut(t, res, "a made-up refresh cookie")
		if strings.Contains(res.Body.ErrorMsg, "already used") {
			t.Fatalf("a made-up secret was taken for a reuse: %s", res.Raw)
		}
	}
	if res := call(t, "GET", a.URL+"/user/me", map[string]string{"authorization": access}, nil); res.Status != 200 {
		t.Fatalf("the victim's access token after made-up cookies: %d %s", res.Status, res.Raw)
	}
	res := a.refresh(t, refresh)
	if res.Status != 200 {
		t.Fatalf("the victim's refresh cookie after made-up cookies: %d %s", res.Status, res.Raw)
	}
	// The control: the retired secret, presented again, is a reuse.
	next := refreshCookieOf(t, res).Value
	if res := a.refresh(t, refresh); !strings.Contains(res.Body.ErrorMsg, "already used") {
		t.Fatalf("a retired secret presented again: %d %s, want a reuse", res.Status, res.Raw)
	}
	wantLoggedOut(t, a.refresh(t, next), "the family's current secret after a real reuse")
}

// A validly signed token without iat is refused like any bad token; before,
// reading its missing issue time panicked and the answer was a 500.
func TestTokenWithoutIssueTime(t *testing.T) {
	t.Parallel()
	keys, hs, _ := jwtKeys(t, "hs-1")
	a := startAPI(t, map[string]string{"SECKILL_SESSION_MODE": "jwt", "SECKILL_JWT_KEYS": keys, "SECKILL_CODE_COOLDOWN": "1ms"})
	var c jwtauth.Claims
	if _, _, err := jwt.NewParser().ParseUnverified(a.loggedIn(t, randomPhone()), &c); err != nil {
		t.Fatal(err)
	}
	c.IssuedAt = nil
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, c)
	tok.Header["kid"] = hs.KID
	s, err := tok.SignedString(decodeKey(t, hs))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ method, path string }{{"GET", "/user/me"}, {"POST", "/user/logout"}} {
		wantLoggedOut(t, call(t, r.method, a.URL+r.path, map[string]string{"authorization": s}, nil), "a token without iat on "+r.path)
	}
}

// X-Forwarded-Proto is a proxy's word: from a client on plain HTTP it does
// not make the refresh cookie Secure nor the answers carry HSTS. Behind a
// trusted proxy that terminates TLS it does.
func TestForwardedProtoOnlyFromTheProxy(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		trusted string
		secure  bool
	}{{"a client", "", false}, {"the trusted proxy", "127.0.0.1/32", true}} {
		t.Run(tt.name, func(t *testing.T) {
			env := modeEnv(t, "jwt")
			if tt.trusted != "" {
				env["SECKILL_API_TRUSTED_PROXIES"] = tt.trusted
			}
			a := startAPI(t, env)
			phone := randomPhone()
			code := a.sendCode(t, phone)
			res := call(t, "POST", a.URL+"/user/login", map[string]string{"X-Forwarded-Proto": "https"}, `{"phone":"`+phone+`","code":"`+code+`"}`)
			c := refreshCookieOf(t, res)
			if c == nil || c.Secure != tt.secure {
				t.Fatalf("refresh cookie %+v: want Secure %v", c, tt.secure)
			}
			if hsts := res.Header.Get("Strict-Transport-Security"); (hsts != "") != tt.secure {
				t.Fatalf("Strict-Transport-Security %q, want it %v", hsts, tt.secure)
			}
		})
	}
}

// An instance whose revocation follower keeps failing (here: the feed's
// key is no stream, so every XREAD fails while Redis itself answers)
// reports itself not ready, names why in /readyz, the log and the
// dependency metric, and is ready again once the feed reads.
func TestStaleRevocationFollowerIsNotReady(t *testing.T) {
	t.Parallel()
	env := modeEnv(t, "jwt")
	env["SECKILL_JWT_REVOCATIONS_STALE"] = "1s"
	a := startAPI(t, env)
	feed := jwtauth.Keys{Prefix: a.Redis.Prefix}.Revocations()
	ctx := t.Context()
	if err := a.Redis.Client.Del(ctx, feed).Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.Redis.Client.Set(ctx, feed, "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	body := testsupport.Eventually(t, a.Admin+"/readyz", http.StatusServiceUnavailable, 20*time.Second)
	if !strings.Contains(body, "jwt revocations") {
		t.Fatalf("/readyz does not name the revocation feed: %s", body)
	}
	testsupport.Wait(t, 5*time.Second, "the log names the stale feed", func() bool {
		return strings.Contains(a.Logs.String(), "jwt revocations")
	})
	_, metrics := testsupport.Get(ctx, a.Admin+"/metrics")
	if !strings.Contains(metrics, `seckill_dependency_up{dependency="jwt revocations"} 0`) {
		t.Fatal("the dependency metric does not show the stale feed")
	}
	if err := a.Redis.Client.Del(ctx, feed).Err(); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, a.Admin+"/readyz", http.StatusOK, 20*time.Second)
}

// A method a path's routes do not take is 405 with Allow naming those
// they do (RFC 9110), also where a parameter route of another method
// would otherwise have taken the path (GET /voucher-order/seckill/1 was a
// 400 about the order id from GET /voucher-order/:id).
func TestWrongMethodIs405WithAllow(t *testing.T) {
	t.Parallel()
	a := startAPI(t, nil)
	token := a.loggedIn(t, randomPhone())
	for _, tt := range []struct{ method, path, allow string }{
		{"GET", "/voucher-order/seckill/1", "POST"},
		{"GET", "/user/login", "POST"},
		{"GET", "/user/code", "POST"},
		{"DELETE", "/shop/1", "GET"},
		{"PATCH", "/shop", "POST, PUT"},
		{"POST", "/.well-known/jwks.json", "GET"},
	} {
		res := call(t, tt.method, a.URL+tt.path, map[string]string{"authorization": token}, nil)
		if res.Status != 405 || res.Header.Get("Allow") != tt.allow {
			t.Errorf("%s %s: %d Allow %q %s, want 405 Allow %q", tt.method, tt.path, res.Status, res.Header.Get("Allow"), res.Raw, tt.allow)
		}
	}
}

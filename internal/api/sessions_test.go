package api_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/jwtauth"
	"github.com/seckill/seckill/internal/testsupport"
)

// jwtKeys is a key file with an HS256 signing key and an EdDSA key that
// still verifies, and the specs to sign test tokens with.
func jwtKeys(t *testing.T, sign string) (file string, hs, ed jwtauth.KeySpec) {
	t.Helper()
	var err error
	if hs, err = jwtauth.NewKeySpec("hs-1", jwtauth.HS256); err != nil {
		t.Fatal(err)
	}
	if ed, err = jwtauth.NewKeySpec("ed-1", jwtauth.EdDSA); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(jwtauth.KeyFile{Sign: sign, Keys: []jwtauth.KeySpec{hs, ed}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b), hs, ed
}

// modeEnv is the configuration of a session mode.
func modeEnv(t *testing.T, mode string) map[string]string {
	t.Helper()
	env := map[string]string{"SECKILL_SESSION_MODE": mode, "SECKILL_CODE_COOLDOWN": "1ms"}
	if mode == "jwt" {
		env["SECKILL_JWT_KEYS"], _, _ = jwtKeys(t, "hs-1")
	}
	return env
}

func refreshCookieOf(t *testing.T, res response) *http.Cookie {
	t.Helper()
	for _, c := range (&http.Response{Header: res.Header}).Cookies() {
		if c.Name == "seckill_refresh" {
			return c
		}
	}
	return nil
}

func tokenOf(t *testing.T, res response) string {
	t.Helper()
	var token string
	if res.Status != 200 || !res.Body.Success || json.Unmarshal(res.Body.Data, &token) != nil || token == "" {
		t.Fatalf("want a token: %d %s", res.Status, res.Raw)
	}
	return token
}

// loginGrant logs phone in and returns the access token and the refresh
// cookie's value ("" in the redis mode).
func (a *testAPI) loginGrant(t *testing.T, phone string) (access, refresh string) {
	t.Helper()
	time.Sleep(2 * time.Millisecond) // past the 1 ms code cooldown, which Redis times (no clock to inject)
	res := a.login(t, phone, a.sendCode(t, phone))
	access = tokenOf(t, res)
	if c := refreshCookieOf(t, res); c != nil {
		refresh = c.Value
	}
	return access, refresh
}

func (a *testAPI) refresh(t *testing.T, value string) response {
	t.Helper()
	h := map[string]string{}
	if value != "" {
		h["Cookie"] = "seckill_refresh=" + value
	}
	return call(t, "POST", a.URL+"/user/refresh", h, nil)
}

func wantLoggedOut(t *testing.T, res response, what string) {
	t.Helper()
	if res.Status != 401 || res.Body.Success || !strings.Contains(res.Body.ErrorMsg, "log in") {
		t.Fatalf("%s: %d %s, want 401 telling to log in again", what, res.Status, res.Raw)
	}
}

// waitLoggedOut waits, 5 s at most, until api refuses token as
// wantLoggedOut wants: a revocation made elsewhere reaches an instance
// through the revocation feed. It returns how long that took.
func waitLoggedOut(t *testing.T, api *testAPI, token, what string) time.Duration {
	t.Helper()
	start := time.Now()
	var res response
	testsupport.Poll(5*time.Second, func() bool {
		res = call(t, "GET", api.URL+"/user/me", map[string]string{"authorization": token}, nil)
		return res.Status != 200
	})
	wantLoggedOut(t, res, what)
	return time.Since(start)
}

// Every authenticated route, one table, run in both session modes: served
// with the session, 401 without it, with a bad one and after a logout;
// "log out everywhere" ends a user's other sessions too.
func TestAuthenticatedRoutesInBothModes(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"redis", "jwt"} {
		t.Run(mode, func(t *testing.T) {
			env := modeEnv(t, mode)
			env["SECKILL_ADMIN_TOKEN"] = testAdminToken
			a := startAPI(t, env)
			now := time.Now()
			voucher := a.createVoucher(t, 5, now.Add(-time.Hour), now.Add(time.Hour))
			phone := randomPhone()
			token, _ := a.loginGrant(t, phone)
			auth := map[string]string{"authorization": token}
			orderID := tokenOf(t, call(t, "POST", a.URL+"/voucher-order/seckill/"+voucher, auth, nil))

			routes := []struct{ method, path string }{
				{"GET", "/user/me"},
				{"POST", "/voucher-order/seckill/" + voucher},
				{"GET", "/voucher-order/" + orderID},
				{"GET", "/voucher-order/of/voucher/" + voucher},
			}
			for _, r := range routes {
				if res := call(t, r.method, a.URL+r.path, auth, nil); res.Status == 401 || res.Status >= 500 {
					t.Fatalf("%s %s with the session: %d %s", r.method, r.path, res.Status, res.Raw)
				}
				if res := call(t, r.method, a.URL+r.path, nil, nil); res.Status != 401 || !strings.Contains(res.Body.ErrorMsg, "log in") {
					t.Fatalf("%s %s without a session: %d %s", r.method, r.path, res.Status, res.Raw)
				}
				for _, bad := range []string{"nope", token + "x", strings.Repeat("a", 32), "Bearer "} {
					wantLoggedOut(t, call(t, r.method, a.URL+r.path, map[string]string{"authorization": bad}, nil), r.method+" "+r.path+" with "+bad)
				}
			}
			if res := call(t, "POST", a.URL+"/user/logout?all=maybe", auth, nil); res.Status != 400 {
				t.Fatalf("logout?all=maybe: %d %s, want 400", res.Status, res.Raw)
			}
			if res := call(t, "POST", a.URL+"/user/logout", auth, nil); res.Status != 200 || !res.Body.Success {
				t.Fatalf("logout: %d %s", res.Status, res.Raw)
			}
			for _, r := range append(routes, struct{ method, path string }{"POST", "/user/logout"}) {
				wantLoggedOut(t, call(t, r.method, a.URL+r.path, auth, nil), r.method+" "+r.path+" after logout")
			}

			// Log out everywhere: three sessions of one user, and another user's.
			var mine []string
			for range 3 {
				tok, _ := a.loginGrant(t, phone)
				mine = append(mine, tok)
			}
			stranger, _ := a.loginGrant(t, randomPhone())
			if res := call(t, "POST", a.URL+"/user/logout?all=true", map[string]string{"authorization": mine[0]}, nil); res.Status != 200 {
				t.Fatalf("logout?all=true: %d %s", res.Status, res.Raw)
			}
			for i, tok := range mine {
				wantLoggedOut(t, call(t, "GET", a.URL+"/user/me", map[string]string{"authorization": tok}, nil), fmt.Sprintf("session %d after logout everywhere", i))
			}
			if res := call(t, "GET", a.URL+"/user/me", map[string]string{"authorization": stranger}, nil); res.Status != 200 {
				t.Fatalf("another user's session after logout everywhere: %d %s", res.Status, res.Raw)
			}
			// A login after "everywhere" is a new session that works.
			again, _ := a.loginGrant(t, phone)
			if res := call(t, "GET", a.URL+"/user/me", map[string]string{"authorization": again}, nil); res.Status != 200 {
				t.Fatalf("a login right after logout everywhere: %d %s", res.Status, res.Raw)
			}
		})
	}
}

// A token of one mode sent to an instance of the other is refused.
func TestTokenOfTheOtherModeIsRefused(t *testing.T) {
	t.Parallel()
	r := startAPI(t, modeEnv(t, "redis"))
	env := modeEnv(t, "jwt")
	env["SECKILL_KEY_PREFIX"], env["SECKILL_MYSQL_DSN"] = r.Redis.Prefix, r.MySQL.DSN
	j := startAPI(t, env)
	phone := randomPhone()
	redisToken, _ := r.loginGrant(t, phone)
	jwtToken, _ := j.loginGrant(t, phone)
	wantLoggedOut(t, call(t, "GET", j.URL+"/user/me", map[string]string{"authorization": redisToken}, nil), "a redis session on the jwt instance")
	wantLoggedOut(t, call(t, "GET", r.URL+"/user/me", map[string]string{"authorization": jwtToken}, nil), "a jwt on the redis instance")
	wantLoggedOut(t, r.refresh(t, "anything"), "a refresh on the redis instance")
}

// The jwt twin of TestLogoutReachesEveryInstance: a logout on one instance
// is refused by the other within milliseconds, though neither asks Redis
// about a token.
func TestJWTLogoutReachesEveryInstance(t *testing.T) {
	t.Parallel()
	env, token := logoutOnOneInstance(t, modeEnv(t, "jwt"))
	auth := map[string]string{"authorization": token}
	// An instance started after the logout knows it too (it reads the feed
	// before it serves).
	c := startAPI(t, env)
	wantLoggedOut(t, call(t, "GET", c.URL+"/user/me", auth, nil), "a logged-out token on an instance started later")
}

// Refresh: the cookie's attributes, rotation on every use, the bad
// cookies, and a reuse after the grace window revoking the family (the
// access tokens with it). Nothing of any token reaches the log.
func TestRefreshRotatesAndDetectsReuse(t *testing.T) {
	t.Parallel()
	env := modeEnv(t, "jwt")
	env["SECKILL_JWT_REFRESH_GRACE"] = "300ms"
	a := startAPI(t, env)
	phone := randomPhone()
	time.Sleep(2 * time.Millisecond) // past the 1 ms code cooldown, which Redis times (no clock to inject)
	res := a.login(t, phone, a.sendCode(t, phone))
	access0 := tokenOf(t, res)
	c := refreshCookieOf(t, res)
	if c == nil || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/user/refresh" || c.Secure || c.MaxAge != 7*24*3600 {
		t.Fatalf("refresh cookie %+v: want HttpOnly, SameSite=Strict, Path=/user/refresh, not Secure over http, 7 days", c)
	}
	r0 := c.Value
	if strings.Contains(res.Raw, r0) {
		t.Fatal("the refresh token is in the body: scripts could read it")
	}

	res = a.refresh(t, r0)
	access1 := tokenOf(t, res)
	r1 := refreshCookieOf(t, res).Value
	if r1 == r0 || access1 == access0 {
		t.Fatal("a refresh handed back the same tokens: no rotation")
	}
	if res := call(t, "GET", a.URL+"/user/me", map[string]string{"authorization": access1}, nil); res.Status != 200 {
		t.Fatalf("the refreshed access token: %d %s", res.Status, res.Raw)
	}
	fid, _ := jwtauth.FamilyOf(r1)
	unknown := strings.Replace(r1, fid, "AAAAAAAAAAAAAAAAAAAAAAAAAA", 1)
	for name, v := range map[string]string{"missing": "", "unknown": unknown, "malformed": "x.y", "garbage after": r1 + "x"} {
		wantLoggedOut(t, a.refresh(t, v), "refresh cookie "+name)
	}

	// Expired: the family's TTL ran out.
	_, expiring := a.loginGrant(t, phone)
	efid, _ := jwtauth.FamilyOf(expiring)
	family := jwtauth.Keys{Prefix: a.Redis.Prefix}.Family(efid)
	a.Redis.Client.PExpire(t.Context(), family, time.Millisecond)
	testsupport.Wait(t, 5*time.Second, "the family's TTL run out", func() bool { return a.Redis.Client.Exists(t.Context(), family).Val() == 0 })
	wantLoggedOut(t, a.refresh(t, expiring), "an expired refresh cookie")

	time.Sleep(400 * time.Millisecond) // past the 300 ms grace window: the test is about that window
	res = a.refresh(t, r0)
	wantLoggedOut(t, res, "a reused refresh token")
	if !strings.Contains(res.Body.ErrorMsg, "already used") {
		t.Fatalf("reuse answered %q, want it named", res.Body.ErrorMsg)
	}
	if c := refreshCookieOf(t, res); c == nil || c.MaxAge >= 0 {
		t.Fatalf("a refused refresh leaves the cookie: %+v", c)
	}
	wantLoggedOut(t, a.refresh(t, r1), "the family's current refresh token after a reuse")
	wantLoggedOut(t, call(t, "GET", a.URL+"/user/me", map[string]string{"authorization": access1}, nil), "the family's access token after a reuse")

	logs := a.Logs.String()
	for name, secret := range map[string]string{"access token": access0, "refreshed access token": access1, "refresh token": r0, "rotated refresh token": r1} {
		if strings.Contains(logs, secret) || strings.Contains(logs, secret[len(secret)-20:]) {
			t.Fatalf("the %s is in the log", name)
		}
	}
}

// Two clients race one refresh token. Within the grace window both get the
// same next token (one rotation: an honest retry cannot fork the family);
// with no grace exactly one wins and the loser's reuse revokes the family,
// the winner's new token with it.
func TestRefreshRace(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		grace     string
		bothServe bool
	}{{"10s", true}, {"off", false}} {
		t.Run("grace="+tt.grace, func(t *testing.T) {
			env := modeEnv(t, "jwt")
			env["SECKILL_JWT_REFRESH_GRACE"] = tt.grace
			a := startAPI(t, env)
			_, r0 := a.loginGrant(t, randomPhone())
			var wg sync.WaitGroup
			results := make([]response, 2)
			for i := range results {
				wg.Go(func() { results[i] = a.refresh(t, r0) })
			}
			wg.Wait()
			var won []string
			for _, res := range results {
				if res.Status == 200 {
					won = append(won, refreshCookieOf(t, res).Value)
				} else {
					wantLoggedOut(t, res, "the race's loser")
				}
			}
			if tt.bothServe {
				if len(won) != 2 || won[0] != won[1] {
					t.Fatalf("within the grace window: %d served, tokens equal %v; want both served the same next token", len(won), len(won) == 2 && won[0] == won[1])
				}
				if res := a.refresh(t, won[0]); res.Status != 200 {
					t.Fatalf("the next token after the race: %d %s", res.Status, res.Raw)
				}
				return
			}
			if len(won) != 1 {
				t.Fatalf("%d of 2 racing refreshes won, want exactly 1", len(won))
			}
			wantLoggedOut(t, a.refresh(t, won[0]), "the winner's token after the loser's reuse")
		})
	}
}

// Tokens that must not pass: each answered 401 in the Result envelope with
// "log in again"; a well-made one passes (the control).
func TestBadAccessTokens(t *testing.T) {
	t.Parallel()
	keys, hs, ed := jwtKeys(t, "hs-1")
	a := startAPI(t, map[string]string{"SECKILL_SESSION_MODE": "jwt", "SECKILL_JWT_KEYS": keys, "SECKILL_CODE_COOLDOWN": "1ms"})
	good := a.loggedIn(t, randomPhone())
	var claims jwtauth.Claims
	if _, _, err := jwt.NewParser().ParseUnverified(good, &claims); err != nil {
		t.Fatal(err)
	}
	secret := decodeKey(t, hs)
	edPub := []byte(edPublic(t, ed))
	other, _ := jwtauth.NewKeySpec("hs-1", jwtauth.HS256)

	sign := func(method jwt.SigningMethod, kid string, key any, edit func(*jwtauth.Claims)) string {
		c := claims
		edit(&c)
		tok := jwt.NewWithClaims(method, c)
		if kid != "" {
			tok.Header["kid"] = kid
		}
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	keep := func(*jwtauth.Claims) {}
	now := time.Now()
	tests := []struct {
		name  string
		token string
		ok    bool
	}{
		{"control", sign(jwt.SigningMethodHS256, "hs-1", secret, keep), true},
		{"unknown kid", sign(jwt.SigningMethodHS256, "hs-9", secret, keep), false},
		{"no kid", sign(jwt.SigningMethodHS256, "", secret, keep), false},
		{"another key, same kid", sign(jwt.SigningMethodHS256, "hs-1", decodeKey(t, other), keep), false},
		{"alg none", sign(jwt.SigningMethodNone, "hs-1", jwt.UnsafeAllowNoneSignatureType, keep), false},
		{"HS256 keyed with the EdDSA public key", sign(jwt.SigningMethodHS256, "ed-1", edPub, keep), false},
		{"HS384", sign(jwt.SigningMethodHS384, "hs-1", secret, keep), false},
		{"expired", sign(jwt.SigningMethodHS256, "hs-1", secret, func(c *jwtauth.Claims) { c.ExpiresAt = jwt.NewNumericDate(now.Add(-time.Minute)) }), false},
		{"no exp", sign(jwt.SigningMethodHS256, "hs-1", secret, func(c *jwtauth.Claims) { c.ExpiresAt = nil }), false},
		{"not yet valid", sign(jwt.SigningMethodHS256, "hs-1", secret, func(c *jwtauth.Claims) { c.NotBefore = jwt.NewNumericDate(now.Add(time.Minute)) }), false},
		{"issued in the future", sign(jwt.SigningMethodHS256, "hs-1", secret, func(c *jwtauth.Claims) { c.IssuedAt = jwt.NewNumericDate(now.Add(time.Minute)) }), false},
		{"another issuer", sign(jwt.SigningMethodHS256, "hs-1", secret, func(c *jwtauth.Claims) { c.Issuer = "someone" }), false},
		{"no user", sign(jwt.SigningMethodHS256, "hs-1", secret, func(c *jwtauth.Claims) { c.Subject = "" }), false},
		{"no family", sign(jwt.SigningMethodHS256, "hs-1", secret, func(c *jwtauth.Claims) { c.Family = "" }), false},
		{"malformed", "abc.def.ghi", false},
		{"two parts", good[:strings.LastIndex(good, ".")], false},
		{"trailing garbage", good + "x", false},
		{"a fourth part", good + ".x", false},
		{"tampered payload", tamper(good), false},
		{"huge", strings.Repeat("a", 5000), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, "GET", a.URL+"/user/me", map[string]string{"authorization": tt.token}, nil)
			if tt.ok {
				if res.Status != 200 {
					t.Fatalf("%d %s, want 200", res.Status, res.Raw)
				}
				return
			}
			wantLoggedOut(t, res, tt.name)
		})
	}

	t.Run("deleted user", func(t *testing.T) {
		phone := randomPhone()
		access, refresh := a.loginGrant(t, phone)
		if _, err := a.MySQL.DB.Exec("DELETE FROM tb_user WHERE phone = ?", phone); err != nil {
			t.Fatal(err)
		}
		// The refresh reads the user's row: none, no new token.
		wantLoggedOut(t, a.refresh(t, refresh), "a refresh of a deleted user")
		// The access token is checked without a lookup: deleting a user
		// ends its sessions with seckillctl logout-user.
		var id int64
		if err := json.Unmarshal(call(t, "GET", a.URL+"/user/me", map[string]string{"authorization": access}, nil).Body.Data, &struct {
			ID *int64 `json:"id"`
		}{&id}); err != nil || id == 0 {
			t.Fatalf("the deleted user's token before logout-user: %v", err)
		}
		// seckillctl writes the revocation to the feed; the api applies it
		// when its follower reads it, a moment later.
		a.ctl(t, "logout-user", fmt.Sprint(id))
		waitLoggedOut(t, a, access, "a deleted user's access token")
	})
}

func decodeKey(t *testing.T, spec jwtauth.KeySpec) []byte {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(spec.Key)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func edPublic(t *testing.T, spec jwtauth.KeySpec) ed25519.PublicKey {
	t.Helper()
	return ed25519.NewKeyFromSeed(decodeKey(t, spec)).Public().(ed25519.PublicKey)
}

// tamper changes the user id in token's payload, keeping its signature.
func tamper(token string) string {
	parts := strings.Split(token, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var m map[string]any
	_ = json.Unmarshal(payload, &m)
	m["sub"] = "1"
	payload, _ = json.Marshal(m)
	parts[1] = base64.RawURLEncoding.EncodeToString(payload)
	return strings.Join(parts, ".")
}

// ctl runs a seckillctl command with the api's configuration.
func (a *testAPI) ctl(t *testing.T, args ...string) string {
	t.Helper()
	var out strings.Builder
	if err := app.Ctl(args, func(k string) (string, bool) { v, ok := a.Env[k]; return v, ok }, &out); err != nil {
		t.Fatalf("seckillctl %v: %v", args, err)
	}
	return out.String()
}

// With an EdDSA signing key the API publishes its public keys, and they
// verify its access tokens; in the redis mode there is nothing to publish.
func TestJWKSRoute(t *testing.T) {
	t.Parallel()
	keys, hs, ed := jwtKeys(t, "ed-1")
	a := startAPI(t, map[string]string{"SECKILL_SESSION_MODE": "jwt", "SECKILL_JWT_KEYS": keys})
	token := a.loggedIn(t, randomPhone())
	res := call(t, "GET", a.URL+"/.well-known/jwks.json", nil, nil)
	if res.Status != 200 || strings.Contains(res.Raw, hs.Key) {
		t.Fatalf("jwks: %d %s", res.Status, res.Raw)
	}
	var set struct{ Keys []jwtauth.JWK }
	if err := json.Unmarshal([]byte(res.Raw), &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("jwks %s: %v", res.Raw, err)
	}
	x, _ := base64.RawURLEncoding.DecodeString(set.Keys[0].X)
	if !ed25519.PublicKey(x).Equal(edPublic(t, ed)) {
		t.Fatal("the published key is not the EdDSA key's public half")
	}
	if _, err := jwt.Parse(token, func(*jwt.Token) (any, error) { return ed25519.PublicKey(x), nil }, jwt.WithValidMethods([]string{"EdDSA"})); err != nil {
		t.Fatalf("the published key does not verify the API's token: %v", err)
	}
	// In the redis mode there is nothing to publish: an empty set, as the
	// document says (not a 404 for a documented route).
	r := startAPI(t, nil)
	if res := call(t, "GET", r.URL+"/.well-known/jwks.json", nil, nil); res.Status != 200 || strings.TrimSpace(res.Raw) != `{"keys":[]}` {
		t.Fatalf("jwks in the redis mode: %d %s, want an empty key set", res.Status, res.Raw)
	}
}

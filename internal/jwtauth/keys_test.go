package jwtauth_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/internal/jwtauth"
	"github.com/seckill/seckill/internal/user"
)

func spec(t *testing.T, kid, alg string) jwtauth.KeySpec {
	t.Helper()
	s, err := jwtauth.NewKeySpec(kid, alg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ring(t *testing.T, sign string, keys ...jwtauth.KeySpec) *jwtauth.Keyring {
	t.Helper()
	b, _ := json.Marshal(jwtauth.KeyFile{Sign: sign, Keys: keys})
	r, err := jwtauth.ParseKeys(b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestParseKeysRefusesBadFiles(t *testing.T) {
	hs := spec(t, "a", jwtauth.HS256)
	short := jwtauth.KeySpec{KID: "s", Alg: jwtauth.HS256, Key: base64.StdEncoding.EncodeToString(make([]byte, 16))}
	tests := []struct{ name, json, want string }{
		{"not json", `{`, "not the keys' JSON"},
		{"unknown field", `{"sign":"a","keys":[],"extra":1}`, "unknown field"},
		{"no keys", `{"sign":"a","keys":[]}`, "no keys"},
		{"signing kid missing", mustJSON(jwtauth.KeyFile{Sign: "b", Keys: []jwtauth.KeySpec{hs}}), `signing kid "b"`},
		{"duplicate kid", mustJSON(jwtauth.KeyFile{Sign: "a", Keys: []jwtauth.KeySpec{hs, hs}}), "appears twice"},
		{"short secret", mustJSON(jwtauth.KeyFile{Sign: "s", Keys: []jwtauth.KeySpec{short}}), "at least 32 bytes"},
		{"bad base64", `{"sign":"a","keys":[{"kid":"a","alg":"HS256","key":"!!"}]}`, "not base64"},
		{"alg none", `{"sign":"a","keys":[{"kid":"a","alg":"none","key":""}]}`, `alg "none"`},
		{"RS256", `{"sign":"a","keys":[{"kid":"a","alg":"RS256","key":""}]}`, `alg "RS256"`},
		{"EdDSA seed size", `{"sign":"a","keys":[{"kid":"a","alg":"EdDSA","key":"AAAA"}]}`, "32-byte Ed25519 seed"},
		{"empty kid", `{"sign":"","keys":[{"kid":"","alg":"HS256","key":"AAAA"}]}`, "kid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := jwtauth.ParseKeys([]byte(tt.json))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to say %q", err, tt.want)
			}
			if strings.Contains(tt.json, hs.Key) && strings.Contains(err.Error(), hs.Key) {
				t.Fatal("the error shows the key")
			}
		})
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// Rotating keys: the new key signs, tokens of the old one verify while it
// is in the file, and not once it is removed.
func TestKeyRotation(t *testing.T) {
	old, next := spec(t, "2026-10", jwtauth.HS256), spec(t, "2026-11", jwtauth.EdDSA)
	u := user.User{ID: 7, NickName: "n"}
	now := time.Now()
	oldToken, err := jwtauth.NewTokens(ring(t, "2026-10", old), time.Minute).Issue(u, "F", now)
	if err != nil {
		t.Fatal(err)
	}
	rotated := jwtauth.NewTokens(ring(t, "2026-11", old, next), time.Minute)
	newToken, err := rotated.Issue(u, "F", now)
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{"old": oldToken, "new": newToken} {
		c, err := rotated.Verify(tok)
		if err != nil {
			t.Fatalf("the %s key's token after the rotation: %v", name, err)
		}
		if got, _ := c.User(); got != u {
			t.Fatalf("user %+v, want %+v", got, u)
		}
	}
	if h, _, _ := jwt.NewParser().ParseUnverified(newToken, &jwtauth.Claims{}); h.Header["kid"] != "2026-11" || h.Method.Alg() != "EdDSA" {
		t.Fatalf("new token header %v", h.Header)
	}
	retired := jwtauth.NewTokens(ring(t, "2026-11", next), time.Minute)
	if _, err := retired.Verify(oldToken); err == nil {
		t.Fatal("a token of a key removed from the file still verifies")
	}
}

// The JWKS holds the EdDSA keys' public halves, which verify the tokens
// (what another service would do), and never an HS256 secret.
func TestPublicKeysVerifyTokens(t *testing.T) {
	hs, ed := spec(t, "h", jwtauth.HS256), spec(t, "e", jwtauth.EdDSA)
	r := ring(t, "e", hs, ed)
	jwks := r.PublicKeys()
	if len(jwks) != 1 || jwks[0].KID != "e" || jwks[0].Kty != "OKP" || jwks[0].Crv != "Ed25519" {
		t.Fatalf("jwks %+v, want the one Ed25519 key", jwks)
	}
	if strings.Contains(mustJSON(jwks), hs.Key) {
		t.Fatal("the HS256 secret is published")
	}
	tok, err := jwtauth.NewTokens(r, time.Minute).Issue(user.User{ID: 1}, "F", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	x, _ := base64.RawURLEncoding.DecodeString(jwks[0].X)
	if _, err := jwt.Parse(tok, func(*jwt.Token) (any, error) { return ed25519.PublicKey(x), nil }, jwt.WithValidMethods([]string{"EdDSA"})); err != nil {
		t.Fatalf("the published key does not verify the token: %v", err)
	}
}

func BenchmarkVerify(b *testing.B) {
	for _, alg := range []string{jwtauth.HS256, jwtauth.EdDSA} {
		b.Run(alg, func(b *testing.B) {
			s, _ := jwtauth.NewKeySpec("k", alg)
			kb, _ := json.Marshal(jwtauth.KeyFile{Sign: "k", Keys: []jwtauth.KeySpec{s}})
			r, _ := jwtauth.ParseKeys(kb)
			tokens := jwtauth.NewTokens(r, time.Minute)
			tok, _ := tokens.Issue(user.User{ID: 1, NickName: "user_abc"}, "FAMILYFAMILYFAMILYFAMILY22", time.Now())
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tokens.Verify(tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

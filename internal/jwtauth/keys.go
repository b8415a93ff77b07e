// Package jwtauth is the jwt session mode: short-lived access tokens (JWTs)
// that every API instance verifies locally, opaque refresh tokens rotated on
// every use with reuse detection, and revocations that reach every instance
// through one Redis stream.
package jwtauth

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/golang-jwt/jwt/v5"
)

// The algorithms a key may have. HS256 is one shared secret: fast, but every
// verifier can also sign. EdDSA (Ed25519) signs with a private key that only
// the API holds; anyone may verify with the public key (/.well-known/jwks.json).
const (
	HS256 = "HS256"
	EdDSA = "EdDSA"
)

// minSecret is the shortest HS256 secret accepted: RFC 7518 §3.2 asks for a
// key at least as long as the hash.
const minSecret = 32

// KeyFile is the keys' file (SECKILL_JWT_KEYS_FILE) or variable
// (SECKILL_JWT_KEYS): every key that still verifies, and the one that signs.
//
//	{"sign": "2026-11", "keys": [
//	  {"kid": "2026-11", "alg": "HS256", "key": "<base64 of 32+ random bytes>"},
//	  {"kid": "2026-10", "alg": "EdDSA", "key": "<base64 of a 32-byte Ed25519 seed>"}]}
type KeyFile struct {
	Sign string    `json:"sign"`
	Keys []KeySpec `json:"keys"`
}

// KeySpec is one key of a KeyFile.
type KeySpec struct {
	KID string `json:"kid"`
	Alg string `json:"alg"`
	Key string `json:"key"`
}

// key is a parsed KeySpec.
type key struct {
	kid    string
	method jwt.SigningMethod
	sign   any // []byte or ed25519.PrivateKey
	verify any // []byte or ed25519.PublicKey
}

// Keyring holds the signing key and every key that verifies.
type Keyring struct {
	signing *key
	byKID   map[string]*key
}

// ParseKeys reads a KeyFile's JSON.
func ParseKeys(data []byte) (*Keyring, error) {
	var f KeyFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("jwt keys: not the keys' JSON: %w", err)
	}
	if len(f.Keys) == 0 {
		return nil, errors.New("jwt keys: no keys")
	}
	ring := &Keyring{byKID: map[string]*key{}}
	for i, spec := range f.Keys {
		k, err := parseKey(spec)
		if err != nil {
			return nil, fmt.Errorf("jwt keys: key %d: %w", i+1, err)
		}
		if _, dup := ring.byKID[k.kid]; dup {
			return nil, fmt.Errorf("jwt keys: kid %q appears twice", k.kid)
		}
		ring.byKID[k.kid] = k
	}
	ring.signing = ring.byKID[f.Sign]
	if ring.signing == nil {
		return nil, fmt.Errorf("jwt keys: the signing kid %q is not among the keys", f.Sign)
	}
	return ring, nil
}

// LoadKeys reads a KeyFile from path.
func LoadKeys(path string) (*Keyring, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("jwt keys: %w", err)
	}
	return ParseKeys(data)
}

func parseKey(spec KeySpec) (*key, error) {
	if spec.KID == "" || len(spec.KID) > 64 {
		return nil, errors.New("kid: want 1 to 64 characters")
	}
	raw, err := base64.StdEncoding.DecodeString(spec.Key)
	if err != nil {
		return nil, fmt.Errorf("kid %q: key is not base64: %w", spec.KID, err)
	}
	switch spec.Alg {
	case HS256:
		if len(raw) < minSecret {
			return nil, fmt.Errorf("kid %q: an HS256 secret needs at least %d bytes, this one has %d", spec.KID, minSecret, len(raw))
		}
		return &key{kid: spec.KID, method: jwt.SigningMethodHS256, sign: raw, verify: raw}, nil
	case EdDSA:
		if len(raw) != ed25519.SeedSize {
			return nil, fmt.Errorf("kid %q: an EdDSA key is a %d-byte Ed25519 seed, this one has %d bytes", spec.KID, ed25519.SeedSize, len(raw))
		}
		priv := ed25519.NewKeyFromSeed(raw)
		return &key{kid: spec.KID, method: jwt.SigningMethodEdDSA, sign: priv, verify: priv.Public()}, nil
	}
	return nil, fmt.Errorf("kid %q: alg %q: want %s or %s", spec.KID, spec.Alg, HS256, EdDSA)
}

// NewKeySpec makes a fresh random key of alg (seckillctl jwt-key).
func NewKeySpec(kid, alg string) (KeySpec, error) {
	n := minSecret
	if alg == EdDSA {
		n = ed25519.SeedSize
	}
	raw := make([]byte, n)
	if _, err := rand.Read(raw); err != nil {
		return KeySpec{}, err
	}
	spec := KeySpec{KID: kid, Alg: alg, Key: base64.StdEncoding.EncodeToString(raw)}
	if _, err := parseKey(spec); err != nil {
		return KeySpec{}, err
	}
	return spec, nil
}

// SigningAlg is the algorithm new tokens are signed with.
func (r *Keyring) SigningAlg() string { return r.signing.method.Alg() }

// algs is every algorithm a token may carry: the parser refuses the others
// (alg "none" among them) before it looks for a key.
func (r *Keyring) algs() []string {
	seen := map[string]bool{}
	var out []string
	for _, k := range r.byKID {
		if a := k.method.Alg(); !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

// verifyKey is jwt's Keyfunc: the key named by the token's kid, only for the
// algorithm that key has, so an HS256 token cannot be checked against an
// EdDSA public key taken as an HMAC secret (algorithm confusion).
func (r *Keyring) verifyKey(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	k := r.byKID[kid]
	if k == nil {
		return nil, fmt.Errorf("unknown kid %q", kid)
	}
	if t.Method.Alg() != k.method.Alg() {
		return nil, fmt.Errorf("kid %q is an %s key, the token says %s", kid, k.method.Alg(), t.Method.Alg())
	}
	return k.verify, nil
}

// JWK is a public key as RFC 8037 writes an Ed25519 key.
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	KID string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
}

// PublicKeys are the EdDSA keys' public halves (HS256 secrets are never
// published): the JWKS another service verifies tokens with.
func (r *Keyring) PublicKeys() []JWK {
	var out []JWK
	for _, k := range r.byKID {
		if pub, ok := k.verify.(ed25519.PublicKey); ok {
			out = append(out, JWK{Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(pub), KID: k.kid, Alg: EdDSA, Use: "sig"})
		}
	}
	return out
}

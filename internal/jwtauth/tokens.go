package jwtauth

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/internal/user"
)

func init() {
	// Millisecond iat: "log out everywhere" revokes the tokens issued
	// before it, and a login a moment later must not fall in the same
	// second. RFC 7519 NumericDate allows fractions.
	jwt.TimePrecision = time.Millisecond
}

// issuer is every token's iss; a token from another issuer is refused.
const issuer = "seckill"

// leeway is the clock difference between API instances that exp, nbf and
// iat tolerate.
const leeway = 5 * time.Second

// Claims are an access token's: the user (the course's UserDTO, so that no
// request needs a lookup) and the refresh family it was issued from, which
// a logout revokes.
type Claims struct {
	jwt.RegisteredClaims
	NickName string `json:"nickName"`
	Icon     string `json:"icon"`
	Family   string `json:"fid"`
}

// User is the claims' user.
func (c *Claims) User() (user.User, error) {
	id, err := strconv.ParseInt(c.Subject, 10, 64)
	if err != nil || id <= 0 {
		return user.User{}, fmt.Errorf("sub %q is not a user id", c.Subject)
	}
	return user.User{ID: id, NickName: c.NickName, Icon: c.Icon}, nil
}

// Tokens signs and verifies access tokens.
type Tokens struct {
	keys   *Keyring
	ttl    time.Duration
	parser *jwt.Parser
	// signed checks the signature only: logout's reading of a token that
	// may have expired since the route let it through.
	signed *jwt.Parser
}

// NewTokens signs with keys' signing key, for ttl.
func NewTokens(keys *Keyring, ttl time.Duration) *Tokens {
	return &Tokens{keys: keys, ttl: ttl, parser: jwt.NewParser(
		jwt.WithValidMethods(keys.algs()),
		jwt.WithIssuer(issuer),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(leeway),
	), signed: jwt.NewParser(jwt.WithValidMethods(keys.algs()), jwt.WithoutClaimsValidation())}
}

// Lifetime is how long after its issue an access token can be accepted:
// its TTL and the clock leeway. A revocation matters that long.
func (t *Tokens) Lifetime() time.Duration { return Lifetime(t.ttl) }

// Lifetime is Tokens.Lifetime for access tokens of ttl.
func Lifetime(ttl time.Duration) time.Duration { return ttl + leeway }

// Issue signs an access token for u in family, issued at now.
func (t *Tokens) Issue(u user.User, family string, now time.Time) (string, error) {
	c := Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    issuer,
			Subject:   strconv.FormatInt(u.ID, 10),
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(t.ttl)),
			ID:        rand.Text(),
		},
		NickName: u.NickName, Icon: u.Icon, Family: family,
	}
	tok := jwt.NewWithClaims(t.keys.signing.method, c)
	tok.Header["kid"] = t.keys.signing.kid
	s, err := tok.SignedString(t.keys.signing.sign)
	if err != nil {
		return "", fmt.Errorf("sign access token: %w", err)
	}
	return s, nil
}

// maxToken bounds what is parsed at all: ours are a few hundred bytes.
const maxToken = 2048

// Verify checks token's signature (by its kid), issuer, expiry, not-before
// and issue time, and returns its claims.
func (t *Tokens) Verify(token string) (*Claims, error) {
	if len(token) > maxToken {
		return nil, errors.New("token too long")
	}
	var c Claims
	if _, err := t.parser.ParseWithClaims(token, &c, t.keys.verifyKey); err != nil {
		return nil, err
	}
	// WithIssuedAt checks iat only when present; ours always carry it,
	// and a revocation compares it.
	if c.Family == "" || c.ID == "" || c.IssuedAt == nil {
		return nil, errors.New("token without fid, jti or iat")
	}
	if _, err := c.User(); err != nil {
		return nil, err
	}
	return &c, nil
}

// held is the family and user of a token signed by one of the keys for
// this issuer, expired or not: a logout's proof that the client holds the
// login.
func (t *Tokens) held(token string) (*Claims, error) {
	if len(token) > maxToken {
		return nil, errors.New("token too long")
	}
	var c Claims
	if _, err := t.signed.ParseWithClaims(token, &c, t.keys.verifyKey); err != nil {
		return nil, err
	}
	if c.Issuer != issuer || !wellFormedFID(c.Family) || c.IssuedAt == nil {
		return nil, errors.New("token of another issuer, or without fid or iat")
	}
	if _, err := c.User(); err != nil {
		return nil, err
	}
	return &c, nil
}

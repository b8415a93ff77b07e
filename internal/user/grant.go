package user

import "time"

// Grant is what a login (or a refresh) hands the client: the token the
// course's client sends in its authorization header and, in the jwt mode,
// the refresh token it gets as a cookie.
type Grant struct {
	Access     string
	Refresh    string        // empty in the redis mode
	RefreshTTL time.Duration // the refresh token's lifetime
}

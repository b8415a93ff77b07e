package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/config"
)

func TestDefaultFailureModes(t *testing.T) {
	c, err := config.LoadAPI(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.HTTP
	if cfg.Limits.Seckill.FailOpen {
		t.Error("the seckill route must fail closed by default")
	}
	// A challenge costs the api a picture or a WAV drawn on its CPU: with
	// the limiter's Redis gone they are not handed out without limit.
	if cfg.Limits.Challenge.FailOpen {
		t.Error("the challenges', answers' and readings' limit must fail closed by default")
	}
	if !cfg.Limits.Code.FailOpen || !cfg.Limits.Login.FailOpen {
		t.Error("the other routes fail open by default")
	}
	if cfg.Limits.Seckill.PerUser.Off() || cfg.Limits.Seckill.PerIP.Off() || cfg.Limits.Code.PerIP.Off() {
		t.Error("default limits missing")
	}
}

func TestBadConfigurationNamesTheVariable(t *testing.T) {
	for key, value := range map[string]string{
		"SECKILL_RATE_CODE_IP":        "lots",
		"SECKILL_RATE_SECKILL_FAIL":   "maybe",
		"SECKILL_API_TRUSTED_PROXIES": "10.0.0.0/99",
		"SECKILL_ADMIN_TOKEN":         "short",
		"SECKILL_API_BODY_LIMIT":      "12",
		"SECKILL_SESSION_TTL":         "forever",
		"SECKILL_BOTCHECK_KEYS_FILE":  "/no/such/keys.json",
	} {
		_, err := config.LoadAPI(func(k string) (string, bool) {
			if k == key {
				return value, true
			}
			return "", false
		})
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s=%q: error %v, want one naming the variable", key, value, err)
		}
	}
}

// The session and TLS settings: each bad combination stops the start with
// a message naming the variable, and never shows a key.
func TestBadSessionConfiguration(t *testing.T) {
	secret := "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA=="
	good := `{"sign":"a","keys":[{"kid":"a","alg":"HS256","key":"` + secret + `"}]}`
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"unknown mode", map[string]string{"SECKILL_SESSION_MODE": "cookie"}, "SECKILL_SESSION_MODE"},
		{"jwt without keys", map[string]string{"SECKILL_SESSION_MODE": "jwt"}, "seckillctl jwt-key"},
		{"keys twice", map[string]string{"SECKILL_SESSION_MODE": "jwt", "SECKILL_JWT_KEYS": good, "SECKILL_JWT_KEYS_FILE": "/k.json"}, "not both"},
		{"missing key file", map[string]string{"SECKILL_SESSION_MODE": "jwt", "SECKILL_JWT_KEYS_FILE": "/no/such/keys.json"}, "SECKILL_JWT_KEYS_FILE"},
		{"bad keys", map[string]string{"SECKILL_SESSION_MODE": "jwt", "SECKILL_JWT_KEYS": strings.Replace(good, `"sign":"a"`, `"sign":"b"`, 1)}, "SECKILL_JWT_KEYS"},
		{"access TTL too long", map[string]string{"SECKILL_SESSION_MODE": "jwt", "SECKILL_JWT_KEYS": good, "SECKILL_JWT_ACCESS_TTL": "48h"}, "SECKILL_JWT_ACCESS_TTL"},
		{"refresh shorter than access", map[string]string{"SECKILL_SESSION_MODE": "jwt", "SECKILL_JWT_KEYS": good, "SECKILL_JWT_REFRESH_TTL": "10m"}, "SECKILL_JWT_REFRESH_TTL"},
		{"grace too long", map[string]string{"SECKILL_SESSION_MODE": "jwt", "SECKILL_JWT_KEYS": good, "SECKILL_JWT_REFRESH_GRACE": "1h"}, "SECKILL_JWT_REFRESH_GRACE"},
		{"certificate without key", map[string]string{"SECKILL_TLS_CERT": "/c.pem"}, "SECKILL_TLS_KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.LoadAPI(func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one naming %s", err, tt.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatal("the error shows the key")
			}
		})
	}
	c, err := config.LoadAPI(func(k string) (string, bool) {
		v, ok := map[string]string{"SECKILL_SESSION_MODE": "jwt", "SECKILL_JWT_KEYS": good}[k]
		return v, ok
	})
	if err != nil || c.Sessions.Keys.SigningAlg() != "HS256" || c.Sessions.AccessTTL != 15*time.Minute || c.Sessions.RefreshTTL != 7*24*time.Hour || c.Sessions.RefreshGrace != 10*time.Second {
		t.Fatalf("defaults: %+v, %v", c.Sessions, err)
	}
}

// The order events' codec: none unless named, one of three, anything else
// refused by name.
func TestPublishCompression(t *testing.T) {
	for _, tt := range []struct {
		value, want, err string
	}{{"", "none", ""}, {"lz4", "lz4", ""}, {"zstd", "zstd", ""}, {"gzip", "", "SECKILL_PUBLISH_COMPRESSION"}} {
		t.Run(tt.value, func(t *testing.T) {
			c, err := config.LoadAPI(func(k string) (string, bool) {
				if k == "SECKILL_PUBLISH_COMPRESSION" && tt.value != "" {
					return tt.value, true
				}
				return "", false
			})
			switch {
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("error %v, want one naming %s", err, tt.err)
			case tt.err == "" && err != nil:
				t.Fatal(err)
			case tt.err == "" && c.Sale.PublishCompression != tt.want:
				t.Fatalf("codec %q, want %q", c.Sale.PublishCompression, tt.want)
			}
		})
	}
}

// The caches' Redis: none named shares the sale's; one topology each; both
// stop the start naming the variable.
func TestCacheRedis(t *testing.T) {
	tests := []struct {
		name        string
		env         map[string]string
		addr, seeds string
		err         string
	}{
		{"none: the sale's Redis", nil, "", "", ""},
		{"one node", map[string]string{"SECKILL_CACHE_REDIS_ADDR": "127.0.0.1:16381"}, "127.0.0.1:16381", "", ""},
		{"a cluster", map[string]string{"SECKILL_CACHE_REDIS_CLUSTER": "r1:6379, r2:6379"}, "", "r1:6379,r2:6379", ""},
		{"both", map[string]string{"SECKILL_CACHE_REDIS_ADDR": "127.0.0.1:16381", "SECKILL_CACHE_REDIS_CLUSTER": "r1:6379"}, "", "", "SECKILL_CACHE_REDIS_CLUSTER"},
		{"a bad address", map[string]string{"SECKILL_CACHE_REDIS_ADDR": "nowhere"}, "", "", "SECKILL_CACHE_REDIS_ADDR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			api, err := config.LoadAPI(lookup)
			inv, invErr := config.LoadCacheInvalidator(lookup)
			if tt.err != "" {
				for _, err := range []error{err, invErr} {
					if err == nil || !strings.Contains(err.Error(), tt.err) {
						t.Errorf("error %v, want one naming %s", err, tt.err)
					}
				}
				return
			}
			if err != nil || invErr != nil {
				t.Fatal(err, invErr)
			}
			for _, c := range []struct {
				addr  string
				seeds []string
			}{{api.CacheRedis.Addr, api.CacheRedis.Cluster}, {inv.CacheRedis.Addr, inv.CacheRedis.Cluster}} {
				if c.addr != tt.addr || strings.Join(c.seeds, ",") != tt.seeds {
					t.Errorf("caches' Redis %q %q, want %q %q", c.addr, c.seeds, tt.addr, tt.seeds)
				}
			}
		})
	}
}

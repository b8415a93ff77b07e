package config_test

import (
	"strings"
	"testing"

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

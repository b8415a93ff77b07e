package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/seckill/seckill/internal/apperr"
)

// Whatever the body, decoding the login form never panics, and either
// succeeds on valid JSON or answers 400 with a message.
func FuzzDecodeLoginForm(f *testing.F) {
	for _, seed := range []string{
		`{"phone":"13800138000","code":"123456"}`, `{"phone":null}`, `[]`, `{`, ``, `"x"`,
		`{"phone":1}`, `{"code":{"a":[1,2]}}`, `{} {}`, "{\"phone\":\"\xff\"}", `{"phone":"1"}   `,
		`{"password":"p","phone":"13800138000"}`, `nul`, `1e999`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var form loginForm
		err := decodeJSON(bytes.NewReader(body), &form)
		if err == nil {
			if !json.Valid(body) {
				t.Fatalf("accepted invalid JSON %q", body)
			}
			return
		}
		e, ok := apperr.As(err)
		if !ok || e.Code != apperr.Invalid || statusOf[e.Code] != http.StatusBadRequest {
			t.Fatalf("error %v for %q, want Invalid: a 400", err, body)
		}
		if e.Message == "" {
			t.Fatalf("400 without a message for %q", body)
		}
	})
}

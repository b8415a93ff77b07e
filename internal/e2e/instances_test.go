package e2e

import (
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testsupport"
)

// Two api instances of one sale answer as one: a session made through
// either works on both, a logout on one ends it on the other (each keeps
// a session cache; the logout reaches the other over Redis pub/sub), and
// a sale sold out through one is sold out through the other.
func TestInstancesAnswerAsOne(t *testing.T) {
	s := newSale(t)
	first := s.api
	second, _, _ := s.startAPI(t)
	through := func(api string) func(method, path, token string) result {
		return func(method, path, token string) result {
			was := s.api
			s.api = api
			defer func() { s.api = was }()
			return s.do(t, method, path, token, nil, "")
		}
	}
	a, b := through(first), through(second)
	tokens := s.sessions(t, 1, 2)
	for name, ask := range map[string]func(string, string, string) result{"first": a, "second": b} {
		if r := ask("GET", "/user/me", tokens[0]); r.Status != 200 || !r.Success {
			t.Fatalf("the session on the %s instance: %d %q", name, r.Status, r.ErrorMsg)
		}
	}
	if r := a("POST", "/user/logout", tokens[0]); r.Status != 200 {
		t.Fatalf("logout: %d %q", r.Status, r.ErrorMsg)
	}
	testsupport.Wait(t, 5*time.Second, "the second instance sees the logout", func() bool {
		return b("GET", "/user/me", tokens[0]).Status == 401
	})

	voucher := s.voucher(t, 1, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	path := "/voucher-order/seckill/" + strconv.FormatInt(voucher, 10)
	if r := a("POST", path, tokens[1]); r.Status != 200 || !r.Success {
		t.Fatalf("the one unit through the first instance: %d %q", r.Status, r.ErrorMsg)
	}
	other := s.sessions(t, 3, 1)[0]
	if r := b("POST", path, other); r.Status != 200 || r.Success || r.ErrorMsg != "sold out" {
		t.Fatalf("through the second instance after the sell-out: %d success=%v %q; want 200 \"sold out\"", r.Status, r.Success, r.ErrorMsg)
	}
	s.audit(t, voucher, nil, 1, 0)
}

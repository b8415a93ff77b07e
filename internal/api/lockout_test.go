package api_test

import (
	"fmt"
	"testing"
)

// Nobody else can lock a phone's owner out of login: codes requested from
// other addresses, each followed by five wrong tries, neither burn the
// owner's code nor use up the owner's codes for the day. SMS bombing stays
// bounded: past the phone's ceiling new addresses get one code per slow
// interval between them, while an address the owner has logged in from
// still gets its codes.
func TestOthersCannotLockAPhonesOwnerOut(t *testing.T) {
	t.Parallel()
	a := startAPI(t, map[string]string{"SECKILL_API_TRUSTED_PROXIES": "127.0.0.1", "SECKILL_CODE_COOLDOWN": "1ms",
		"SECKILL_CODE_DAILY_MAX": "10", "SECKILL_CODE_PHONE_DAILY_MAX": "30"})
	phone := randomPhone()
	from := func(addr string) map[string]string { return map[string]string{"X-Forwarded-For": addr} }
	attack := func(addr string) response {
		res := call(t, "POST", a.URL+"/user/code?phone="+phone, from(addr), nil)
		for range 5 {
			call(t, "POST", a.URL+"/user/login", from(addr), `{"phone":"`+phone+`","code":"000000"}`)
		}
		return res
	}
	owner := "203.0.113.9"
	login := func(want int) {
		t.Helper()
		res := call(t, "POST", a.URL+"/user/code?phone="+phone, from(owner), nil)
		if res.Status != want {
			t.Fatalf("the owner's code request: %d %s, want %d", res.Status, res.Raw, want)
		}
		if want != 200 {
			return
		}
		code := a.Inbox.last(t, phone)
		// Wrong tries from elsewhere while the owner types the code.
		for range 5 {
			call(t, "POST", a.URL+"/user/login", from("198.51.100.250"), `{"phone":"`+phone+`","code":"000000"}`)
		}
		if res := call(t, "POST", a.URL+"/user/login", from(owner), `{"phone":"`+phone+`","code":"`+code+`"}`); res.Status != 200 || !res.Body.Success {
			t.Fatalf("the owner's login with the code: %d %s", res.Status, res.Raw)
		}
	}

	for i := range 10 {
		if res := attack(fmt.Sprintf("198.51.100.%d", i)); res.Status != 200 {
			t.Fatalf("attacker %d's code request: %d %s", i, res.Status, res.Raw)
		}
	}
	login(200) // ten codes asked by others: the owner still gets one, and logs in

	sent := 11
	for i := 10; i < 60; i++ {
		if attack(fmt.Sprintf("198.51.100.%d", i)).Status == 200 {
			sent++
		}
	}
	// The ceiling, and one more past it: a new address gets one code per
	// SECKILL_CODE_PAST_CEILING_EVERY (10 min) past it.
	if sent > 31 {
		t.Fatalf("%d codes sent to one phone within minutes, want at most the ceiling of 30 and one past it", sent)
	}
	// Within the slow interval past the ceiling a new address is refused;
	// the owner's address, where the phone logged in, is not.
	if res := call(t, "POST", a.URL+"/user/code?phone="+phone, from("192.0.2.77"), nil); res.Status != 429 {
		t.Fatalf("a new address past the phone's ceiling: %d %s, want 429", res.Status, res.Raw)
	}
	login(200)
}

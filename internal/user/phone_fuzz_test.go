package user

import "testing"

// phoneByHand is the phone rule written out byte by byte, an oracle for
// the regular expression.
func phoneByHand(s string) bool {
	if len(s) != 11 || s[0] != '1' || s[1] < '3' || s[1] > '9' {
		return false
	}
	for i := 2; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func FuzzValidPhone(f *testing.F) {
	for _, seed := range []string{"13800138000", "12800138000", "1380013800", "138001380001", "", "1３800138000", "13800138000\n"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidPhone(s), phoneByHand(s); got != want {
			t.Fatalf("ValidPhone(%q) = %v, the rule says %v", s, got, want)
		}
	})
}

package user

import "regexp"

// A mainland China mobile number: 11 ASCII digits, 1 then 3-9.
var phonePattern = regexp.MustCompile(`^1[3-9][0-9]{9}$`)

// ValidPhone reports whether s is a mainland China mobile number.
func ValidPhone(s string) bool { return phonePattern.MatchString(s) }

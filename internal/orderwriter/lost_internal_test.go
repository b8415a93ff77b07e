package orderwriter

import (
	"slices"
	"testing"
)

func TestLostUsersNamesAFew(t *testing.T) {
	many := make([]int64, 200_000)
	for i := range many {
		many[i] = int64(i + 1)
	}
	for _, tc := range []struct {
		missing []int64
		named   []int64
	}{
		{[]int64{7}, []int64{7}},
		{many[:loggedUsers], many[:loggedUsers]},
		{many, many[:loggedUsers]},
	} {
		got := lostUsers(tc.missing)
		if len(got) != 4 || got[0] != "users_lost" || got[1] != len(tc.missing) || got[2] != "users" || !slices.Equal(got[3].([]int64), tc.named) {
			t.Errorf("lostUsers(%d users) = %v; want the count and %v", len(tc.missing), got[:2], tc.named)
		}
	}
}

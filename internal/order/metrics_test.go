package order_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/seckill/seckill/internal/order"
)

func TestOutcomeNamesEveryAnswer(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "accepted"},
		{order.ErrSoldOut, "sold_out"},
		{order.ErrAlreadyBought.WithData("42"), "already_bought"},
		{order.ErrNotStarted, "not_started"},
		{order.ErrEnded, "ended"},
		{order.ErrUnknownVoucher, "unknown_voucher"},
		{order.ErrPaused, "paused"},
		{order.ErrNotTaken.Wrap(errors.New("redis down")), "not_taken"},
		{order.ErrUndecided.Wrap(errors.New("timeout")), "undecided"},
		{order.ErrNotPublished.WithData("7"), "reserved"},
		{context.Canceled, "abandoned"},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), "abandoned"},
		{errors.New("something else"), "error"},
	} {
		if got := order.Outcome(tc.err); got != tc.want {
			t.Errorf("Outcome(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

package order

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the flash sale's answers by outcome and the stock each
// voucher had at its last answer through this instance: what a sale's
// dashboard shows. HTTP status codes cannot tell them apart (sold out and
// already bought are both 200 with success false).
type Metrics struct {
	answers map[string]prometheus.Counter
	stock   *prometheus.GaugeVec

	mu   sync.Mutex
	seen map[int64]stockAt // the latest gate answer per voucher
}

// stockAt is a voucher's stock as of a gate answer's time (Redis's clock).
type stockAt struct {
	at    time.Time
	stock int64
}

// outcomes names each answer Place gives, in the order it is classified.
var outcomes = []struct {
	err  error
	name string
}{
	{ErrSoldOut, "sold_out"},
	{ErrAlreadyBought, "already_bought"},
	{ErrNotStarted, "not_started"},
	{ErrEnded, "ended"},
	{ErrUnknownVoucher, "unknown_voucher"},
	{ErrPaused, "paused"},
	{ErrEntered, "entered"},
	{ErrDrawing, "drawing"},
	{ErrMovingStock, "moving_stock"},
	{ErrNotTaken, "not_taken"},
	{ErrUndecided, "undecided"},
	{ErrNotPublished, "reserved"},
}

// Outcome is the name of Place's answer err: accepted for none, abandoned
// for a client that hung up before the gate, error for anything else.
func Outcome(err error) string {
	if err == nil {
		return "accepted"
	}
	for _, o := range outcomes {
		if errors.Is(err, o.err) {
			return o.name
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "abandoned"
	}
	return "error"
}

// NewMetrics registers seckill_sale_answers_total{outcome} and
// seckill_sale_stock{voucher} on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	answers := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_sale_answers_total",
		Help: "Flash-sale answers by outcome: accepted, sold_out, already_bought, not_started, ended, unknown_voucher, paused, not_taken, undecided, reserved (accepted, publish pending), abandoned, error."}, []string{"outcome"})
	stock := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seckill_sale_stock",
		Help: "Units left in a voucher's sale, as its last gate answer through this instance said."}, []string{"voucher"})
	reg.MustRegister(answers, stock)
	m := &Metrics{answers: map[string]prometheus.Counter{}, stock: stock, seen: map[int64]stockAt{}}
	for _, name := range []string{"accepted", "abandoned", "error"} {
		m.answers[name] = answers.WithLabelValues(name)
	}
	for _, o := range outcomes {
		m.answers[o.name] = answers.WithLabelValues(o.name)
	}
	return m
}

func (m *Metrics) answered(err error) {
	if m != nil {
		m.answers[Outcome(err)].Inc()
	}
}

// stockSeen records a gate answer's stock unless a later answer was already
// recorded: answers handled at once finish in any order, and the gauge
// must not end at an earlier one's stock. Within one millisecond the lower
// stock is the later (a restock in the same millisecond shows next time).
func (m *Metrics) stockSeen(voucherID, stock int64, at time.Time) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if prev, ok := m.seen[voucherID]; ok && (at.Before(prev.at) || at.Equal(prev.at) && stock >= prev.stock) {
		return
	}
	m.seen[voucherID] = stockAt{at: at, stock: stock}
	m.stock.WithLabelValues(strconv.FormatInt(voucherID, 10)).Set(float64(stock))
}

package botcheck

import "github.com/prometheus/client_golang/prometheus"

// Metrics count what the defence issued and what it turned away: a sale's
// dashboard tells a crowd of people (paths issued, challenges solved) from
// a crowd of scripts (orders without a path, wrong answers).
type Metrics struct {
	paths      prometheus.Counter
	challenges *prometheus.CounterVec
	refusals   *prometheus.CounterVec
}

// NewMetrics registers the families on reg; a nil reg counts nothing.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		return nil
	}
	m := &Metrics{
		paths: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_botcheck_paths_issued_total",
			Help: "Order paths issued to buyers (sales of mode path and challenge).",
		}),
		challenges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_botcheck_challenges_total",
			Help: "Challenges by what became of them: issued, solved, wrong (answered wrong), gone (answered after it expired or was used), malformed, readings_used_up (asked to be read aloud once too often).",
		}, []string{"outcome"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_botcheck_orders_refused_total",
			Help: "Orders refused by the bot check, by reason: missing (no path on a sale that asks for one), malformed, invalid (not issued to that buyer for that voucher), expired, used (a path whose buyer has its order: answered with that order's id).",
		}, []string{"reason"}),
	}
	for _, o := range []string{"issued", "solved", "wrong", "gone", "malformed", "readings_used_up"} {
		m.challenges.WithLabelValues(o)
	}
	for _, r := range []string{"missing", "malformed", "invalid", "expired", "used"} {
		m.refusals.WithLabelValues(r)
	}
	reg.MustRegister(m.paths, m.challenges, m.refusals)
	return m
}

func (m *Metrics) pathIssued() {
	if m != nil {
		m.paths.Inc()
	}
}

func (m *Metrics) challenge(outcome string) {
	if m != nil {
		m.challenges.WithLabelValues(outcome).Inc()
	}
}

func (m *Metrics) refused(reason string) {
	if m != nil {
		m.refusals.WithLabelValues(reason).Inc()
	}
}

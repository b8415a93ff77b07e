package user

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"math/big"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/lua"
)

// CodeSender delivers a login code to a phone: the seam for an SMS provider.
type CodeSender interface {
	SendCode(ctx context.Context, phone, code string) error
}

// LogSender "sends" codes by writing them to the log: anyone who reads the
// log can log in as anyone, so only the API's development mode uses it.
type LogSender struct{ Logger *slog.Logger }

// SendCode logs the code.
func (s LogSender) SendCode(ctx context.Context, phone, code string) error {
	s.Logger.InfoContext(ctx, "login code (LogSender: no SMS is sent)", "phone", phone, "code", code)
	return nil
}

// CodePolicy bounds the login codes of one phone. A code, its cooldown,
// its daily count and its wrong tries belong to the phone and the client
// address that asked for it, so that others cannot burn the owner's code
// or use up the owner's codes; PhoneDailyMax bounds what the phone gets
// from all addresses but those it has logged in from.
type CodePolicy struct {
	TTL           time.Duration // a code's lifetime
	Cooldown      time.Duration // between two codes for one phone and address
	DailyMax      int           // codes per phone and address per day
	PhoneDailyMax int           // codes per phone per day from addresses it has not logged in from
	// PastCeilingEvery is how often a phone past PhoneDailyMax still gets
	// a code for a new address: the owner's way in after strangers used
	// up the ceiling.
	PastCeilingEvery time.Duration
	// SiteDailyMax is the site's budget of codes a day, all phones.
	SiteDailyMax int
	MaxTries     int // wrong tries that burn a code
	// Trust is how long an address the phone logged in from stays exempt
	// from PhoneDailyMax after the last login from it.
	Trust time.Duration
	// Day is the time zone whose calendar days DailyMax counts.
	Day *time.Location
}

// DefaultCodePolicy: 5-minute codes, one a minute and ten a day per
// address (China's calendar day), thirty a day per phone from new
// addresses and then one per ten minutes, a hundred thousand a day for
// the site, burned by the fifth wrong try; an address stays trusted 30
// days after a login.
var DefaultCodePolicy = CodePolicy{
	TTL: 5 * time.Minute, Cooldown: time.Minute, DailyMax: 10, PhoneDailyMax: 30, MaxTries: 5,
	PastCeilingEvery: 10 * time.Minute, SiteDailyMax: 100_000,
	Trust: 30 * 24 * time.Hour, Day: time.FixedZone("UTC+8", 8*60*60),
}

// Keys are the login family's Redis keys under the deployment's prefix:
// login:code:{phone}:<addr> (the code asked from addr, and its tries),
// login:code:last:{phone}:<addr> (its cooldown), login:code:day:{phone}:<addr>
// and login:code:day:{phone} (the daily counts), login:code:slow:{phone}
// (the interval past the phone's ceiling), login:trusted:{phone} (the
// addresses the phone logged in from), login:code:site:<yyyymmdd> (the
// site's codes that day) and login:token:{token} (a session). A phone's
// keys share its hash tag.
type Keys struct{ Prefix string }

// Code is the key of phone's current code asked from addr.
func (k Keys) Code(phone, addr string) string { return k.Prefix + "login:code:{" + phone + "}:" + addr }

func (k Keys) codeLast(phone, addr string) string {
	return k.Prefix + "login:code:last:{" + phone + "}:" + addr
}

func (k Keys) codeDay(phone, addr string) string {
	return k.Prefix + "login:code:day:{" + phone + "}:" + addr
}

func (k Keys) phoneDay(phone string) string { return k.Prefix + "login:code:day:{" + phone + "}" }

func (k Keys) trusted(phone string) string { return k.Prefix + "login:trusted:{" + phone + "}" }

func (k Keys) phoneSlow(phone string) string { return k.Prefix + "login:code:slow:{" + phone + "}" }

// siteDay counts the codes the whole site sent on day (yyyymmdd).
func (k Keys) siteDay(day string) string { return k.Prefix + "login:code:site:" + day }

// Logouts is the channel on which API instances announce logouts to each
// other's session caches.
func (k Keys) Logouts() string { return k.Prefix + "login:logouts" }

// userSessions is the set of a user's session tokens.
func (k Keys) userSessions(uid int64) string {
	return k.Prefix + "login:sessions:{" + strconv.FormatInt(uid, 10) + "}"
}

// Session is the key of token's session.
func (k Keys) Session(token string) string { return k.Prefix + "login:token:{" + token + "}" }

// codeRedis is what the codes need of Redis.
type codeRedis interface {
	redis.Scripter
	Incr(ctx context.Context, key string) *redis.IntCmd
	Decr(ctx context.Context, key string) *redis.IntCmd
	PExpire(ctx context.Context, key string, ttl time.Duration) *redis.BoolCmd
}

// Codes keeps login codes in Redis.
type Codes struct {
	rdb     codeRedis
	keys    Keys
	policy  CodePolicy
	metrics *CodeMetrics
	now     func() time.Time
}

// NewCodes is the code store under keys with its policy.
func NewCodes(rdb codeRedis, keys Keys, policy CodePolicy) *Codes {
	return &Codes{rdb: rdb, keys: keys, policy: policy, metrics: newCodeMetrics(), now: time.Now}
}

// WithMetrics counts the codes sent and refused on m.
func (c *Codes) WithMetrics(m *CodeMetrics) *Codes {
	c.metrics = m
	m.budget.Set(float64(c.policy.SiteDailyMax))
	return c
}

// CodeMetrics are the login codes' counters: what an SMS pump would show.
type CodeMetrics struct {
	sent    prometheus.Counter
	refused *prometheus.CounterVec
	used    prometheus.Gauge
	budget  prometheus.Gauge
}

// NewCodeMetrics registers the code metrics on reg.
func NewCodeMetrics(reg prometheus.Registerer) *CodeMetrics {
	m := newCodeMetrics()
	reg.MustRegister(m.sent, m.refused, m.used, m.budget)
	return m
}

func newCodeMetrics() *CodeMetrics {
	return &CodeMetrics{
		sent: prometheus.NewCounter(prometheus.CounterOpts{Name: "seckill_login_codes_sent_total",
			Help: "Login codes issued by this instance."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_login_codes_refused_total",
			Help: "Login code requests refused by a limit: cooldown, address_daily, phone_ceiling, site_budget."}, []string{"reason"}),
		used: prometheus.NewGauge(prometheus.GaugeOpts{Name: "seckill_login_code_budget_used",
			Help: "Codes the whole site has issued today, as this instance last counted them (max over instances)."}),
		budget: prometheus.NewGauge(prometheus.GaugeOpts{Name: "seckill_login_code_budget",
			Help: "The site's daily budget of login codes (SECKILL_CODE_SITE_DAILY_MAX)."}),
	}
}

// ErrCodeSiteBudget refuses every code once the site's daily budget is
// used: a pump must not cost more than the budget, whatever it hits.
var ErrCodeSiteBudget = apperr.New(apperr.Unavailable, "login codes are paused until tomorrow: the site's daily SMS budget is used up")

// Issue stores a fresh code for phone asked from the client address addr
// and returns it, or ErrCodeCooldown, ErrCodeDailyMax or
// ErrCodePhoneDailyMax when the limits say no.
func (c *Codes) Issue(ctx context.Context, phone, addr string) (string, error) {
	code, err := newCode()
	if err != nil {
		return "", err
	}
	now := c.now().In(c.policy.Day)
	y, m, d := now.Date()
	dayEnds := time.Date(y, m, d+1, 0, 0, 0, 0, c.policy.Day).Sub(now)
	// The site's budget is another slot than the phone's keys. It is
	// counted first and given back when a limit refuses the code or the
	// code is not stored, so that a request that fails costs the budget
	// nothing and none is counted after its code was stored: a count
	// refused at Redis's memory limit once left behind a code never sent
	// and the cooldown it started, which the retry then met.
	siteKey := c.keys.siteDay(now.Format("20060102"))
	n, err := c.rdb.Incr(ctx, siteKey).Result()
	if err != nil {
		return "", fmt.Errorf("count the site's code budget: %w", err)
	}
	if n == 1 {
		// Kept a day past its own, so that a clock near midnight reads it.
		c.rdb.PExpire(ctx, siteKey, dayEnds+24*time.Hour)
	}
	giveBack := func() {
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		c.rdb.Decr(gctx, siteKey)
	}
	if n > int64(c.policy.SiteDailyMax) {
		giveBack()
		c.metrics.refused.WithLabelValues("site_budget").Inc()
		return "", ErrCodeSiteBudget.Retry(dayEnds)
	}
	keys := []string{c.keys.Code(phone, addr), c.keys.codeLast(phone, addr), c.keys.codeDay(phone, addr),
		c.keys.phoneDay(phone), c.keys.trusted(phone), c.keys.phoneSlow(phone)}
	res, err := lua.IssueCode.Run(ctx, c.rdb, keys, code, c.policy.TTL.Milliseconds(),
		c.policy.Cooldown.Milliseconds(), c.policy.DailyMax, max(dayEnds.Milliseconds(), 1), rand.Text(),
		c.policy.PhoneDailyMax, addr, c.policy.PastCeilingEvery.Milliseconds()).Int64Slice()
	if err != nil {
		giveBack()
		return "", fmt.Errorf("issue login code: %w", err)
	}
	wait := time.Duration(res[1]) * time.Millisecond
	if res[0] != 1 {
		giveBack()
	}
	switch res[0] {
	case 1:
	case 0:
		c.metrics.refused.WithLabelValues("cooldown").Inc()
		return "", ErrCodeCooldown.Retry(wait)
	case -1:
		c.metrics.refused.WithLabelValues("address_daily").Inc()
		return "", ErrCodeDailyMax.Retry(wait)
	default:
		c.metrics.refused.WithLabelValues("phone_ceiling").Inc()
		return "", ErrCodePhoneDailyMax.Retry(wait)
	}
	c.metrics.sent.Inc()
	c.metrics.used.Set(float64(n))
	return code, nil
}

// Hold is a right code held for one login attempt: no other attempt gets
// it until the attempt spends or releases it.
type Hold struct {
	key, attempt string
}

// Verify checks code for phone against the code asked from addr: a hold
// on it when right (addr is then trusted for the phone), ErrWrongCode,
// or ErrNoCode. Each call is one attempt with an id of its own, so that a
// retry of the script is not a second attempt. When Redis's reply is
// lost the attempt's hold is returned with the error: the script may have
// run, and the hold is released only by the attempt that took it.
func (c *Codes) Verify(ctx context.Context, phone, addr, code string) (Hold, error) {
	h := Hold{key: c.keys.Code(phone, addr), attempt: rand.Text()}
	res, err := lua.VerifyCode.Run(ctx, c.rdb, []string{h.key, c.keys.trusted(phone)}, code, c.policy.MaxTries,
		h.attempt, addr, c.policy.Trust.Milliseconds()).Int64()
	if err != nil {
		return h, fmt.Errorf("verify login code: %w", err)
	}
	switch res {
	case 1:
		return h, nil
	case 0:
		return Hold{}, ErrWrongCode
	case -2:
		return Hold{}, ErrCodeBurned
	default:
		return Hold{}, ErrNoCode
	}
}

// Spend uses the held code up: its login has a session.
func (c *Codes) Spend(ctx context.Context, h Hold) error {
	return c.endHold(ctx, h, true)
}

// Release gives the held code back: its login failed after the code was
// checked (MySQL or Redis could not take it), and the user may try again.
func (c *Codes) Release(ctx context.Context, h Hold) error {
	return c.endHold(ctx, h, false)
}

func (c *Codes) endHold(ctx context.Context, h Hold, spend bool) error {
	flag := "0"
	if spend {
		flag = "1"
	}
	if err := lua.EndCodeHold.Run(ctx, c.rdb, []string{h.key}, h.attempt, flag).Err(); err != nil {
		return fmt.Errorf("end the hold on a login code: %w", err)
	}
	return nil
}

// newCode is six random decimal digits from crypto/rand.
func newCode() (string, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		return "", fmt.Errorf("random login code: %w", err)
	}
	return fmt.Sprintf("%06d", n.Int64()), nil
}

// The outcomes of a login a user should read.
var (
	ErrInvalidPhone  = apperr.New(apperr.Outcome, "invalid phone number: want a mainland China mobile number, 11 digits starting with 13 to 19")
	ErrWrongCode     = apperr.New(apperr.Outcome, "wrong code")
	ErrCodeBurned    = apperr.New(apperr.Outcome, "wrong code, and too many wrong tries: request a new code")
	ErrNoCode        = apperr.New(apperr.Outcome, "no valid code for this phone: request a new code")
	ErrPasswordLogin = apperr.New(apperr.Outcome, "password login is not supported: log in with a code")
	// ErrCodeCooldown and ErrCodeDailyMax refuse a code for a phone; they
	// carry when the next one may be asked for.
	ErrCodeCooldown = apperr.New(apperr.RateLimited, "a code was sent to this phone less than a minute ago: wait before asking again")
	ErrCodeDailyMax = apperr.New(apperr.RateLimited, "this phone has had its codes for today: try again tomorrow")
	// ErrCodePhoneDailyMax: the phone has had as many codes today as it
	// may get from addresses it has not logged in from.
	ErrCodePhoneDailyMax = apperr.New(apperr.RateLimited,
		"this phone has had as many codes today as it may get from new addresses: try again later, or from where you logged in before")
)

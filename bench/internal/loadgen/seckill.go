package loadgen

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/internal/gate"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/user"
)

// Sale is what a flash-sale run needs around the API.
type Sale struct {
	API        string
	AdminToken string
	Redis      redis.UniversalClient
	DB         *sql.DB
	Store      *gate.Store // under the API's key prefix
	KeyPrefix  string      // the API's SECKILL_KEY_PREFIX, for the sessions
	// WriterMetrics is the order-writer's /metrics URL, for the
	// acceptance-to-MySQL lag; empty skips it.
	WriterMetrics string
	// Buckets is the stock buckets of the vouchers the run creates (0: 1).
	Buckets int
	// BotCheck is the bot check of the vouchers the run creates ("": none).
	BotCheck string
}

// CreateVoucher makes a flash-sale voucher, open from a minute ago for an
// hour, through the admin API.
func (s *Sale) CreateVoucher(ctx context.Context, stock int) (int64, error) {
	now := time.Now().UTC()
	return s.postVoucher(ctx, fmt.Sprintf(`{"shopId":1,"title":"load %d","payValue":100,"actualValue":1000,"stock":%d,"beginTime":%q,"endTime":%q,"stockBuckets":%d,"botCheck":%q}`,
		stock, stock, now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339), max(s.Buckets, 1), cmp.Or(s.BotCheck, "none")))
}

// postVoucher creates the flash-sale voucher body describes, as the admin.
func (s *Sale) postVoucher(ctx context.Context, body string) (int64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.API+"/voucher/seckill", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Admin-Token", s.AdminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("create voucher: %w", err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out struct {
		Success bool  `json:"success"`
		Data    int64 `json:"data"`
	}
	if res.StatusCode != http.StatusOK || json.Unmarshal(raw, &out) != nil || !out.Success {
		return 0, fmt.Errorf("create voucher: %d %s", res.StatusCode, raw)
	}
	return out.Data, nil
}

// EndSale moves voucher's end to now (the admin's PUT /voucher/seckill/:id).
func (s *Sale) EndSale(ctx context.Context, voucher int64) error {
	body := fmt.Sprintf(`{"endTime":%q}`, time.Now().UTC().Add(time.Second).Format(time.RFC3339))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, s.API+"/voucher/seckill/"+strconv.FormatInt(voucher, 10), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Admin-Token", s.AdminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("end the sale of voucher %d: %w", voucher, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(raw), `"success":true`) {
		return fmt.Errorf("end the sale of voucher %d: %d %s", voucher, res.StatusCode, raw)
	}
	return nil
}

// Sessions logs n users in straight in the session store (for large n the
// login flow would be the bottleneck of the setup, not of the sale).
func (s *Sale) Sessions(ctx context.Context, firstUserID int64, n int) ([]string, error) {
	sessions := user.NewSessions(s.Redis, user.Keys{Prefix: s.KeyPrefix}, 2*time.Hour)
	tokens := make([]string, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(64)
	for i := range n {
		g.Go(func() error {
			tok, err := sessions.Create(gctx, user.User{ID: firstUserID + int64(i), NickName: "load"})
			tokens[i] = tok
			return err
		})
	}
	return tokens, g.Wait()
}

// Requests is one POST per token to path.
func Requests(base, path string, tokens []string) []Request {
	reqs := make([]Request, len(tokens))
	for i, tok := range tokens {
		reqs[i] = Request{Method: http.MethodPost, URL: base + path, Header: http.Header{"Authorization": {tok}}}
	}
	return reqs
}

// Audit is what a sale left behind, checked against the invariant: orders
// in MySQL = min(users, stock), nobody twice, Redis stock = MySQL stock,
// no reservation pending.
type Audit struct {
	Voucher int64
	Expect
	Orders         int64 // rows in tb_voucher_order
	DistinctUsers  int64
	Failures       int64 // rows in tb_voucher_order_failure
	RedisStock     int64
	MySQLStock     int64
	Pending        int64
	LastOrderAfter time.Duration // from the end of the run until MySQL had every order
	LagP50, LagP99 time.Duration // acceptance in Redis to commit in MySQL (writer histogram)
	Violations     []string
}

func (a Audit) String() string {
	status := "OK"
	if len(a.Violations) > 0 {
		status = "VIOLATED: " + strings.Join(a.Violations, "; ")
	}
	return fmt.Sprintf("audit voucher %d: %s\n  accepted %d, unanswered (clients hung up) %d, orders in MySQL %d (distinct users %d), failures %d, stock Redis %d / MySQL %d, pending %d\n  last order in MySQL %v after the run; accept->MySQL lag p50 %v p99 %v",
		a.Voucher, status, a.Accepted, a.Unanswered, a.Orders, a.DistinctUsers, a.Failures, a.RedisStock, a.MySQLStock, a.Pending,
		a.LastOrderAfter.Round(time.Millisecond), a.LagP50, a.LagP99)
}

// Expect is what a sale's answers promise.
type Expect struct {
	Users, Stock int64
	Accepted     int64 // answers that gave an order id
	// Unanswered are requests whose clients hung up before the answer:
	// each may or may not have taken a unit.
	Unanswered int64
}

// AuditSale waits (up to timeout) for MySQL to hold every accepted order of
// voucher and no reservation to be pending, and checks the invariants.
func (s *Sale) AuditSale(ctx context.Context, voucher int64, want Expect, runEnd time.Time, timeout time.Duration, lagBefore []bucket) (Audit, error) {
	a := Audit{Voucher: voucher, Expect: want}
	deadline := time.Now().Add(timeout)
	orders := func() error {
		err := s.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM tb_voucher_order WHERE voucher_id = ?", voucher).Scan(&a.Orders)
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		return nil
	}
	for {
		if err := orders(); err != nil {
			return a, err
		}
		if a.Orders >= want.Accepted || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.LastOrderAfter = time.Since(runEnd)
	// Orders whose clients hung up land too; the reservations tell when.
	totals := func() (salestate.Totals, error) {
		t, err := s.Store.Totals(ctx, voucher)
		if err != nil {
			return t, fmt.Errorf("audit: %w", err)
		}
		return t, nil
	}
	t, err := totals()
	for ; err == nil && t.Pending > 0 && time.Now().Before(deadline); t, err = totals() {
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return a, err
	}
	a.Pending = t.Pending
	if err := orders(); err != nil {
		return a, err
	}
	err = s.DB.QueryRowContext(ctx, `SELECT COUNT(DISTINCT user_id),
		(SELECT COUNT(*) FROM tb_voucher_order_failure WHERE voucher_id = ?),
		(SELECT stock FROM tb_seckill_voucher WHERE voucher_id = ?)
		FROM tb_voucher_order WHERE voucher_id = ?`, voucher, voucher, voucher).Scan(&a.DistinctUsers, &a.Failures, &a.MySQLStock)
	if err != nil {
		return a, fmt.Errorf("audit: %w", err)
	}
	a.RedisStock = t.Stock

	a.Violations = a.violations()

	if s.WriterMetrics != "" && lagBefore != nil {
		after, err := scrapeLag(ctx, s.WriterMetrics)
		if err != nil {
			return a, err
		}
		diff := subtract(after, lagBefore)
		a.LagP50, a.LagP99 = quantile(diff, 0.50), quantile(diff, 0.99)
	}
	return a, nil
}

// violations are the invariants a finished sale breaks: every accepted
// order in MySQL and nothing else (min(users, stock) of them when every
// client heard its answer; between the accepted and those plus the
// unanswered when some hung up), every unit sold or still on sale, no user
// twice, no failure, Redis and MySQL agreeing on the stock, nothing left
// pending.
func (a Audit) violations() []string {
	var v []string
	check := func(ok bool, format string, args ...any) {
		if !ok {
			v = append(v, fmt.Sprintf(format, args...))
		}
	}
	if a.Unanswered == 0 {
		expected := min(a.Users, a.Stock)
		check(a.Orders == expected, "%d orders in MySQL, want min(users, stock) = %d", a.Orders, expected)
		check(a.Orders == a.Accepted, "%d orders in MySQL, %d accepted", a.Orders, a.Accepted)
	} else {
		check(a.Orders >= a.Accepted && a.Orders <= a.Accepted+a.Unanswered,
			"%d orders in MySQL, want between the %d accepted and those plus the %d unanswered", a.Orders, a.Accepted, a.Unanswered)
	}
	check(a.Orders+a.MySQLStock == a.Stock, "%d orders and %d units left in MySQL of %d: a unit lost or sold twice", a.Orders, a.MySQLStock, a.Stock)
	check(a.DistinctUsers == a.Orders, "%d orders for %d users: someone twice", a.Orders, a.DistinctUsers)
	check(a.Failures == 0, "%d failed orders", a.Failures)
	check(a.RedisStock == a.MySQLStock, "Redis stock %d, MySQL stock %d", a.RedisStock, a.MySQLStock)
	check(a.Pending == 0, "%d reservations still pending", a.Pending)
	return v
}

// bucket is one cumulative bucket of a Prometheus histogram.
type bucket struct {
	le    float64
	count float64
}

// LagBuckets reads the writer's acceptance-to-MySQL lag histogram.
func (s *Sale) LagBuckets(ctx context.Context) ([]bucket, error) {
	if s.WriterMetrics == "" {
		return nil, nil
	}
	return scrapeLag(ctx, s.WriterMetrics)
}

func subtract(after, before []bucket) []bucket {
	out := make([]bucket, len(after))
	for i := range after {
		out[i] = after[i]
		if i < len(before) {
			out[i].count -= before[i].count
		}
	}
	return out
}

// quantile interpolates linearly inside the bucket that holds q, as
// Prometheus's histogram_quantile does.
func quantile(buckets []bucket, q float64) time.Duration {
	if len(buckets) == 0 || buckets[len(buckets)-1].count == 0 {
		return 0
	}
	rank := q * buckets[len(buckets)-1].count
	lower, prev := 0.0, 0.0
	for _, b := range buckets {
		if b.count >= rank {
			if b.le >= 1e18 {
				return time.Duration(lower * float64(time.Second))
			}
			frac := 0.0
			if b.count > prev {
				frac = (rank - prev) / (b.count - prev)
			}
			return time.Duration((lower + (b.le-lower)*frac) * float64(time.Second))
		}
		lower, prev = b.le, b.count
	}
	return 0
}

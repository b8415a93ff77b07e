package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/botcheck"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/saletest"
	"github.com/seckill/seckill/internal/testsupport"
)

// createSale is a flash sale with a bot check ("none", "path",
// "challenge").
func (a *testAPI) createSale(t *testing.T, stock int, begin, end time.Time, check string) string {
	t.Helper()
	body := fmt.Sprintf(`{"shopId":1,"title":"t","payValue":100,"actualValue":1000,"stock":%d,"beginTime":%q,"endTime":%q,"botCheck":%q}`,
		stock, begin.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339), check)
	res := call(t, "POST", a.URL+"/voucher/seckill", map[string]string{"X-Admin-Token": testAdminToken}, body)
	if res.Status != 200 || !res.Body.Success {
		t.Fatalf("create sale (%s): %d %s", check, res.Status, res.Raw)
	}
	return string(res.Body.Data)
}

type orderPathData struct {
	Path      string    `json:"path"`
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// path is the order path the api issues to token's user for voucher.
func (a *testAPI) path(t *testing.T, token, voucher string) orderPathData {
	t.Helper()
	res := call(t, "GET", a.URL+"/voucher-order/seckill/"+voucher+"/path", map[string]string{"authorization": token}, nil)
	var p orderPathData
	if res.Status != 200 || !res.Body.Success || json.Unmarshal(res.Body.Data, &p) != nil || p.Path == "" {
		t.Fatalf("order path of voucher %s: %d %s", voucher, res.Status, res.Raw)
	}
	if p.URL != "/voucher-order/seckill/"+voucher+"/"+p.Path {
		t.Fatalf("order path's url %q, want the order route with the path", p.URL)
	}
	return p
}

func (a *testAPI) metric(t *testing.T, line string) bool {
	t.Helper()
	_, body := testsupport.Get(context.Background(), a.Admin+"/metrics")
	return strings.Contains(body, "\n"+line+"\n")
}

// forged is a path of the right shape that this server never issued: a
// MAC of zeros, an expiry an hour away.
func forged() string {
	raw := []byte{2, 1}
	raw = binary.BigEndian.AppendUint64(raw, uint64(time.Now().Add(time.Hour).UnixMilli()))
	raw = append(raw, make([]byte, 16)...)
	return base64.RawURLEncoding.EncodeToString(raw)
}

// A sale with botCheck path takes orders only at a path issued to the
// buyer once it is open: nothing prepared before it opens works, a path
// is the buyer's and the voucher's only, and used twice gives one order.
func TestPathSale(t *testing.T) {
	t.Parallel()
	a := startAPI(t, map[string]string{"SECKILL_ADMIN_TOKEN": testAdminToken, "SECKILL_RATE_SECKILL_USER": "off"})
	now := time.Now()
	early := a.createSale(t, 5, now.Add(time.Hour), now.Add(2*time.Hour), "path")
	open := a.createSale(t, 5, now.Add(-time.Hour), now.Add(time.Hour), "path")
	other := a.createSale(t, 5, now.Add(-time.Hour), now.Add(time.Hour), "path")
	ended := a.createSale(t, 5, now.Add(-2*time.Hour), now.Add(-time.Hour), "path")
	alice, bob := a.loggedIn(t, randomPhone()), a.loggedIn(t, randomPhone())
	auth := map[string]string{"authorization": alice}

	// Before the opening: no path, and nothing a bot prepared takes.
	res := call(t, "GET", a.URL+"/voucher-order/seckill/"+early+"/path", auth, nil)
	if res.Status != 200 || res.Body.Success || res.Body.ErrorMsg != order.ErrNotStarted.Error() {
		t.Fatalf("path before the opening: %d %s; want 200 %q and no path", res.Status, res.Raw, order.ErrNotStarted.Error())
	}
	res = call(t, "GET", a.URL+"/voucher-order/seckill/"+ended+"/path", auth, nil)
	if res.Status != 200 || res.Body.Success || res.Body.ErrorMsg != order.ErrEnded.Error() {
		t.Fatalf("path after the end: %d %s; want 200 %q", res.Status, res.Raw, order.ErrEnded.Error())
	}
	for _, route := range []string{"/voucher-order/seckill/" + open, "/voucher-order/seckill/" + open + "/" + forged()} {
		res = call(t, "POST", a.URL+route, auth, nil)
		if res.Status != 403 || res.Body.Success {
			t.Fatalf("POST %s without an issued path: %d %s; want 403", route, res.Status, res.Raw)
		}
	}

	p := a.path(t, alice, open)
	if left := time.Until(p.ExpiresAt); left <= 0 || left > botcheck.DefaultConfig.PathTTL+time.Second {
		t.Fatalf("path expires at %v (%v from now); want within %v", p.ExpiresAt, left, botcheck.DefaultConfig.PathTTL)
	}
	for name, tc := range map[string]struct {
		token, route string
		status       int
	}{
		"another buyer's path":   {bob, p.URL, 403},
		"another voucher's path": {alice, "/voucher-order/seckill/" + other + "/" + p.Path, 403},
		"a path too short":       {alice, "/voucher-order/seckill/" + open + "/" + p.Path[:20], 400},
		"a path not base64url":   {alice, "/voucher-order/seckill/" + open + "/" + strings.Repeat("!", 35), 400},
	} {
		res := call(t, "POST", a.URL+tc.route, map[string]string{"authorization": tc.token}, nil)
		if res.Status != tc.status || res.Body.Success {
			t.Fatalf("%s: %d %s; want %d", name, res.Status, res.Raw, tc.status)
		}
	}

	res = call(t, "POST", a.URL+p.URL, auth, nil)
	var orderID string
	if res.Status != 200 || !res.Body.Success || json.Unmarshal(res.Body.Data, &orderID) != nil {
		t.Fatalf("order at the issued path: %d %s", res.Status, res.Raw)
	}
	// Used again (a client's retry): the same order, nothing more taken.
	res = call(t, "POST", a.URL+p.URL, auth, nil)
	var again string
	if res.Status != 200 || res.Body.Success || res.Body.ErrorMsg != order.ErrAlreadyBought.Error() || json.Unmarshal(res.Body.Data, &again) != nil || again != orderID {
		t.Fatalf("the path used twice: %d %s; want already bought with order %s", res.Status, res.Raw, orderID)
	}
	ensureStock(t, a, open, 4)
	for _, line := range []string{
		"seckill_botcheck_paths_issued_total 1",
		`seckill_botcheck_orders_refused_total{reason="missing"} 1`,
		`seckill_botcheck_orders_refused_total{reason="invalid"} 3`,
		`seckill_botcheck_orders_refused_total{reason="malformed"} 2`,
		`seckill_botcheck_orders_refused_total{reason="used"} 1`,
	} {
		if !a.metric(t, line) {
			t.Errorf("metrics lack %q", line)
		}
	}
}

// ensureStock fails unless voucher's sale has stock units left in Redis.
func ensureStock(t *testing.T, a *testAPI, voucher string, stock int64) {
	t.Helper()
	var id int64
	fmt.Sscan(voucher, &id)
	totals, err := saletest.New(a.Redis.Client, a.Redis.Prefix).Totals(context.Background(), id)
	if err != nil || totals.Stock != stock {
		t.Fatalf("voucher %s in Redis: %+v, %v; want %d units left", voucher, totals, err, stock)
	}
}

// 200 buyers of a path sale of 150 units each ask for a path and order
// at it twice at once (a client's retry racing its first try): 150
// orders, nobody twice, each buyer's two answers naming the same order,
// the stock at 0.
func TestPathSaleCrowd(t *testing.T) {
	t.Parallel()
	// The paths outlive the setup: the logins and paths one after another
	// can take over the minute a path lives, under -race on a loaded
	// machine.
	a := startAPI(t, map[string]string{"SECKILL_ADMIN_TOKEN": testAdminToken, "SECKILL_BOTCHECK_PATH_TTL": "10m",
		"SECKILL_RATE_CODE_IP": "off", "SECKILL_RATE_LOGIN_IP": "off", "SECKILL_RATE_SECKILL_IP": "off", "SECKILL_RATE_SECKILL_USER": "off"})
	now := time.Now()
	const stock, buyers = 150, 200
	voucher := a.createSale(t, stock, now.Add(-time.Minute), now.Add(time.Hour), "path")
	tokens := make([]string, buyers)
	paths := make([]string, len(tokens))
	for i := range tokens {
		tokens[i] = a.loggedIn(t, randomPhone())
		paths[i] = a.path(t, tokens[i], voucher).URL
	}
	client := &http.Client{Timeout: 10 * time.Second}
	// try is one try's answer: the order id (accepted, or already
	// bought with the buyer's order), or "" when sold out.
	try := func(token, url string) (string, error) {
		req, _ := http.NewRequest("POST", a.URL+url, nil)
		req.Header.Set("authorization", token)
		res, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer res.Body.Close()
		var e envelope
		if err := json.NewDecoder(res.Body).Decode(&e); err != nil {
			return "", err
		}
		var id string
		switch {
		case res.StatusCode == 200 && (e.Success || e.ErrorMsg == order.ErrAlreadyBought.Error()) && json.Unmarshal(e.Data, &id) == nil:
			return id, nil
		case res.StatusCode == 200 && e.ErrorMsg == order.ErrSoldOut.Error():
			return "", nil
		}
		return "", fmt.Errorf("%d %s %s", res.StatusCode, e.ErrorMsg, e.Data)
	}
	var mu sync.Mutex
	owner, soldOut := map[string]int{}, 0
	var wg sync.WaitGroup
	for i := range tokens {
		wg.Go(func() {
			var ids [2]string
			var errs [2]error
			var both sync.WaitGroup
			for k := range 2 {
				both.Go(func() { ids[k], errs[k] = try(tokens[i], paths[i]) })
			}
			both.Wait()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errs[0] != nil || errs[1] != nil:
				t.Errorf("buyer %d: %v, %v", i, errs[0], errs[1])
			case ids[0] == "" && ids[1] == "":
				soldOut++
			case ids[0] != ids[1] && ids[0] != "" && ids[1] != "":
				t.Errorf("buyer %d got two orders, %s and %s", i, ids[0], ids[1])
			default:
				id := max(ids[0], ids[1])
				if o, taken := owner[id]; taken {
					t.Errorf("order %s given to buyers %d and %d", id, o, i)
				}
				owner[id] = i
			}
		})
	}
	wg.Wait()
	if len(owner) != stock || soldOut != buyers-stock {
		t.Fatalf("%d orders and %d buyers sold out, of %d buyers on %d units", len(owner), soldOut, buyers, stock)
	}
	ensureStock(t, a, voucher, 0)
}

// challengeShown is GET .../challenge's data.
type challengeShown struct {
	ChallengeID string `json:"challengeId"`
	Image       string `json:"image"`
	Audio       string `json:"audio"`
}

func (a *testAPI) challenge(t *testing.T, token, voucher string) challengeShown {
	t.Helper()
	res := call(t, "GET", a.URL+"/voucher-order/seckill/"+voucher+"/challenge", map[string]string{"authorization": token}, nil)
	var c challengeShown
	if res.Status != 200 || !res.Body.Success || json.Unmarshal(res.Body.Data, &c) != nil {
		t.Fatalf("challenge of voucher %s: %d %s", voucher, res.Status, res.Raw)
	}
	return c
}

// digits is what the picture of token's user's challenge id shows: read
// where the api keeps it, as a person would read the picture.
func (a *testAPI) digits(t *testing.T, token, id string) string {
	t.Helper()
	res := call(t, "GET", a.URL+"/user/me", map[string]string{"authorization": token}, nil)
	var me struct {
		ID int64 `json:"id"`
	}
	if res.Status != 200 || json.Unmarshal(res.Body.Data, &me) != nil {
		t.Fatalf("/user/me: %d %s", res.Status, res.Raw)
	}
	v, err := a.Redis.Client.Get(context.Background(), a.Redis.Key(fmt.Sprintf("botcheck:challenge:%d:%s", me.ID, id))).Result()
	if err != nil {
		t.Fatalf("challenge %s in Redis: %v", id, err)
	}
	return v[strings.LastIndex(v, ":")+1:]
}

func (a *testAPI) answer(t *testing.T, token, voucher, id, answer string) response {
	t.Helper()
	return call(t, "POST", a.URL+"/voucher-order/seckill/"+voucher+"/path", map[string]string{"authorization": token},
		fmt.Sprintf(`{"challengeId":%q,"answer":%q}`, id, answer))
}

// A sale with botCheck challenge issues a path only for a solved
// challenge: a picture and its reading; a wrong answer uses it up and is
// counted; a challenge is its buyer's and answered once; the limit on
// challenges holds.
func TestChallengeSale(t *testing.T) {
	t.Parallel()
	a := startAPI(t, map[string]string{"SECKILL_ADMIN_TOKEN": testAdminToken, "SECKILL_RATE_CHALLENGE_USER": "5/1m"})
	now := time.Now()
	voucher := a.createSale(t, 5, now.Add(-time.Minute), now.Add(time.Hour), "challenge")
	pathSale := a.createSale(t, 5, now.Add(-time.Minute), now.Add(time.Hour), "path")
	alice, bob := a.loggedIn(t, randomPhone()), a.loggedIn(t, randomPhone())
	auth := map[string]string{"authorization": alice}

	res := call(t, "GET", a.URL+"/voucher-order/seckill/"+voucher+"/path", auth, nil)
	if res.Status != 403 || !strings.Contains(res.Body.ErrorMsg, "challenge") {
		t.Fatalf("a path without a challenge: %d %s; want 403 naming the challenge", res.Status, res.Raw)
	}
	res = call(t, "POST", a.URL+"/voucher-order/seckill/"+voucher, auth, nil)
	if res.Status != 403 {
		t.Fatalf("an order without a path: %d %s; want 403", res.Status, res.Raw)
	}
	res = call(t, "GET", a.URL+"/voucher-order/seckill/"+pathSale+"/challenge", map[string]string{"authorization": bob}, nil)
	if res.Status != 409 {
		t.Fatalf("a challenge of a sale without one: %d %s; want 409", res.Status, res.Raw)
	}

	c := a.challenge(t, alice, voucher) // 1
	png, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(c.Image, "data:image/png;base64,"))
	if !strings.HasPrefix(c.Image, "data:image/png;base64,") || err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("the challenge's picture is not a PNG data URL: %.60q", c.Image)
	}
	if res := call(t, "GET", a.URL+c.Audio, nil, nil); res.Status != 401 {
		t.Fatalf("the reading without a session: %d %s; want 401", res.Status, res.Raw)
	}
	if res := call(t, "GET", a.URL+c.Audio, map[string]string{"authorization": bob}, nil); res.Status != 403 {
		t.Fatalf("another buyer asking for alice's reading: %d %s; want 403", res.Status, res.Raw)
	}
	req, _ := http.NewRequest("GET", a.URL+c.Audio+"?lang=zh", nil)
	req.Header.Set("authorization", alice)
	wav, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 4)
	_, _ = io.ReadFull(wav.Body, head)
	wav.Body.Close()
	if wav.StatusCode != 200 || wav.Header.Get("Content-Type") != "audio/wav" || string(head) != "RIFF" {
		t.Fatalf("the challenge's reading: %d %s %q; want a WAV", wav.StatusCode, wav.Header.Get("Content-Type"), head)
	}
	right := a.digits(t, alice, c.ChallengeID)
	if res := a.answer(t, bob, voucher, c.ChallengeID, right); res.Status != 403 {
		t.Fatalf("another buyer answering alice's challenge: %d %s; want 403", res.Status, res.Raw)
	}
	c = a.challenge(t, alice, voucher) // 2
	right = a.digits(t, alice, c.ChallengeID)
	wrong := fmt.Sprintf("%06d", (mustAtoi(t, right)+1)%1_000_000)
	if res := a.answer(t, alice, voucher, c.ChallengeID, "12a456"); res.Status != 400 {
		t.Fatalf("a malformed answer: %d %s; want 400", res.Status, res.Raw)
	}
	if res := a.answer(t, alice, voucher, c.ChallengeID, wrong); res.Status != 200 || res.Body.Success || res.Body.ErrorMsg != botcheck.ErrWrongAnswer.Error() {
		t.Fatalf("a wrong answer: %d %s; want 200 %q", res.Status, res.Raw, botcheck.ErrWrongAnswer.Error())
	}
	if res := a.answer(t, alice, voucher, c.ChallengeID, right); res.Status != 403 {
		t.Fatalf("the right answer after a wrong one: %d %s; want 403, the challenge used up", res.Status, res.Raw)
	}

	c = a.challenge(t, alice, voucher) // 3
	right = a.digits(t, alice, c.ChallengeID)
	res = a.answer(t, alice, voucher, c.ChallengeID, right)
	var p orderPathData
	if res.Status != 200 || !res.Body.Success || json.Unmarshal(res.Body.Data, &p) != nil {
		t.Fatalf("the right answer: %d %s; want the order path", res.Status, res.Raw)
	}
	if res := a.answer(t, alice, voucher, c.ChallengeID, right); res.Status != 403 {
		t.Fatalf("a solved challenge answered again: %d %s; want 403", res.Status, res.Raw)
	}
	res = call(t, "POST", a.URL+p.URL, auth, nil)
	if res.Status != 200 || !res.Body.Success {
		t.Fatalf("order at the path a solved challenge gave: %d %s", res.Status, res.Raw)
	}
	ensureStock(t, a, voucher, 4)

	a.challenge(t, alice, voucher) // 4: the reading above was her 2nd request
	res = call(t, "GET", a.URL+"/voucher-order/seckill/"+voucher+"/challenge", auth, nil)
	if res.Status != 429 {
		t.Fatalf("the sixth challenge or reading in a minute: %d %s; want 429", res.Status, res.Raw)
	}
	// Answers are counted apart: alice has given five, the limit.
	if res := a.answer(t, alice, voucher, c.ChallengeID, right); res.Status != 429 {
		t.Fatalf("the sixth answer in a minute: %d %s; want 429", res.Status, res.Raw)
	}
	for _, line := range []string{
		`seckill_botcheck_challenges_total{outcome="issued"} 4`,
		`seckill_botcheck_challenges_total{outcome="solved"} 1`,
		`seckill_botcheck_challenges_total{outcome="wrong"} 1`,
		`seckill_botcheck_challenges_total{outcome="gone"} 3`,
		`seckill_botcheck_challenges_total{outcome="malformed"} 1`,
	} {
		if !a.metric(t, line) {
			t.Errorf("metrics lack %q", line)
		}
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatalf("digits %q: %v", s, err)
	}
	return n
}

// A sale without a bot check takes orders at the fixed route, as the
// course's client sends them, and at a path too; a bot check the api does
// not know is refused at creation.
func TestSaleWithoutBotCheck(t *testing.T) {
	t.Parallel()
	a := startAPI(t, map[string]string{"SECKILL_ADMIN_TOKEN": testAdminToken})
	now := time.Now()
	voucher := a.createSale(t, 5, now.Add(-time.Minute), now.Add(time.Hour), "none")
	alice, bob := a.loggedIn(t, randomPhone()), a.loggedIn(t, randomPhone())
	if res := call(t, "POST", a.URL+"/voucher-order/seckill/"+voucher, map[string]string{"authorization": alice}, nil); res.Status != 200 || !res.Body.Success {
		t.Fatalf("order at the fixed route: %d %s", res.Status, res.Raw)
	}
	p := a.path(t, bob, voucher)
	if res := call(t, "POST", a.URL+p.URL, map[string]string{"authorization": bob}, nil); res.Status != 200 || !res.Body.Success {
		t.Fatalf("order at a path: %d %s", res.Status, res.Raw)
	}
	ensureStock(t, a, voucher, 3)
	res := call(t, "POST", a.URL+"/voucher/seckill", map[string]string{"X-Admin-Token": testAdminToken},
		`{"shopId":1,"title":"t","payValue":1,"actualValue":2,"stock":1,"beginTime":"2030-01-01T00:00:00Z","endTime":"2030-01-02T00:00:00Z","botCheck":"captcha"}`)
	if res.Status != 400 || !strings.Contains(res.Body.ErrorMsg, "botCheck") {
		t.Fatalf("a bot check the api does not know: %d %s; want 400 naming botCheck", res.Status, res.Raw)
	}
}

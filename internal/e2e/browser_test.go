package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill/seckill/internal/botcheck"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/testsupport"
	"github.com/seckill/seckill/internal/user"
)

// coursesNginx serves dir the way the course serves its web client: one
// nginx origin hands out the pages and passes /api to the API with the
// prefix cut, its location block as the course's nginx.conf has it
// (nginx's defaults otherwise: Host becomes the upstream's, no
// X-Forwarded-*). It returns the origin, and the access log, which
// records what each /api request carried.
func coursesNginx(t *testing.T, dir, api string) (origin, accessLog string) {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		t.Fatal("nginx is not installed: deploy/local/stack.sh install (Debian's nginx-light)")
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	prefix := t.TempDir()
	addr := testsupport.FreeAddr(t)
	accessLog = filepath.Join(prefix, "access.log")
	conf := fmt.Sprintf(`user root;
daemon off;
master_process off;
pid %[1]s/nginx.pid;
events { worker_connections 64; }
http {
  types { text/html html; application/javascript js; text/css css; }
  log_format api '$request|$http_origin|$http_sec_fetch_site';
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  server {
    listen %[2]s;
    location / { root %[3]s; index index.html; }
    location /api {
      access_log %[4]s api;
      default_type application/json;
      keepalive_timeout 30s;
      keepalive_requests 1000;
      proxy_http_version 1.1;
      rewrite /api(/.*) $1 break;
      proxy_pass_request_headers on;
      proxy_next_upstream error timeout;
      proxy_pass %[5]s;
    }
  }
}
`, prefix, addr, root, accessLog, api)
	path := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	testsupport.Start(t, bin, nil, "-p", prefix, "-e", "stderr", "-c", path)
	testsupport.Eventually(t, "http://"+addr+"/index.html", 200, 10*time.Second)
	return "http://" + addr, accessLog
}

// newBrowser is a headless Chromium of its own (a fresh profile: no token
// left from another run).
func newBrowser(t *testing.T, more ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	exe, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("Chromium is not installed: deploy/local/stack.sh install (Debian's chromium)")
	}
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()))
	opts = append(opts, more...)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// withoutFetchMetadata is a browser option: the browser's requests go
// through a proxy that drops Sec-Fetch-*, so the API sees what a browser
// sends over plain HTTP to a host that is not loopback, or Safari before
// 16.4: Origin is all it has to tell a site's own page from another
// site's. (Chromium adds Fetch Metadata after DevTools' request
// interception, so it cannot be dropped there.)
func withoutFetchMetadata(t *testing.T) chromedp.ExecAllocatorOption {
	t.Helper()
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.Out.URL = r.In.URL // a proxy's request line carries the whole URL
		for k := range r.Out.Header {
			if strings.HasPrefix(strings.ToLower(k), "sec-fetch-") {
				r.Out.Header.Del(k)
			}
		}
	}}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	// Chromium sends nothing for loopback through a proxy unless told to.
	return func(a *chromedp.ExecAllocator) {
		chromedp.ProxyServer(srv.URL)(a)
		chromedp.Flag("proxy-bypass-list", "<-loopback>")(a)
	}
}

// pageSays waits until the page's output has a line starting with one of
// prefixes, and returns that line.
func pageSays(t *testing.T, ctx context.Context, prefixes ...string) string {
	t.Helper()
	var out, last string
	if !testsupport.PollEvery(20*time.Second, 50*time.Millisecond, func() bool {
		var err error
		if out, err = chromedp.Run(ctx, chromedp.Text(chromedp.ID("out"))); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		last = lines[len(lines)-1]
		return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(last, p) })
	}) {
		t.Fatalf("the page shows %q; want a line starting with one of %q", out, prefixes)
	}
	return last
}

var orderLine = regexp.MustCompile(`^order (\d+)$`)

// A front end on the course's nginx, in a real browser, asks for a code,
// logs in, buys the flash sale once and is told "one per user" the second
// time — in a browser that sends Fetch Metadata, and in one that sends
// only Origin (which reached the API as http://127.0.0.1:<nginx's port>,
// Host the API's own address, and got 403 "cross-site request refused").
func TestBrowserThroughTheCoursesNginx(t *testing.T) {
	s := newSaleOn(t, stack{testsupport.MustRedis(t), testsupport.MustMySQL(t), testsupport.MustKafka(t)}, nil,
		map[string]string{"SECKILL_DEV_MODE": "true"})
	voucher := s.voucher(t, 10, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	front, accessLog := coursesNginx(t, "testdata/front", s.api)
	for i, browser := range []struct {
		name          string
		fetchMetadata bool
	}{
		{"with Fetch Metadata", true},
		{"Origin only", false},
	} {
		t.Run(browser.name, func(t *testing.T) {
			var opts []chromedp.ExecAllocatorOption
			if !browser.fetchMetadata {
				opts = append(opts, withoutFetchMetadata(t))
			}
			ctx := newBrowser(t, opts...)
			phone := fmt.Sprintf("139%08d", time.Now().UnixNano()%1e8+int64(i))
			s.logInOnPage(t, ctx, fmt.Sprintf("%s/index.html?voucher=%d", front, voucher), phone)
			if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("buy"))); err != nil {
				t.Fatal(err)
			}
			s.orderLands(t, ctx, voucher, phone)
			if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("buy"))); err != nil {
				t.Fatal(err)
			}
			if got, want := pageSays(t, ctx, "order refused"), "order refused: "+order.ErrAlreadyBought.Error(); got != want {
				t.Fatalf("buying again: the page shows %q, want %q", got, want)
			}
			// What reached the API through nginx: the code request with the
			// page's origin, and Fetch Metadata only from the browser that
			// sends it.
			raw, err := os.ReadFile(accessLog)
			if err != nil {
				t.Fatal(err)
			}
			want := "POST /api/user/code?phone=" + phone + " HTTP/1.1|" + front + "|"
			if browser.fetchMetadata {
				want += "same-origin"
			} else {
				want += "-"
			}
			if !strings.Contains(string(raw), want+"\n") {
				t.Fatalf("nginx's access log has no %q:\n%s", want, raw)
			}
		})
	}
}

// A person buys on a sale with a challenge, in a real browser, on the
// api's own page (GET /buy): logs in by phone code, clicks buy, is shown
// the picture, types its digits (read where the api keeps them, as the
// person reads the picture), and the order lands in MySQL. A wrong answer
// first is refused, and the page shows a new picture.
func TestBrowserSolvesTheChallengeAndBuys(t *testing.T) {
	s := newSaleOn(t, stack{testsupport.MustRedis(t), testsupport.MustMySQL(t), testsupport.MustKafka(t)}, nil,
		map[string]string{"SECKILL_DEV_MODE": "true"})
	voucher := s.voucherWith(t, 10, 1, "challenge", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	ctx := newBrowser(t)
	phone := fmt.Sprintf("138%08d", time.Now().UnixNano()%1e8)
	userID := s.logInOnPage(t, ctx, fmt.Sprintf("%s/buy?voucher=%d", s.api, voucher), phone)
	shown := func() (id, digits string) {
		t.Helper()
		if got := pageSays(t, ctx, "challenge shown", "order refused"); got != "challenge shown" {
			t.Fatalf("buying on a challenge sale: the page shows %q", got)
		}
		attr, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.ID("challenge"), "data-id"))
		if err != nil || !attr.Exists {
			t.Fatalf("the challenge's id on the page: %v", err)
		}
		id = attr.Value
		testsupport.Wait(t, 10*time.Second, "the challenge's picture drawn, 240 pixels wide", func() bool {
			w, err := chromedp.Run(ctx, chromedp.Evaluate[int64](`document.getElementById('picture').naturalWidth`))
			return err == nil && w == 240
		})
		v, err := s.redis.Client.Get(t.Context(), s.redis.Prefix+"botcheck:challenge:"+userID+":"+id).Result()
		if err != nil {
			t.Fatalf("challenge %s in Redis: %v", id, err)
		}
		return id, v[strings.LastIndex(v, ":")+1:]
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("buy"))); err != nil {
		t.Fatal(err)
	}
	first, digits := shown()
	wrong := []byte(digits)
	wrong[0] = '0' + (wrong[0]-'0'+1)%10
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("answer"), string(wrong)), chromedp.Click(chromedp.ID("solve"))); err != nil {
		t.Fatal(err)
	}
	refused := "answer refused: " + botcheck.ErrWrongAnswer.Error()
	testsupport.Wait(t, 20*time.Second, "the page saying the answer was wrong", func() bool {
		out, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("out")))
		return err == nil && strings.Contains(out, refused+"\nchallenge shown")
	})
	second, digits := shown()
	if second == first {
		t.Fatal("after a wrong answer the page shows the same challenge")
	}
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("answer"), digits), chromedp.Click(chromedp.ID("solve"))); err != nil {
		t.Fatal(err)
	}
	s.orderLands(t, ctx, voucher, phone)

	// A link whose voucher is not an id ("../../user/logout#" would send
	// the page's requests to another route) gets no button to press.
	for _, given := range []string{"../../user/logout#", "7/../1", "1e3", ""} {
		if err := chromedp.Do(ctx, chromedp.Navigate(s.api+"/buy?voucher="+url.QueryEscape(given))); err != nil {
			t.Fatal(err)
		}
		if got := pageSays(t, ctx, "not a voucher id", "challenge shown"); !strings.HasPrefix(got, "not a voucher id") {
			t.Fatalf("/buy?voucher=%s: the page shows %q", given, got)
		}
		if disabled, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById('buy').disabled`)); err != nil || !disabled {
			t.Fatalf("/buy?voucher=%s: the buy button is enabled (%v)", given, err)
		}
	}
}

// logInOnPage opens page and logs phone in there as a person does: asks
// for a code, reads it (where the api keeps it: the code is kept under the
// client's address, 127.0.0.1 directly or through nginx), types it. It
// returns the user id the page shows.
func (s *sale) logInOnPage(t *testing.T, ctx context.Context, page, phone string) string {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(page),
		chromedp.SendKeys(chromedp.ID("phone"), phone),
		chromedp.Click(chromedp.ID("send"))); err != nil {
		t.Fatal(err)
	}
	if got := pageSays(t, ctx, "code sent", "code failed"); got != "code sent" {
		t.Fatalf("asking for a code: the page shows %q", got)
	}
	code, err := s.redis.Client.HGet(t.Context(), user.Keys{Prefix: s.redis.Prefix}.Code(phone, "127.0.0.1"), "code").Result()
	if err != nil {
		t.Fatalf("no code for %s in Redis: %v", phone, err)
	}
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("code"), code), chromedp.Click(chromedp.ID("login"))); err != nil {
		t.Fatal(err)
	}
	got := pageSays(t, ctx, "logged in as", "login failed")
	id, ok := strings.CutPrefix(got, "logged in as ")
	if !ok {
		t.Fatalf("logging in: the page shows %q", got)
	}
	return id
}

// orderLands waits for the page to show the order it took and for that
// order to be phone's in MySQL.
func (s *sale) orderLands(t *testing.T, ctx context.Context, voucher int64, phone string) {
	t.Helper()
	line := pageSays(t, ctx, "order ")
	m := orderLine.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("buying: the page shows %q, no order id", line)
	}
	testsupport.Wait(t, 30*time.Second, "the order in MySQL", func() bool {
		var n int
		err := s.mysql.DB.QueryRow(`SELECT COUNT(*) FROM tb_voucher_order o JOIN tb_user u ON u.id = o.user_id
			WHERE o.id = ? AND o.voucher_id = ? AND u.phone = ?`, m[1], voucher, phone).Scan(&n)
		return err == nil && n == 1
	})
}

// A person on a sale with a draw, in a real browser, on /buy: the page
// says "entered" and when the draw is, then the outcome once the
// order-writer's drawer has made it, and the order lands in MySQL.
func TestBrowserEntersADrawAndReadsItsOutcome(t *testing.T) {
	s := newSaleOn(t, stack{testsupport.MustRedis(t), testsupport.MustMySQL(t), testsupport.MustKafka(t)}, nil,
		map[string]string{"SECKILL_DEV_MODE": "true"})
	// Logged in first (the session stays in the tab), the sale opened
	// then: its window need only last while the person clicks.
	ctx := newBrowser(t)
	phone := fmt.Sprintf("139%08d", time.Now().UnixNano()%1e8)
	s.logInOnPage(t, ctx, s.api+"/buy?voucher=1", phone)
	voucher := s.drawSale(t, 1, 8*time.Second, time.Now().Truncate(time.Second))
	if err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("%s/buy?voucher=%d", s.api, voucher)), chromedp.Click(chromedp.ID("buy"))); err != nil {
		t.Fatal(err)
	}
	if got := pageSays(t, ctx, "entered: the draw is at ", "order"); !strings.HasPrefix(got, "entered") {
		t.Fatalf("buying in the draw's window: the page shows %q", got)
	}
	line := pageSays(t, ctx, "drawn: order ", "not drawn", "outcome unknown")
	id, ok := strings.CutPrefix(line, "drawn: order ")
	if !ok {
		t.Fatalf("the only entrant of one unit: the page shows %q", line)
	}
	testsupport.Wait(t, 30*time.Second, "the drawn order in MySQL", func() bool {
		var n int
		err := s.mysql.DB.QueryRow(`SELECT COUNT(*) FROM tb_voucher_order o JOIN tb_user u ON u.id = o.user_id
			WHERE o.id = ? AND o.voucher_id = ? AND u.phone = ?`, id, voucher, phone).Scan(&n)
		return err == nil && n == 1
	})
}

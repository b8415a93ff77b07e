// The browser check: the course's own web client (its html/hmdp folder,
// unchanged) in Debian's Chromium against a running seckill system. It is
// served the way the course serves it, by one origin that hands out the
// static files and passes /api/* to the API with the prefix cut (the
// course's nginx.conf: rewrite /api(/.*) $1). A buyer logs in with an SMS
// code read from the API's log (development mode), opens the pages, and
// buys a flash-sale voucher. Every page the API serves is opened (home,
// shop list, my page, shop); each must show what the API lists for it.
// The order id the page shows must be an order
// of that buyer in the system, and the page must show no error toast but
// the one a second purchase has to get.
//
// Environment: WEB_DIR (the course's html/hmdp), API_URL (the running
// API), API_CA (its certificate, for https), API_LOG (the file its log
// goes to), SECKILL_ADMIN_TOKEN, SESSION_MODE (printed only), SHOTS (a
// folder for a screenshot of each page, optional).
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { chromium } from 'playwright-core';

const need = (name) => {
  const v = process.env[name];
  if (!v) { console.error(`webcheck: ${name} is not set`); process.exit(2); }
  return v;
};
const webDir = need('WEB_DIR');
const api = new URL(need('API_URL'));
const apiLog = need('API_LOG');
const adminToken = need('SECKILL_ADMIN_TOKEN');
const mode = process.env.SESSION_MODE ?? 'redis';
const shots = process.env.SHOTS;
const ca = process.env.API_CA ? fs.readFileSync(process.env.API_CA) : undefined;
if (!fs.existsSync(path.join(webDir, 'login.html'))) {
  console.error(`webcheck: ${webDir} has no login.html: give the course's html/hmdp folder`);
  process.exit(2);
}

// callAPI is a request straight to the API (the set-up and the checks of
// what the page showed), with a deadline.
async function callAPI(method, route, { body, headers = {} } = {}) {
  return new Promise((resolve, reject) => {
    const lib = api.protocol === 'https:' ? https : http;
    const req = lib.request(new URL(route, api), {
      method, ca, timeout: 5000,
      headers: { ...headers, ...(body ? { 'content-type': 'application/json' } : {}) },
    }, (res) => {
      let raw = '';
      res.on('data', (c) => { raw += c; });
      res.on('end', () => {
        try { resolve({ status: res.statusCode, body: JSON.parse(raw) }); } catch { reject(new Error(`${method} ${route}: ${res.statusCode} ${raw}`)); }
      });
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${route}: no answer in 5 s`)));
    req.on('error', reject);
    if (body) req.write(JSON.stringify(body));
    req.end();
  });
}

const types = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css', '.ico': 'image/x-icon',
  '.png': 'image/png', '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg', '.gif': 'image/gif', '.svg': 'image/svg+xml',
  '.ttf': 'font/ttf', '.woff': 'font/woff' };

// front is the course's origin: static files, and /api passed on.
const front = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://front');
  if (url.pathname.startsWith('/api/')) {
    const lib = api.protocol === 'https:' ? https : http;
    const headers = { ...req.headers, host: api.host };
    const up = lib.request(new URL(url.pathname.slice(4) + url.search, api), { method: req.method, headers, ca, timeout: 10000 }, (r) => {
      res.writeHead(r.statusCode, r.headers);
      r.pipe(res);
    });
    up.on('error', (err) => { res.writeHead(502, { 'content-type': 'text/plain' }); res.end(String(err)); });
    req.pipe(up);
    return;
  }
  const file = path.join(webDir, path.normalize(decodeURIComponent(url.pathname === '/' ? '/index.html' : url.pathname)));
  if (!file.startsWith(webDir) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
    res.writeHead(404);
    res.end();
    return;
  }
  res.writeHead(200, { 'content-type': types[path.extname(file)] ?? 'application/octet-stream' });
  fs.createReadStream(file).pipe(res);
});
await new Promise((resolve) => front.listen(0, '127.0.0.1', resolve));
const origin = `http://127.0.0.1:${front.address().port}`;

// codeFor waits for the login code the API logged for phone.
async function codeFor(phone, since) {
  const deadline = Date.now() + 10000;
  while (Date.now() < deadline) {
    const text = fs.readFileSync(apiLog, 'utf8').slice(since);
    const m = [...text.matchAll(new RegExp(`phone[=":]+${phone}"?[ ,]+"?code[=":]+(\\d{6})`, 'g'))].pop();
    if (m) return m[1];
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no login code for ${phone} in ${apiLog} within 10 s`);
}

const failures = [];
const check = (ok, what) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} [${mode}] ${what}`);
  if (!ok) failures.push(what);
};

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});
try {
  const admin = { 'x-admin-token': adminToken };
  const now = Date.now();
  const sale = await callAPI('POST', '/voucher/seckill', { headers: admin, body: {
    shopId: 1, title: `webcheck ${mode} ${now}`, subTitle: 'the browser check', rules: 'one per buyer',
    payValue: 8000, actualValue: 10000, stock: 5,
    beginTime: new Date(now - 3600e3).toISOString(), endTime: new Date(now + 3600e3).toISOString() } });
  if (sale.status !== 200 || !sale.body.success) throw new Error(`create the sale: ${JSON.stringify(sale)}`);
  const voucherId = String(sale.body.data);

  const page = await (await browser.newContext()).newPage();
  const toasts = [];
  const apiErrors = [];
  page.on('response', (r) => {
    if (r.url().includes('/api/') && r.status() >= 400) apiErrors.push(`${r.status()} ${new URL(r.url()).pathname}`);
  });
  page.on('pageerror', (err) => apiErrors.push(`script error on ${page.url()}: ${err.message}`));
  await page.exposeFunction('webcheckToast', (kind, text) => toasts.push({ kind, text, page: new URL(page.url()).pathname }));
  await page.addInitScript(() => {
    new MutationObserver((records) => {
      for (const r of records) for (const n of r.addedNodes) {
        if (n.nodeType === 1 && n.classList.contains('el-message')) {
          const kind = [...n.classList].find((c) => c.startsWith('el-message--'))?.slice(12) ?? 'info';
          window.webcheckToast(kind, n.textContent.trim());
        }
      }
    }).observe(document, { childList: true, subtree: true });
  });
  const shot = async (name) => { if (shots) await page.screenshot({ path: path.join(shots, `${mode}-${name}.png`), fullPage: true }); };
  const errorToasts = (where) => toasts.filter((t) => t.kind === 'error' && t.page === where);

  // The pages a stranger sees: each shows what the API lists for it.
  const shows = async (route, expected, what) => {
    await page.goto(`${origin}${route}`);
    await page.getByText(expected, { exact: false }).first().waitFor({ timeout: 5000 });
    await page.waitForLoadState('networkidle');
    check(errorToasts(new URL(page.url()).pathname).length === 0, `${route} shows ${what} ("${expected}") with no error toast`);
    await shot(route.slice(1).replace(/[^a-z-]+/g, '_'));
  };
  const hot = await callAPI('GET', '/blog/hot');
  if (!hot.body.data?.length) throw new Error('the hot list is empty: run make seed (make webcheck does)');
  await shows('/index.html', hot.body.data[0].title, 'the shop types and the hot notes');
  const ofType = await callAPI('GET', '/shop/of/type?typeId=1');
  await shows('/shop-list.html?type=1&name=%E7%BE%8E%E9%A3%9F', ofType.body.data[0].name, 'the shops of a type');

  // Login: the phone, "send code", the code from the log, the agreement,
  // "log in"; the client stores the token and goes on.
  const phone = `139${String(now).slice(-8)}`;
  await page.goto(`${origin}/login.html`);
  await page.fill('input[placeholder="请输入手机号"]', phone);
  const logSize = fs.statSync(apiLog).size;
  await page.click('button:has-text("发送验证码")');
  await page.fill('input[placeholder="请输入验证码"]', await codeFor(phone, logSize));
  await page.check('input[name="readed"]', { force: true });
  await page.click('button:has-text("登录")');
  await page.waitForURL((u) => !u.pathname.endsWith('/login.html'), { timeout: 5000 });
  const token = await page.evaluate(() => sessionStorage.getItem('token'));
  check(!!token, `login: the client stored the token and left the login page for ${new URL(page.url()).pathname}`);
  await page.waitForLoadState('networkidle');
  await shot('after-login');
  const me = await callAPI('GET', '/user/me', { headers: { authorization: token } });
  check(me.status === 200 && me.body.data?.id > 0, `the token the page holds is a session: /user/me ${me.status}`);
  await shows('/info.html', me.body.data.nickName, "the buyer's own page");

  // The shop's page lists the sale; the buyer clicks it.
  await page.goto(`${origin}/shop-detail.html?id=1`);
  const card = page.locator('.voucher-box', { hasText: `webcheck ${mode} ${now}` }).first();
  await card.waitFor({ timeout: 5000 });
  check(true, 'the shop page lists the flash sale');
  await shot('shop');
  await card.locator('.voucher-btn').click();
  const success = page.locator('.el-message--success');
  await success.waitFor({ timeout: 5000 });
  const shown = (await success.textContent()).match(/(\d+)\s*$/)?.[1];
  check(!!shown, `the page says the purchase succeeded: "${(await success.textContent()).trim()}"`);
  await shot('bought');

  // The id the page shows is this buyer's order of this voucher.
  let order;
  for (let i = 0; i < 50; i++) {
    order = await callAPI('GET', `/voucher-order/${shown}`, { headers: { authorization: token } });
    if (order.body.data?.status === 'confirmed') break;
    await new Promise((r) => setTimeout(r, 100));
  }
  check(order.status === 200 && String(order.body.data?.voucherId) === voucherId && order.body.data?.status === 'confirmed',
    `the order the page showed is the buyer's, of the sale, in MySQL: ${JSON.stringify(order.body.data)}`);

  // A second click: the course's contract answers 200 with success false,
  // and the page shows the API's own words, not "server error".
  const before = errorToasts('/shop-detail.html').length;
  await card.locator('.voucher-btn').click();
  await page.locator('.el-message--error').first().waitFor({ timeout: 5000 });
  await page.waitForTimeout(300);
  const second = errorToasts('/shop-detail.html').slice(before);
  check(second.length === 1 && second[0].text !== '服务器异常' && second[0].text !== '请先登录',
    `a second purchase is refused in the API's words: ${JSON.stringify(second.map((t) => t.text))}`);

  const unexpected = toasts.filter((t) => t.kind === 'error' && !second.includes(t));
  check(unexpected.length === 0, `no other error toast on any page: ${JSON.stringify(unexpected)}`);
  check(apiErrors.length === 0, `no API answer of 4xx/5xx and no script error: ${JSON.stringify(apiErrors)}`);
} catch (err) {
  check(false, `the check stopped: ${err.message}`);
} finally {
  await browser.close();
  front.close();
}
if (failures.length) {
  console.error(`webcheck [${mode}]: ${failures.length} check(s) failed`);
  process.exit(1);
}
console.log(`webcheck [${mode}]: the course's web client logs in and buys`);

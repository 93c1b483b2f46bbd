/*
 * dashboard_test.js: the dashboard in headless chromium (run by
 * run_browser.sh, which starts dpgate and passes DPGATE_URL, DPGATE_KEY,
 * DPGATE_CHROMIUM, DPGATE_SHOTS and PLAYWRIGHT_CORE).
 *
 * Signs in with a key from the keyboard, sees the datasets, charges
 * through the API and waits for the page's remaining epsilon to show the
 * new value (computed here from the budget and the charges made, not read
 * back) within two seconds without a reload, opens a dataset's chart with
 * the keyboard, checks that no request leaves the server, that the key is
 * in sessionStorage only and never in a URL, that a dataset name holding
 * HTML is shown as text, that the page falls back to tables without
 * Chart.js, and saves screenshots at 1280 and 390 px.
 *
 * Then the detail view's lists in full: a ledger longer than the page
 * keeps (its newest entries shown, its chart ending at the true total),
 * a dataset opened while another's long ledger is still loading (only its
 * own entries), finished jobs with their trainer, ε and result (also after
 * a refresh), and more reservations than one API page.
 */
'use strict';

const assert = require('assert');
const fs = require('fs');
const path = require('path');
const { chromium } = require(process.env.PLAYWRIGHT_CORE);

const base = process.env.DPGATE_URL;
const key = process.env.DPGATE_KEY;
const shots = process.env.DPGATE_SHOTS;

async function api(method, route, body) {
  const r = await fetch(base + route, {
    method,
    headers: { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json' },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await r.text();
  assert.ok(r.status < 300, method + ' ' + route + ': ' + r.status + ' ' + text);
  return text ? JSON.parse(text) : null;
}

function charge(id, epsilon, delta, note) {
  return api('POST', '/v1/datasets/' + id + '/charges',
             { event: { type: 'epsilon_delta', epsilon, delta: delta || 0 }, note });
}

/* The page's formatting of an epsilon, written out independently: three
 * significant digits in the en-US locale the browser runs with. */
function threeDigits(x) {
  return new Intl.NumberFormat('en-US', { maximumSignificantDigits: 3 }).format(x);
}

async function seed() {
  await api('POST', '/v1/datasets', { id: 'census', name: 'Census 2020 (household survey)',
                                      budget: { epsilon: 2, delta: 1e-6 }, accountant: 'basic' });
  await api('POST', '/v1/datasets', { id: 'clinic', name: 'Clinic visits',
                                      budget: { epsilon: 1, delta: 1e-5 }, accountant: 'rdp' });
  await api('POST', '/v1/datasets', { id: 'xss', name: '<img src=x id=injected>',
                                      budget: { epsilon: 1, delta: 0 }, accountant: 'basic' });
  const notes = ['age histogram', 'income quantiles', 'household sizes', 'region counts'];
  for (let i = 0; i < 4; i++) await charge('census', 0.125, 1e-8, notes[i]);
  await api('POST', '/v1/datasets/census/reservations',
            { event: { type: 'epsilon_delta', epsilon: 0.25, delta: 0 }, note: 'training job' });
  for (let i = 0; i < 6; i++) await charge('clinic', 0.15, 0, 'weekly report ' + (i + 1));
}

/* The long ledger: more entries than the page keeps (LEDGER_MAX, read from
 * the script served) and than two of its reads (LEDGER_FETCH).  Entries of
 * 1e-4 each, so their sum is known; `small` is charged first, so that its
 * entries' seqs are below all of `big`'s. */
const ENTRY_EPS = 1e-4;
let bigCount = 0, bigLastSeq = 0;
const smallSeqs = [];

async function seedLong() {
  const script = await (await fetch(base + '/assets/dashboard.js')).text();
  const kept = Number(/LEDGER_MAX = (\d+)/.exec(script)[1]);
  const perRead = Number(/LEDGER_FETCH = (\d+)/.exec(script)[1]);
  bigCount = kept + 2 * perRead + 30;
  await api('POST', '/v1/datasets', { id: 'small', name: 'Small', budget: { epsilon: 1, delta: 0 },
                                      accountant: 'basic' });
  await api('POST', '/v1/datasets', { id: 'big', name: 'Big', budget: { epsilon: 100, delta: 0 },
                                      accountant: 'basic' });
  for (let i = 0; i < 3; i++) smallSeqs.push((await charge('small', 0.1, 0, 'small ' + i)).id);
  const t0 = Date.now();
  let made = 0;
  /* Four at a time over kept-alive connections. */
  await Promise.all([0, 1, 2, 3].map(async () => {
    while (made < bigCount) {
      made++;
      const r = await charge('big', ENTRY_EPS, 0);
      bigLastSeq = Math.max(bigLastSeq, r.id);
    }
  }));
  console.log(bigCount + ' ledger entries made in ' + (Date.now() - t0) + ' ms');
}

/* A dataset with data (iris, its numeric columns declared) and a job on
 * it run to the end. */
let jobId = null, jobLedgerEps = null;

async function seedJob() {
  await api('POST', '/v1/datasets', { id: 'iris', name: 'Iris',
                                      budget: { epsilon: 10, delta: 1e-5 }, accountant: 'rdp' });
  const rows = fs.readFileSync(path.join(__dirname, '..', 'data', 'iris.csv'), 'utf8')
    .split('\n').slice(1).join('\n');
  const put = await fetch(base + '/v1/datasets/iris/data?columns=*:numeric&row_count=public', {
    method: 'PUT', headers: { Authorization: 'Bearer ' + key, 'Content-Type': 'text/csv' },
    body: 'a,b,c,d,species\n' + rows,
  });
  assert.strictEqual(put.status, 200, await put.text());
  /* 150 rows, lots of 30, 2 epochs: 10 steps. */
  const job = await api('POST', '/v1/datasets/iris/jobs', { trainer: 'dpsgd', params: {
    model: 'logreg', label: 'species', classes: 3, epochs: 2, lot_size: 30,
    noise_multiplier: 2, clip_norm: 1, learning_rate: 0.5 } });
  jobId = job.id;
  for (let i = 0; i < 200; i++) {
    const j = await api('GET', '/v1/jobs/' + jobId);
    if (j.state !== 'queued' && j.state !== 'running') {
      assert.strictEqual(j.state, 'succeeded', JSON.stringify(j));
      jobLedgerEps = j.progress.epsilon.ledger;
      break;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.ok(jobLedgerEps !== null, 'the job did not finish');
}

/* More open reservations than one API page holds (100 unless asked, 1000
 * at most). */
const RESERVATIONS = 1005;
const reservationIds = [];

async function seedReservations() {
  await api('POST', '/v1/datasets', { id: 'held', name: 'Held', budget: { epsilon: 10, delta: 0 },
                                      accountant: 'basic' });
  let made = 0;
  await Promise.all([0, 1, 2, 3].map(async () => {
    while (made < RESERVATIONS) {
      made++;
      const r = await api('POST', '/v1/datasets/held/reservations',
                          { event: { type: 'epsilon_delta', epsilon: 0.001, delta: 0 } });
      reservationIds.push(r.id);
    }
  }));
}

async function signIn(page) {
  await page.goto(base + '/');
  await page.focus('#key');
  await page.keyboard.type(key);
  await page.keyboard.press('Enter');
  await page.waitForSelector('li.card[data-dataset="census"]');
}

/* Watches a page for requests to anything but the server, page errors and
 * CSP refusals. */
function guard(page, problems) {
  page.on('request', (r) => {
    if (!r.url().startsWith(base + '/')) problems.push('request to ' + r.url());
    if (r.url().includes(key)) problems.push('the key in a URL: ' + r.url());
  });
  page.on('pageerror', (e) => problems.push('page error: ' + e.message));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/404/.test(m.text())) problems.push('console: ' + m.text());
  });
}

/* A new context (`options`, the desktop's by default) and page, guarded
 * (its problems in `problems`) and signed in. */
async function guardedPage(browser, options) {
  const ctx = await browser.newContext(options ||
                                       { viewport: { width: 1280, height: 900 }, locale: 'en-US' });
  const page = await ctx.newPage();
  const problems = [];
  guard(page, problems);
  await signIn(page);
  return { ctx, page, problems };
}

async function desktop(browser) {
  const { ctx, page, problems } = await guardedPage(browser);

  /* The key: in this tab's sessionStorage, nowhere else. */
  assert.strictEqual(await page.evaluate(() => sessionStorage.getItem('dpgate.key')), key);
  assert.strictEqual(await page.evaluate(() => localStorage.length), 0);
  assert.strictEqual((await ctx.cookies()).length, 0);
  assert.ok(!page.url().includes(key));

  /* HTML in a name is text. */
  const xss = await page.textContent('li.card[data-dataset="xss"] h3 button');
  assert.strictEqual(xss, '<img src=x id=injected>');
  assert.strictEqual(await page.$('#injected'), null);

  /* Under a tenth left: the warning; more: none. clinic: 1 - 6 x 0.15. */
  await charge('clinic', 0.05, 0, 'ad hoc');
  await page.waitForSelector('li.card.low[data-dataset="clinic"]', { timeout: 2000 });
  assert.strictEqual(await page.$('li.card.low[data-dataset="census"]'), null);

  /* A charge from elsewhere reaches the page within 2 s, no reload. */
  await page.evaluate(() => { window.notReloaded = true; });
  const cell = 'li.card[data-dataset="census"] .remaining-eps';
  /* 2 - 4 x 0.125 spent - 0.25 reserved */
  assert.strictEqual(await page.textContent(cell), threeDigits(2 - 0.5 - 0.25));
  const expected = threeDigits(2 - 0.5 - 0.25 - 0.375);
  const t0 = Date.now();
  await charge('census', 0.375, 1e-8, 'survey weights');
  await page.waitForFunction(([sel, want]) => document.querySelector(sel).textContent === want,
                             [cell, expected], { timeout: 2000 });
  const elapsed = Date.now() - t0;
  assert.ok(await page.evaluate(() => window.notReloaded === true), 'the page reloaded');
  console.log('remaining epsilon updated on the page ' + elapsed + ' ms after the charge');

  await page.screenshot({ path: path.join(shots, 'dashboard-desktop.png'), fullPage: true });

  /* Open census with the keyboard: Tab to its button, Enter. */
  let found = false;
  for (let i = 0; i < 40 && !found; i++) {
    await page.keyboard.press('Tab');
    found = await page.evaluate(() => {
      const a = document.activeElement;
      return !!a && a.closest('li.card') !== null && a.closest('li.card').dataset.dataset === 'census';
    });
  }
  assert.ok(found, 'the census card cannot be reached with Tab');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#view-dataset:not([hidden])');
  await page.waitForFunction(() => document.querySelectorAll('#ledger tbody tr').length >= 6);
  /* Chart.js drew the cumulative spend: 4 x 0.125 + 0.375 spent so far. */
  await page.waitForFunction(() => window.Chart && Chart.getChart(document.getElementById('chart')));
  const last = await page.evaluate(() => {
    const c = Chart.getChart(document.getElementById('chart'));
    const d = c.data.datasets[0].data;
    return d[d.length - 1].y;
  });
  assert.ok(Math.abs(last - 0.875) < 1e-12, 'cumulative spend ' + last);
  const box = await page.evaluate(() => document.getElementById('chart').getBoundingClientRect().height);
  assert.ok(box > 100, 'chart height ' + box);
  /* The reservation is listed (its list is fetched apart from the
   * ledger's, so it may come later). */
  await page.waitForFunction(() =>
    (document.querySelector('#reservations tbody')?.textContent || '').includes('open'));
  /* Keys: an admin sees the tab. */
  assert.ok(await page.isVisible('.tab[data-view="keys"]'));
  await page.screenshot({ path: path.join(shots, 'dashboard-desktop-dataset.png'), fullPage: true });

  assert.deepStrictEqual(problems, []);
  await ctx.close();
}

async function mobile(browser) {
  const { ctx, page, problems } = await guardedPage(browser, {
    viewport: { width: 390, height: 844 }, locale: 'en-US', isMobile: true, hasTouch: true,
    deviceScaleFactor: 1 });
  /* Nothing wider than the screen. */
  const wide = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(wide <= 390, 'the page is ' + wide + ' px wide at 390');
  await page.screenshot({ path: path.join(shots, 'dashboard-mobile.png'), fullPage: true });
  assert.deepStrictEqual(problems, []);
  await ctx.close();
}

/* Without Chart.js (the file absent on the server) the chart is a table. */
async function withoutChartJs(browser) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: 'en-US' });
  const page = await ctx.newPage();
  await page.route('**/assets/chart.js', (r) => r.fulfill({ status: 404, body: '' }));
  await signIn(page);
  await page.click('li.card[data-dataset="census"] h3 button');
  await page.waitForSelector('#chart-table:not([hidden])');
  assert.ok(await page.isHidden('#chart-box'));
  const rows = await page.$$eval('#chart-table tbody tr', (t) => t.length);
  assert.strictEqual(rows, 5);
  await ctx.close();
}

async function openCard(page, id) {
  await page.click('.tab[data-view="datasets"]');
  await page.click('li.card[data-dataset="' + id + '"] h3 button');
  await page.waitForFunction((t) => document.getElementById('dataset-title').textContent === t,
                             'Dataset ' + id);
}

function lastChartY(page) {
  return page.evaluate(() => {
    const d = Chart.getChart(document.getElementById('chart')).data.datasets[0].data;
    return d.length ? d[d.length - 1].y : null;
  });
}

/* The long ledger, alone, then a short one opened while it still loads. */
async function longLedger(browser) {
  const { ctx, page, problems } = await guardedPage(browser);
  await openCard(page, 'big');
  /* The newest entry on top, and the chart at the sum of every charge. */
  await page.waitForFunction((seq) => {
    const top = document.querySelector('#ledger tbody tr td');
    return top && top.textContent === String(seq);
  }, bigLastSeq, { timeout: 10000 });
  await page.waitForFunction(() => window.Chart && Chart.getChart(document.getElementById('chart')));
  const total = bigCount * ENTRY_EPS;
  await page.waitForFunction((want) => {
    const d = Chart.getChart(document.getElementById('chart')).data.datasets[0].data;
    return d.length && Math.abs(d[d.length - 1].y - want) < 1e-9;
  }, total, { timeout: 5000 }).catch(async () => {
    assert.fail('the chart ends at ' + (await lastChartY(page)) + ', the ledger sums to ' + total);
  });
  /* Its count: every entry of big's ledger. */
  const pager = await page.textContent('#ledger-page');
  assert.ok(pager.includes(' of ' + bigCount.toLocaleString('en-US') + ' entries'), pager);

  /* Again from the list; small opened as soon as big's facts are shown,
   * while big's ledger is still being read. */
  await page.reload();
  await page.waitForSelector('li.card[data-dataset="big"]');
  await page.click('li.card[data-dataset="big"] h3 button');
  await page.waitForFunction(() => document.getElementById('dataset-facts')
    .textContent.includes('Big'));
  await openCard(page, 'small');
  await page.waitForFunction(() => document.getElementById('dataset-facts')
    .textContent.includes('Small'));
  /* Long enough for big's reads to have ended. */
  await page.waitForTimeout(3000);
  const seqs = await page.$$eval('#ledger tbody tr',
                                 (rows) => rows.map((r) => r.cells[0].textContent));
  assert.deepStrictEqual(seqs, smallSeqs.slice().reverse().map(String));
  assert.ok(Math.abs(await lastChartY(page) - 0.3) < 1e-12, "small's chart");
  assert.deepStrictEqual(problems, []);
  await ctx.close();
}

/* A finished job's row: trainer, ε and result, kept across refreshes. */
async function finishedJob(browser) {
  const { ctx, page, problems } = await guardedPage(browser);
  await openCard(page, 'iris');
  const row = (id) => page.evaluate((id) => {
    const r = [...document.querySelectorAll('#jobs tbody tr')].find((t) => t.dataset.job === id);
    return r ? [...r.cells].map((c) => c.textContent) : null;
  }, id);
  const filled = async () => {
    await page.waitForFunction((id) => {
      const r = [...document.querySelectorAll('#jobs tbody tr')].find((t) => t.dataset.job === id);
      return r && r.cells[1].textContent !== '';
    }, jobId, { timeout: 5000 });
    const cells = await row(jobId);
    assert.strictEqual(cells[1], 'dpsgd');
    assert.strictEqual(cells[2], 'succeeded');
    assert.strictEqual(cells[4], threeDigits(jobLedgerEps));
    assert.ok(cells[5].includes('steps_done: 10'), 'result cell: ' + cells[5]);
  };
  await filled();
  /* A charge refreshes the view: the row stays filled. */
  const before = await page.textContent('#dataset-facts');
  await charge('iris', 0.01, 0, 'after the job');
  await page.waitForFunction((b) => document.getElementById('dataset-facts').textContent !== b,
                             before);
  await page.waitForTimeout(500);
  await filled();
  assert.deepStrictEqual(problems, []);
  await ctx.close();
}

/* Every reservation, past the API's first page. */
async function allReservations(browser) {
  const { ctx, page, problems } = await guardedPage(browser);
  await openCard(page, 'held');
  await page.waitForFunction((n) => document.querySelectorAll('#reservations tbody tr').length >= n,
                             RESERVATIONS, { timeout: 5000 }).catch(() => {});
  const ids = await page.$$eval('#reservations tbody tr',
                                (rows) => rows.map((r) => r.cells[0].textContent));
  assert.deepStrictEqual(ids.slice().sort(), reservationIds.slice().sort());
  assert.deepStrictEqual(problems, []);
  await ctx.close();
}

(async () => {
  const browser = await chromium.launch({
    executablePath: process.env.DPGATE_CHROMIUM,
    args: ['--no-sandbox', '--disable-dev-shm-usage'],
  });
  try {
    await seed();
    await desktop(browser);
    await mobile(browser);
    await withoutChartJs(browser);
    await seedLong();
    await longLedger(browser);
    await seedReservations();
    await allReservations(browser);
    await seedJob();
    await finishedJob(browser);
    console.log('browser test: all checks passed');
  } finally {
    await browser.close();
  }
})().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});

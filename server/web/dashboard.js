/*
 * dpgate's dashboard.  No framework and no build step: this file is served
 * as written.  Rules it keeps:
 *   - the API key lives in sessionStorage only and travels in the
 *     Authorization header, never in a URL;
 *   - every value from the API reaches the page through textContent (or a
 *     CSSOM width), never as HTML;
 *   - updates come by long-poll (?wait=S with If-None-Match): one request
 *     per watched resource at a time, at least MIN_GAP_MS apart, and a 503
 *     waits for its Retry-After.
 */
'use strict';

(function () {
  const KEY = 'dpgate.key';
  const WAIT_S = 25;            /* a long-poll's wait; the server allows 60 */
  const MIN_GAP_MS = 1000;      /* between two reads of one resource */
  const MAX_BACKOFF_MS = 30000;
  const LEDGER_PAGE = 20;       /* ledger rows shown at a time */
  const LEDGER_FETCH = 1000;    /* entries per ledger request (the server's page limit) */
  const LEDGER_MAX = 5000;      /* newest entries kept; older ones only as their ε sum */
  const RESERVATION_FETCH = 1000; /* reservations per request (the server's page limit) */
  const MAX_JOB_WATCHES = 2;    /* browsers allow six connections per host */

  let key = sessionStorage.getItem(KEY);
  const watchers = new Map();
  /* detail: the open dataset's refresh state, a new object per opening, so
   * that an answer for a dataset no longer open is recognised and dropped.
   * ledgerBase, ledgerDropped: the ε of the charges and commits dropped
   * from `ledger`, and how many entries were dropped.
   * finishedJobs: finished jobs as GET /v1/jobs/{id} answered (they no
   * longer change). */
  const state = { datasets: [], current: null, ledger: [], ledgerSeq: 0, ledgerBase: 0,
                  ledgerDropped: 0, ledgerPage: 0, detail: null, chart: null,
                  jobWatches: new Set(), finishedJobs: new Map(), jobReads: new Set() };

  /* ---- formatting ------------------------------------------------------- */

  const sig3 = new Intl.NumberFormat(undefined, { maximumSignificantDigits: 3 });
  const count = new Intl.NumberFormat(undefined);

  function fmtEps(x) {
    if (x === null || x === undefined || typeof x !== 'number' || !isFinite(x)) return '–';
    if (x !== 0 && Math.abs(x) < 1e-3) return x.toExponential(2);
    return sig3.format(x);
  }
  function fmtTime(s) {
    if (!s) return '–';
    const d = new Date(s);
    return isNaN(d.getTime()) ? String(s) : d.toLocaleString();
  }
  function fmtBytes(n) {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return sig3.format(n) + ' ' + units[i];
  }
  function fmtValue(k, v) {
    if (typeof v === 'number') {
      if (/bytes$/.test(k)) return fmtBytes(v);
      return Number.isInteger(v) ? count.format(v) : fmtEps(v);
    }
    if (typeof v === 'string' && /_at$/.test(k)) return fmtTime(v);
    if (v === null || v === undefined) return '–';
    if (typeof v === 'object') return Array.isArray(v) ? v.length + ' items' : '…';
    return String(v);
  }

  /* ---- DOM helpers: text only ------------------------------------------- */

  const $ = (id) => document.getElementById(id);
  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function cell(row, text, cls) { row.appendChild(el('td', text, cls)); }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  /* A table body's one row saying it is empty, across every column. */
  function emptyRow(tbody) {
    const tr = el('tr');
    const td = el('td', 'none', 'empty');
    td.colSpan = tbody.parentNode.tHead.rows[0].cells.length;
    tr.appendChild(td);
    tbody.appendChild(tr);
  }
  /* Fills table `id`'s body: a row per item by fill(tr, item), or one row
   * saying it is empty. */
  function renderRows(id, list, fill) {
    const tb = $(id).tBodies[0];
    clear(tb);
    if (!list.length) emptyRow(tb);
    for (const item of list) {
      const tr = el('tr');
      fill(tr, item);
      tb.appendChild(tr);
    }
    return tb;
  }
  /* An object's plain members as "name: value · ...". */
  function scalars(obj, skip) {
    return Object.entries(obj).filter(([k, v]) => k !== skip && (v === null || typeof v !== 'object'))
      .map(([k, v]) => k + ': ' + fmtValue(k, v)).join(' · ');
  }
  function setStatus(text) { $('status').textContent = text; }
  function sleep(ms, signal) {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      if (signal) signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
    });
  }

  /* ---- the API ------------------------------------------------------------ */

  async function api(path, etag, signal) {
    const headers = { Authorization: 'Bearer ' + key };
    if (etag) headers['If-None-Match'] = etag;
    const r = await fetch(path, { headers, cache: 'no-store', credentials: 'omit', signal });
    if (r.status === 401) {
      signOut('The server refused this key (revoked or mistyped).');
      throw new Error('unauthorized');
    }
    return r;
  }
  async function getJson(path) {
    const r = await api(path);
    if (!r.ok) throw new Error(path + ': HTTP ' + r.status);
    return r.json();
  }

  /* Reads `path` whenever it changes, by long-poll, until stopped. */
  function watch(name, path, onData, onRefused) {
    stopWatch(name);
    const ctl = new AbortController();
    watchers.set(name, ctl);
    (async () => {
      let tag = null, backoff = MIN_GAP_MS;
      while (!ctl.signal.aborted) {
        const started = Date.now();
        try {
          const target = tag ? path + (path.includes('?') ? '&' : '?') + 'wait=' + WAIT_S : path;
          const r = await api(target, tag, ctl.signal);
          if (r.status === 200) {
            tag = r.headers.get('ETag');
            const body = await r.json();
            if (!ctl.signal.aborted) onData(body);
            backoff = MIN_GAP_MS;
            setStatus('Live · updated ' + new Date().toLocaleTimeString());
          } else if (r.status === 503) {
            const after = parseInt(r.headers.get('Retry-After') || '1', 10);
            await sleep(Math.max(after * 1000, MIN_GAP_MS), ctl.signal);
            continue;
          } else if (r.status !== 304) {
            if (onRefused) onRefused(r.status);
            await sleep(backoff, ctl.signal);
            backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
            continue;
          }
        } catch (e) {
          if (ctl.signal.aborted || !key) return;
          setStatus('Connection lost; retrying…');
          await sleep(backoff, ctl.signal);
          backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
          continue;
        }
        const gap = MIN_GAP_MS - (Date.now() - started);
        if (gap > 0) await sleep(gap, ctl.signal);
      }
    })();
  }
  function stopWatch(name) {
    const ctl = watchers.get(name);
    if (ctl) { ctl.abort(); watchers.delete(name); }
  }
  function stopAll() { for (const name of [...watchers.keys()]) stopWatch(name); }

  /* ---- sign-in -------------------------------------------------------------- */

  function keyId(k) {
    const m = /^dpg_([0-9a-f]+)_/.exec(k);
    return m ? m[1] : '';
  }
  async function signIn(k) {
    key = k;
    const r = await api('/v1/datasets').catch(() => null);
    if (!r || !r.ok) {
      key = null;
      $('signin-error').textContent = r ? 'The server refused this key.' : 'The server cannot be reached.';
      return;
    }
    sessionStorage.setItem(KEY, k);
    $('key').value = '';
    $('signin-error').textContent = '';
    $('signin').hidden = true;
    $('app').hidden = false;
    $('who').hidden = false;
    $('who').textContent = 'Key ' + keyId(k);
    $('signout').hidden = false;
    showView('datasets');
    watchDatasets();
    probeKeys();
  }
  function signOut(message) {
    stopAll();
    key = null;
    sessionStorage.removeItem(KEY);
    if (state.chart) { state.chart.destroy(); state.chart = null; }
    $('app').hidden = true;
    $('who').hidden = true;
    $('signout').hidden = true;
    $('signin').hidden = false;
    $('signin-error').textContent = message || '';
    $('key').focus();
  }

  /* ---- views ------------------------------------------------------------------- */

  function showView(name) {
    for (const b of document.querySelectorAll('.tab'))
      b.setAttribute('aria-pressed', String(b.dataset.view === name));
    for (const v of ['datasets', 'dataset', 'keys'])
      $('view-' + v).hidden = v !== name;
    if (name === 'keys') loadKeys();
  }

  function summary(ds) {
    const s = ds.budget_summary || {};
    const budget = (s.budget && s.budget.epsilon) || (ds.budget && ds.budget.epsilon) || 0;
    return {
      budget,
      spent: (s.spent && s.spent.epsilon) || 0,
      reserved: (s.reserved && s.reserved.epsilon) || 0,
      remaining: s.remaining ? s.remaining.epsilon : null,
      deltaBudget: (s.budget && s.budget.delta) || (ds.budget && ds.budget.delta) || 0,
      deltaSpent: (s.spent && s.spent.delta) || 0,
      charges: s.charges || 0,
    };
  }
  function isLow(sm) {
    return sm.budget > 0 && sm.remaining !== null && sm.remaining < 0.1 * sm.budget;
  }

  function bar(sm) {
    const b = el('div', null, 'bar');
    const total = sm.budget > 0 ? sm.budget : 1;
    for (const [cls, v] of [['spent', sm.spent], ['reserved', sm.reserved],
                            ['remaining', sm.remaining || 0]]) {
      const s = el('span', null, cls);
      s.style.width = Math.max(0, Math.min(100, (100 * v) / total)) + '%';
      b.appendChild(s);
    }
    b.setAttribute('role', 'img');
    b.setAttribute('aria-label', 'spent ' + fmtEps(sm.spent) + ', reserved ' + fmtEps(sm.reserved) +
                   ', remaining ' + fmtEps(sm.remaining) + ' of ' + fmtEps(sm.budget));
    return b;
  }

  function nums(pairs) {
    const dl = el('dl', null, 'nums');
    for (const [k, v, cls] of pairs) {
      dl.appendChild(el('dt', k));
      dl.appendChild(el('dd', v, cls));
    }
    return dl;
  }

  function datasetCard(ds) {
    const sm = summary(ds);
    const li = el('li', null, 'card' + (isLow(sm) ? ' low' : '') + (ds.archived ? ' archived' : ''));
    li.dataset.dataset = ds.id;
    const h = el('h3');
    const open = el('button', ds.name || ds.id, 'link');
    open.type = 'button';
    open.addEventListener('click', () => openDataset(ds.id));
    h.appendChild(open);
    if (ds.archived) h.appendChild(el('span', 'archived', 'badge'));
    if (isLow(sm)) h.appendChild(el('span', 'under 10% left', 'badge low'));
    li.appendChild(h);
    li.appendChild(el('p', ds.id + ' · ' + (ds.accountant || '?') + ' accountant · ' +
                      count.format(sm.charges) + ' charges', 'meta'));
    li.appendChild(bar(sm));
    const pairs = [['budget ε', fmtEps(sm.budget)], ['spent ε', fmtEps(sm.spent)],
                   ['reserved ε', fmtEps(sm.reserved)],
                   ['remaining ε', fmtEps(sm.remaining), 'remaining-eps']];
    if (sm.deltaSpent > 0)
      pairs.push(['δ spent', fmtEps(sm.deltaSpent)], ['δ budget', fmtEps(sm.deltaBudget)]);
    li.appendChild(nums(pairs));
    return li;
  }

  function renderDatasets(body) {
    state.datasets = body.datasets || [];
    const ul = $('datasets');
    clear(ul);
    for (const ds of state.datasets) ul.appendChild(datasetCard(ds));
    $('datasets-empty').hidden = state.datasets.length > 0;
  }

  function watchDatasets() {
    const path = $('show-archived').checked ? '/v1/datasets?archived=true' : '/v1/datasets';
    watch('datasets', path, renderDatasets);
  }

  /* ---- one dataset ------------------------------------------------------------ */

  function openDataset(id) {
    if (state.current !== id) {
      state.current = id;
      state.ledger = [];
      state.ledgerSeq = 0;
      state.ledgerBase = 0;
      state.ledgerDropped = 0;
      state.ledgerPage = 0;
      state.detail = { id, chain: Promise.resolve(), queued: false };
      for (const j of state.jobWatches) stopWatch('job:' + j);
      state.jobWatches.clear();
    }
    const tab = document.querySelector('.tab[data-view="dataset"]');
    tab.disabled = false;
    tab.textContent = 'Dataset ' + id;
    showView('dataset');
    $('dataset-title').textContent = 'Dataset ' + id;
    $('dataset-title').tabIndex = -1;
    $('dataset-title').focus();
    const d = state.detail;
    watch('dataset', '/v1/datasets/' + encodeURIComponent(id), (ds) => {
      renderFacts(ds);
      scheduleRefresh(d);
    }, (status) => setStatus('Dataset ' + id + ': HTTP ' + status));
  }

  function renderFacts(ds) {
    const sm = summary(ds);
    const dl = $('dataset-facts');
    clear(dl);
    const rows = [['Name', ds.name], ['Accountant', ds.accountant], ['Archived', ds.archived ? 'yes' : 'no'],
                  ['Privacy unit', ds.privacy_unit], ['Budget ε', fmtEps(sm.budget)],
                  ['Spent ε', fmtEps(sm.spent)], ['Reserved ε', fmtEps(sm.reserved)],
                  ['Remaining ε', fmtEps(sm.remaining)], ['Charges', count.format(sm.charges)],
                  ['Created', fmtTime(ds.created_at)], ['Updated', fmtTime(ds.updated_at)]];
    if (sm.deltaSpent > 0) rows.splice(8, 0, ['δ spent / budget', fmtEps(sm.deltaSpent) + ' / ' + fmtEps(sm.deltaBudget)]);
    for (const [k, v] of rows) {
      dl.appendChild(el('dt', k));
      dl.appendChild(el('dd', v, k === 'Remaining ε' && isLow(sm) ? 'low' : null));
    }
    state.accountant = ds.accountant;
    state.budget = sm.budget;
  }

  /* Runs refreshDetail for opening `d`, one refresh at a time: two at once
   * would both read the ledger after the same seq and add its entries
   * twice.  A change while one runs queues a single one more. */
  function scheduleRefresh(d) {
    if (d.queued) return;
    d.queued = true;
    d.chain = d.chain.then(() => {
      d.queued = false;
      return d === state.detail ? refreshDetail(d) : undefined;
    });
  }

  async function refreshDetail(d) {
    const base = '/v1/datasets/' + encodeURIComponent(d.id);
    try {
      if (!await loadLedger(base, d)) return;
      renderLedger();
      renderChart();
      const [res, jobs, pate] = await Promise.all([
        getAll(base + '/reservations?limit=' + RESERVATION_FETCH, 'reservations')
          .catch(() => []),
        getJson(base + '/jobs').catch(() => ({ jobs: [] })),
        getJson(base + '/pate/sessions').catch(() => ({ sessions: [] })),
      ]);
      if (d !== state.detail) return;
      renderReservations(res);
      renderJobs(jobs.jobs || [], d);
      renderPate(pate.sessions || []);
    } catch (e) {
      setStatus(String(e.message || e));
    }
  }

  /* Every item of a paged list (`path` with its limit), page after page. */
  async function getAll(path, field) {
    const all = [];
    let after = 0;
    for (;;) {
      const page = await getJson(path + '&after=' + after);
      for (const item of page[field] || []) all.push(item);
      if (page.next === null || page.next === undefined) return all;
      after = page.next;
    }
  }

  /* Drops the oldest entries of `list` past LEDGER_MAX; answers the ε of
   * the charges and commits dropped, so that the chart still ends at the
   * ledger's total. */
  function trimLedger(list) {
    let eps = 0;
    if (list.length <= LEDGER_MAX) return 0;
    for (const e of list.splice(0, list.length - LEDGER_MAX)) eps += spentEps(e);
    return eps;
  }

  /* The ledger is append-only: only entries after the last seen are read,
   * to the end, into a copy that replaces the page's only if `d` is still
   * the open dataset's (answers false otherwise). */
  async function loadLedger(base, d) {
    const list = state.ledger.slice();
    let seq = state.ledgerSeq, dropped = 0, read = 0;
    for (;;) {
      const page = await getJson(base + '/ledger?limit=' + LEDGER_FETCH + '&after=' + seq);
      if (d !== state.detail) return false;
      const entries = page.entries || [];
      for (const e of entries) list.push(e);
      read += entries.length;
      if (entries.length) seq = entries[entries.length - 1].seq;
      dropped += trimLedger(list);
      if (page.next === null || page.next === undefined || !entries.length) break;
    }
    state.ledgerDropped += state.ledger.length + read - list.length;
    state.ledger = list;
    state.ledgerSeq = seq;
    state.ledgerBase += dropped;
    return true;
  }

  /* The ε an entry adds to the spent: a charge's or a commit's. */
  function spentEps(e) {
    return (e.kind === 'charge' || e.kind === 'commit') && typeof e.epsilon === 'number' ?
      e.epsilon : 0;
  }

  /* Spent ε as the ledger's charges and commits add it up: the spent ε of
   * the basic accountant, an upper bound for the others (their composition
   * is tighter than a sum).  It starts from the entries no longer kept. */
  function cumulative() {
    let sum = state.ledgerBase;
    const pts = [];
    for (const e of state.ledger) {
      if ((e.kind === 'charge' || e.kind === 'commit') && typeof e.epsilon === 'number') {
        sum += e.epsilon;
        pts.push({ x: new Date(e.created_at).getTime(), y: sum, seq: e.seq, kind: e.kind });
      }
    }
    return pts;
  }

  function renderChart() {
    const pts = cumulative();
    $('chart-help').textContent = state.accountant === 'basic' ?
      'The sum of the ledger\u2019s charges and commits: the spent ε of the basic accountant.' :
      'The sum of the ledger\u2019s charges and commits: an upper bound on what the ' +
      (state.accountant || '') + ' accountant counts as spent.';
    if (!window.Chart) {
      $('chart-box').hidden = true;
      const t = $('chart-table');
      t.hidden = false;
      const tb = t.tBodies[0];
      clear(tb);
      for (const p of pts.slice(-50).reverse()) {
        const tr = el('tr');
        cell(tr, fmtTime(p.x));
        cell(tr, '#' + p.seq + ' ' + p.kind);
        cell(tr, fmtEps(p.y), 'num');
        tb.appendChild(tr);
      }
      return;
    }
    const data = {
      datasets: [
        { label: 'cumulative ε', data: pts, stepped: true, borderColor: '#3b6fb6',
          backgroundColor: 'rgba(59,111,182,.15)', fill: true, pointRadius: pts.length > 200 ? 0 : 2 },
        { label: 'budget ε', data: pts.length ? [{ x: pts[0].x, y: state.budget },
                                                  { x: pts[pts.length - 1].x, y: state.budget }] : [],
          borderColor: '#c62828', borderDash: [6, 4], pointRadius: 0 },
      ],
    };
    if (state.chart) {
      state.chart.data = data;
      state.chart.update('none');
      return;
    }
    state.chart = new window.Chart($('chart'), {
      type: 'line',
      data,
      options: {
        animation: false, responsive: true, maintainAspectRatio: false, parsing: true,
        scales: {
          x: { type: 'linear', ticks: { maxTicksLimit: 6, callback: (v) => new Date(v).toLocaleString() } },
          y: { beginAtZero: true, ticks: { callback: (v) => fmtEps(v) } },
        },
        plugins: { tooltip: { callbacks: {
          title: (items) => fmtTime(items[0].parsed.x),
          label: (item) => item.dataset.label + ': ' + fmtEps(item.parsed.y),
        } } },
      },
    });
  }

  function renderLedger() {
    const tb = $('ledger').tBodies[0];
    clear(tb);
    const newest = state.ledger.slice().reverse();
    const pages = Math.max(1, Math.ceil(newest.length / LEDGER_PAGE));
    state.ledgerPage = Math.min(state.ledgerPage, pages - 1);
    for (const e of newest.slice(state.ledgerPage * LEDGER_PAGE, (state.ledgerPage + 1) * LEDGER_PAGE)) {
      const tr = el('tr');
      cell(tr, e.seq, 'num');
      cell(tr, fmtTime(e.created_at));
      cell(tr, e.kind);
      cell(tr, fmtEps(e.epsilon), 'num');
      cell(tr, fmtEps(e.delta), 'num');
      cell(tr, e.note || '');
      cell(tr, e.actor || '', 'id');
      tb.appendChild(tr);
    }
    $('ledger-page').textContent = 'page ' + (state.ledgerPage + 1) + ' of ' + pages +
      (state.ledgerDropped ? ' (the newest ' + count.format(newest.length) + ' of ' +
       count.format(newest.length + state.ledgerDropped) + ' entries)' :
       ' (' + count.format(newest.length) + ' entries)');
    $('ledger-prev').disabled = state.ledgerPage === 0;
    $('ledger-next').disabled = state.ledgerPage >= pages - 1;
  }

  function renderReservations(list) {
    renderRows('reservations', list, (tr, r) => {
      cell(tr, r.id, 'id');
      cell(tr, r.state);
      cell(tr, fmtEps(r.epsilon), 'num');
      cell(tr, fmtTime(r.created_at));
      cell(tr, fmtTime(r.expires_at));
    });
  }

  function fillJobRow(tr, j) {
    clear(tr);
    const p = j.progress || {};
    cell(tr, j.id, 'id');
    cell(tr, j.trainer || '');
    cell(tr, j.state);
    const td = el('td');
    if (p.steps_total) {
      const bar = el('progress');
      bar.max = p.steps_total;
      bar.value = p.step || 0;
      td.appendChild(bar);
      td.appendChild(el('span', ' epoch ' + (p.epoch || 0) + '/' + (p.epochs || '?') + ' · step ' +
                        count.format(p.step || 0) + '/' + count.format(p.steps_total)));
    } else {
      td.textContent = '–';
    }
    tr.appendChild(td);
    const e = p.epsilon || {};
    cell(tr, fmtEps(typeof e.ledger === 'number' ? e.ledger : e.rdp), 'num');
    cell(tr, j.result && typeof j.result === 'object' ? scalars(j.result) : (j.error || ''));
  }

  function isLive(j) { return j.state === 'running' || j.state === 'queued'; }

  /* Job `job`'s row in the jobs table as it is now, filled again. */
  function refillJob(job) {
    const row = [...$('jobs').tBodies[0].rows].find((r) => r.dataset.job === job.id);
    if (row) fillJobRow(row, job);
  }

  /* The dataset's jobs list says only id, state and time: a running job's
   * row is filled by its long-poll, a finished one's by one read of
   * GET /v1/jobs/{id}, kept since a finished job no longer changes. */
  function renderJobs(list, d) {
    renderRows('jobs', list, (tr, j) => {
      tr.dataset.job = j.id;
      const known = state.finishedJobs.get(j.id);
      fillJobRow(tr, known || j);
    });
    for (const j of list) {
      if (isLive(j) && !state.jobWatches.has(j.id) && state.jobWatches.size < MAX_JOB_WATCHES) {
        state.jobWatches.add(j.id);
        watch('job:' + j.id, '/v1/jobs/' + encodeURIComponent(j.id), (job) => {
          refillJob(job);
          if (!isLive(job)) {
            state.finishedJobs.set(job.id, job);
            stopWatch('job:' + job.id);
            state.jobWatches.delete(job.id);
          }
        });
      } else if (!isLive(j) && !state.finishedJobs.has(j.id) && !state.jobReads.has(j.id)) {
        state.jobReads.add(j.id);
        getJson('/v1/jobs/' + encodeURIComponent(j.id)).then((job) => {
          if (!isLive(job)) state.finishedJobs.set(job.id, job);
          if (d === state.detail) refillJob(job);
        }).catch(() => {}).finally(() => state.jobReads.delete(j.id));
      }
    }
  }

  function renderPate(list) {
    renderRows('pate', list, (tr, s) => {
      cell(tr, typeof s === 'string' ? s : s.id, 'id');
      cell(tr, typeof s === 'object' ? scalars(s, 'id') : '');
    });
  }

  /* ---- keys (admins) ------------------------------------------------------------ */

  async function probeKeys() {
    const r = await api('/v1/keys').catch(() => null);
    document.querySelector('.tab[data-view="keys"]').hidden = !(r && r.ok);
  }
  async function loadKeys() {
    const body = await getJson('/v1/keys').catch(() => ({ keys: [] }));
    renderRows('keys', body.keys || [], (tr, k) => {
      cell(tr, k.id, 'id');
      cell(tr, k.role);
      cell(tr, (k.datasets || []).length ? k.datasets.join(', ') : 'all');
      cell(tr, fmtTime(k.created_at));
      cell(tr, k.revoked ? 'yes' : 'no');
    });
  }

  /* ---- wiring --------------------------------------------------------------------- */

  document.addEventListener('DOMContentLoaded', () => {
    $('signin-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      signIn($('key').value.trim());
    });
    $('signout').addEventListener('click', () => signOut('Signed out.'));
    for (const b of document.querySelectorAll('.tab'))
      b.addEventListener('click', () => showView(b.dataset.view));
    $('show-archived').addEventListener('change', watchDatasets);
    $('ledger-prev').addEventListener('click', () => { state.ledgerPage--; renderLedger(); });
    $('ledger-next').addEventListener('click', () => { state.ledgerPage++; renderLedger(); });
    if (key) signIn(key); else $('key').focus();
  });
})();

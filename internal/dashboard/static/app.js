// gpunet dashboard: a single page over the node's JSON API. No framework,
// no build step: the node embeds this file as it is. Pages are hash routes
// (#/providers, #/job/7); /v1/stream (server-sent events) keeps the open
// page current without reloading.
'use strict';

(() => {
  const T = window.gpunetText; // text.js: the page's words and figures
  const app = document.getElementById('app');
  const STATES = ['queued', 'assigned', 'running', 'verifying', 'succeeded', 'failed', 'cancelled'];
  const COLORS = ['#1f6feb', '#1a7f37', '#cf222e', '#9a6700', '#8250df', '#bf3989', '#0a7ea4', '#57606a'];

  // ---------------------------------------------------------------- DOM

  // h builds an element: h('a', {href: '#/'}, 'text', child…). Strings
  // become text nodes, so data is never parsed as HTML.
  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    setAttrs(el, attrs);
    append(el, kids);
    return el;
  }
  const SVGNS = 'http://www.w3.org/2000/svg';
  function s(tag, attrs, ...kids) {
    const el = document.createElementNS(SVGNS, tag);
    setAttrs(el, attrs);
    append(el, kids);
    return el;
  }
  function setAttrs(el, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else if (k === 'text') el.textContent = v;
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  function append(el, kids) {
    for (const k of kids.flat(Infinity)) {
      if (k === undefined || k === null || k === false) continue;
      el.append(k instanceof Node ? k : document.createTextNode(String(k)));
    }
  }
  function replace(el, ...kids) {
    el.replaceChildren();
    append(el, kids);
  }

  // ---------------------------------------------------------------- API

  class APIError extends Error {
    constructor(status, body) {
      super(body && body.message ? body.message : 'HTTP ' + status);
      this.status = status;
      this.code = body && body.code;
    }
  }

  async function api(path, opts) {
    const resp = await fetch(path, opts);
    const text = await resp.text();
    let body = null;
    try { body = text ? JSON.parse(text) : null; } catch (e) { body = {message: text}; }
    if (!resp.ok) throw new APIError(resp.status, body);
    return body;
  }

  function qs(params) {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') p.set(k, v);
    const str = p.toString();
    return str ? '?' + str : '';
  }

  // ---------------------------------------------------------------- formats

  function fmtSync(usync) {
    if (usync === undefined || usync === null) return '–';
    const v = Number(usync) / 1e6;
    return v.toLocaleString(undefined, {maximumFractionDigits: 6}) + ' SYNC';
  }
  function fmtNum(v, digits) {
    if (v === undefined || v === null || Number.isNaN(v)) return '–';
    return Number(v).toLocaleString(undefined, {maximumFractionDigits: digits === undefined ? 2 : digits});
  }
  function fmtPct(v) { return v === undefined || v === null ? '–' : (v * 100).toFixed(1) + ' %'; }
  function fmtTime(t) {
    if (!t) return '–';
    const d = typeof t === 'number' ? new Date(t * 1000) : new Date(t);
    if (Number.isNaN(d.getTime()) || d.getTime() <= 0) return '–';
    return d.toLocaleString();
  }
  function fmtBytes(b) {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (b >= 1024 && i < units.length - 1) { b /= 1024; i++; }
    return fmtNum(b, 1) + ' ' + units[i];
  }
  function short(a) { return a && a.length > 16 ? a.slice(0, 10) + '…' + a.slice(-6) : (a || ''); }
  // addrLink links an account (or a provider's page): by its name where
  // the page knows one (labels), else by its short address; the full
  // address is the link's title. A provider's link is followed by the
  // label it set on the ledger, if the page knows it (provLabels), in
  // quotes: beside the address, never instead of it.
  function addrLink(a, provider) {
    if (!a) return '–';
    const name = labels.name(a);
    const link = h('a', {href: (provider ? '#/provider/' : '#/account/') + a, class: name ? 'named' : 'mono', title: a, 'data-address': a}, name || short(a));
    return provider ? h('span', {class: 'who', 'data-who': a}, link, provLabel(a)) : link;
  }

  // Labels providers set on the ledger (ProviderInfo.label), by address,
  // as the provider lists the pages load carry them (and the first page
  // of providers, loaded once at start): never a request per address.
  // A label is the provider's own claim, and any provider may take any:
  // it is drawn as text, in quotes, always beside the address.
  const provLabels = {};
  function provLabel(a) {
    const l = provLabels[a];
    return l ? h('bdi', {class: 'plabel', title: T.LABEL_TITLE}, T.labelText(l)) : null;
  }
  // learnLabels records the labels of list ({address, label}…) and
  // redraws the labels of the provider links on the page.
  function learnLabels(list) {
    T.providerLabels(provLabels, list);
    for (const w of app.querySelectorAll('span.who[data-who]')) {
      const old = w.querySelector(':scope > .plabel');
      if (old) old.remove();
      const l = provLabel(w.getAttribute('data-who'));
      if (l) w.append(l);
    }
  }
  function jobLink(id) { return h('a', {href: '#/job/' + id}, '#' + id); }
  function stateBadge(st) { return h('span', {class: 'state ' + st}, st); }
  function errorBox(err) { return h('div', {class: 'error'}, err.message || String(err)); }

  // cmdBox shows a shell command with a button that copies it.
  function cmdBox(cmd, id) {
    const code = h('code', {class: 'mono', id}, cmd);
    const btn = h('button', {type: 'button', class: 'copy', title: 'copy the command'}, 'Copy');
    btn.addEventListener('click', async () => {
      try {
        await navigator.clipboard.writeText(code.textContent);
        replace(btn, 'Copied');
      } catch (e) {
        // No clipboard (an insecure origin): select the text to copy by hand.
        const r = document.createRange();
        r.selectNodeContents(code);
        const sel = window.getSelection();
        sel.removeAllRanges();
        sel.addRange(r);
        replace(btn, 'Selected');
      }
      setTimeout(() => replace(btn, 'Copy'), 1500);
    });
    return h('div', {class: 'cmd'}, code, btn);
  }

  // The API token of this node, kept for the tab's session (the submit
  // page and the job log use it).
  const token = {
    get() { return sessionStorage.getItem('gpunet-token') || ''; },
    set(v) { sessionStorage.setItem('gpunet-token', v.trim()); labels.load(); },
    clear() { sessionStorage.removeItem('gpunet-token'); },
    headers() { return {Authorization: 'Bearer ' + this.get()}; },
  };

  // Names for addresses. The ledger keeps none (a provider's label, which
  // it sets itself, is shown beside its address: provLabels), so the
  // page uses what it has: the names of the node's keyring
  // (with its API token: a devnet's alice, bob, provider-N) and the
  // labels given in this browser on an account's page (localStorage),
  // which win. mine is the account this browser calls its own (the
  // Account link).
  const labels = {
    keys: [],
    local() {
      try { return JSON.parse(localStorage.getItem('gpunet-labels') || '{}') || {}; } catch (e) { return {}; }
    },
    name(a) { return T.labels(this.keys, this.local())[a] || ''; },
    set(a, label) {
      const m = this.local();
      if (label) m[a] = label; else delete m[a];
      localStorage.setItem('gpunet-labels', JSON.stringify(m));
    },
    mine() { return localStorage.getItem('gpunet-mine') || ''; },
    setMine(a) { if (a) localStorage.setItem('gpunet-mine', a); else localStorage.removeItem('gpunet-mine'); },
    // load reads the node's keyring names once a token is known.
    async load() {
      if (!token.get()) return;
      try { this.keys = (await api('/v1/dashboard/keys', {headers: token.headers()})).keys || []; } catch (e) { /* without a valid token: no names */ }
    },
  };

  const OUTCOMES = T.OUTCOMES;
  // Event types that slash a provider, and the routine liveness rows a
  // provider's history holds many of.
  const SLASH_EVENTS = new Set(['job_replica_slashed', 'hw_challenge_failed']);
  const ROUTINE_EVENTS = new Set(['liveness_challenge', 'liveness_answered']);
  // The ledger's message types (TestTxTypesListed holds this to the
  // ledger's list) and the event types worth finding a block by.
  const TX_TYPES = ['send', 'register_provider', 'update_provider', 'set_provider_status', 'stake', 'unstake', 'liveness_proof',
    'submit_job', 'grant_key', 'start_job', 'commit_result', 'cancel_job', 'reveal_result', 'challenge_commit', 'challenge_open',
    'request_key_handover', 'hand_over_key', 'dispute_key_handover', 'create_validator', 'unjail', 'validator_bond', 'validator_unbond',
    'release_job', 'commit_checkpoint', 'submit_proposal', 'deposit', 'vote', 'claim_rewards',
    'deploy_service', 'top_up_service', 'scale_service', 'stop_service', 'set_service_access', 'service_heartbeat', 'release_replica',
    'evict_replica', 'delegate', 'undelegate', 'redelegate', 'set_commission', 'request_attestation', 'attest',
    'commit_judgment', 'reveal_judgment', 'service_dispute', 'attest_served', 'report_replica_down', 'gang_member'];
  const BLOCK_EVENTS = ['job_replica_slashed', 'hw_challenge_failed', 'job_submitted', 'job_assigned', 'job_audit', 'job_escalated',
    'job_succeeded', 'job_failed', 'job_cancelled', 'liveness_missed', 'provider_registered', 'provider_status', 'hw_challenge',
    'hw_challenge_late', 'hw_challenge_missed', 'hw_challenge_busy', 'service_deployed', 'service_replica_ended', 'service_budget_low', 'service_stopped'];

  // hwSummary says how hardware challenges ruled on a provider: only
  // failed ones were slashed; a late proof measured the device.
  function hwSummary(c) {
    return (c.passed || 0) + ' challenge(s) passed, ' + (c.late || 0) + ' late (measured, not slashed), ' +
      (c.missed || 0) + ' missed' + (c.misses_in_a_row ? ' (' + c.misses_in_a_row + ' in a row)' : '') + ', ' + (c.failed || 0) + ' failed (slashed)' +
      (c.busy ? ', ' + c.busy + ' busy (a GPU job held the GPU: not a miss)' : '');
  }

  // ---------------------------------------------------------------- charts

  // lineChart draws series [{name, points: [[x, y]…]}] as an SVG line
  // chart with a y axis from 0 (or the data's minimum when negative) to
  // the data's maximum, and a legend with each series' last value
  // (written by opts.lfmt, default the axis's opts.yfmt). The x axis
  // counts opts.xname (default 'block').
  function lineChart(series, opts) {
    opts = opts || {};
    const W = 600, H = opts.height || 170, L = 52, R = 10, T = 10, B = 24;
    let xs = [], ys = [];
    for (const se of series) for (const [x, y] of se.points) { xs.push(x); ys.push(y); }
    const root = h('div', {class: 'chart'});
    if (xs.length === 0) {
      append(root, [h('p', {class: 'muted'}, 'No samples yet: the chart fills as blocks arrive.')]);
      return root;
    }
    const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1);
    const y0 = Math.min(0, ...ys);
    let y1 = niceCeil(Math.max(...ys, opts.ymax || 0, opts.integer ? 2 : 0) - y0) + y0;
    if (opts.integer) y1 = y0 + Math.ceil((y1 - y0) / 2) * 2;
    if (y1 <= y0) y1 = y0 + 1;
    const px = x => L + (x - x0) / (x1 - x0) * (W - L - R);
    const py = y => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
    const yfmt = opts.yfmt || (v => fmtNum(v));
    const svg = s('svg', {viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': opts.title || 'chart'});
    for (const f of [0, 0.5, 1]) {
      const v = y0 + f * (y1 - y0), y = py(v);
      svg.append(s('line', {x1: L, x2: W - R, y1: y, y2: y, stroke: '#d0d7de', 'stroke-width': 1}));
      svg.append(s('text', {x: L - 6, y: y + 4, 'text-anchor': 'end', 'font-size': 11, fill: '#656d76', class: 'y-label'}, yfmt(v)));
    }
    const xname = opts.xname || 'block';
    svg.append(s('text', {x: L, y: H - 6, 'font-size': 11, fill: '#656d76', class: 'x-label'}, xname + ' ' + x0));
    svg.append(s('text', {x: W - R, y: H - 6, 'font-size': 11, fill: '#656d76', 'text-anchor': 'end', class: 'x-label'}, xname + ' ' + x1));
    const legend = h('div', {class: 'legend'});
    series.forEach((se, i) => {
      const color = se.color || COLORS[i % COLORS.length];
      if (se.points.length > 0) {
        const d = se.points.map(([x, y], j) => (j ? 'L' : 'M') + px(x).toFixed(1) + ' ' + py(y).toFixed(1)).join(' ');
        svg.append(s('path', {d, fill: 'none', stroke: color, 'stroke-width': 2, 'stroke-linejoin': 'round'}));
      }
      const sw = h('span', {class: 'swatch'});
      sw.style.background = color;
      const last = se.points.length ? se.points[se.points.length - 1][1] : null;
      legend.append(h('span', {}, sw, se.name + (last === null ? '' : ': ' + (opts.lfmt || yfmt)(last))));
    });
    append(root, [svg, legend]);
    return root;
  }

  // niceCeil rounds v up to 1, 2 or 5 times a power of ten (and to an even
  // integer of at least 2 for counts, so the middle tick is whole).
  function niceCeil(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (m * p >= v - 1e-12) return m * p;
    return 10 * p;
  }

  // ---------------------------------------------------------------- live feed

  const live = document.getElementById('live');
  let page = null; // the open page: {onBlock(u), onJob(u)}
  let feed = null;
  function connect() {
    if (!window.EventSource) { replace(live, 'no live updates (browser lacks EventSource)'); return; }
    feed = new EventSource('/v1/stream');
    feed.addEventListener('hello', () => { live.className = 'live on'; replace(live, '● live'); });
    feed.addEventListener('block', ev => {
      const u = JSON.parse(ev.data);
      live.className = 'live on';
      replace(live, '● live · block ' + u.block.height);
      if (page && page.onBlock) page.onBlock(u);
    });
    feed.addEventListener('job', ev => {
      const u = JSON.parse(ev.data);
      if (page && page.onJob) page.onJob(u.job);
    });
    feed.onerror = () => { live.className = 'live off'; replace(live, '○ reconnecting'); };
  }

  // refresher runs load at most once at a time; calls while it runs make
  // it run once more after, at least minGap ms apart.
  function refresher(load, minGap) {
    let running = false, again = false, last = 0;
    const run = async () => {
      if (running) { again = true; return; }
      running = true;
      const wait = (minGap || 0) - (Date.now() - last);
      if (wait > 0) await new Promise(r => setTimeout(r, wait));
      try { await load(); } catch (e) { /* shown by load itself */ }
      last = Date.now();
      running = false;
      if (again) { again = false; run(); }
    };
    return run;
  }

  // ---------------------------------------------------------------- router

  function route() {
    const hash = location.hash.replace(/^#/, '') || '/';
    const [path, query] = hash.split('?');
    const params = new URLSearchParams(query || '');
    const parts = path.split('/').filter(Boolean);
    const pages = {
      '': overviewPage, providers: providersPage, provider: providerPage, jobs: jobsPage, job: jobPage, services: servicesPage, service: servicePage,
      ledger: ledgerPage, block: blockPage, tx: txPage, account: accountPage, me: mePage, submit: submitPage, market: marketPage,
      validators: validatorsPage, validator: validatorPage,
    };
    const fn = pages[parts[0] || ''];
    for (const a of document.querySelectorAll('header nav a')) {
      const nav = a.getAttribute('data-nav');
      a.classList.toggle('active', nav === (parts[0] || 'overview') || (nav === 'providers' && parts[0] === 'provider') || (nav === 'validators' && parts[0] === 'validator') || (nav === 'jobs' && parts[0] === 'job') || (nav === 'services' && parts[0] === 'service') || (nav === 'ledger' && ['block', 'tx'].includes(parts[0])) || (nav === 'me' && parts[0] === 'account'));
    }
    page = null;
    if (!fn) { replace(app, h('h1', {}, 'Not found'), h('p', {}, 'No page ' + hash + '.')); return; }
    replace(app, h('p', {class: 'muted'}, 'Loading…'));
    page = fn(parts.slice(1), params) || null;
  }

  function go(hash) { location.hash = hash; }

  document.getElementById('search').addEventListener('submit', ev => {
    ev.preventDefault();
    const v = document.getElementById('search-input').value.trim();
    if (/^\d+$/.test(v)) go('#/job/' + v);
    else if (/^h?\d+$/i.test(v)) go('#/block/' + v.slice(1));
    else if (/^[0-9a-fA-F]{64}$/.test(v)) go('#/tx/' + v.toUpperCase());
    else if (/^gpu1[0-9a-z]+$/.test(v)) go('#/account/' + v);
    else if (v) go('#/providers?q=' + encodeURIComponent(v));
  });

  // ---------------------------------------------------------------- overview

  function overviewPage() {
    const state = {series: []};
    const cards = h('div', {class: 'cards', id: 'ov-cards'});
    const tables = h('div', {class: 'grid2'});
    const charts = h('div', {class: 'grid2'});
    const err = h('div');
    replace(app, h('h1', {}, 'Network overview'), err, cards, h('h2', {}, 'Over time'), charts, tables);

    const card = (label, value, sub, id) => h('div', {class: 'card'}, h('div', {class: 'label'}, label), h('div', {class: 'value', id}, value), sub ? h('div', {class: 'sub'}, sub) : null);

    function drawCards(st, ov) {
      const latest = ov.latest || {};
      const jobs = ov.jobs || {};
      const active = (jobs.assigned || 0) + (jobs.running || 0) + (jobs.verifying || 0);
      const gpus = (ov.by_class || []).filter(c => c.class !== 'cpu').reduce((n, c) => n + c.units, 0);
      replace(cards,
        card('Height', fmtNum(st.height, 0), 'last block ' + fmtTime(st.latest_block_time), 'ov-height'),
        card('Block time', latest.block_interval_s ? fmtNum(latest.block_interval_s, 2) + ' s' : '–', 'average of the last blocks'),
        card('Validators', fmtNum((st.validators || []).length, 0), (st.peers || 0) + ' peer(s) of this node'),
        card('Providers online', fmtNum(ov.providers_online, 0), 'of ' + fmtNum(ov.providers, 0) + ' registered', 'ov-online'),
        card('GPUs online', fmtNum(gpus, 0), (ov.by_class || []).length + ' hardware class(es)'),
        card('Utilisation', fmtPct(latest.utilization), latest.slots ? latest.busy_slots + ' of ' + latest.slots + ' job slots busy' : 'no job slots online'),
        card('Jobs active', fmtNum(active, 0), fmtNum(jobs.queued || 0, 0) + ' queued', 'ov-active'),
        card('Jobs done', fmtNum((jobs.succeeded || 0), 0), fmtNum(jobs.failed || 0, 0) + ' failed · ' + fmtNum(jobs.cancelled || 0, 0) + ' cancelled', 'ov-done'),
        card('Tx/s', fmtNum(latest.tx_per_s, 1), 'mempool ' + fmtNum(latest.mempool || 0, 0)),
      );
      const byClass = h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Hardware class'), h('th', {class: 'num'}, 'Providers'), h('th', {class: 'num'}, 'Units online'), h('th', {class: 'num'}, 'Median SYNC/h'))),
        h('tbody', {}, (ov.by_class || []).map(c => h('tr', {}, h('td', {}, h('a', {href: '#/providers?q=' + encodeURIComponent('gpu=' + c.class) + '&sort=price'}, c.class)),
          h('td', {class: 'num'}, fmtNum(c.providers, 0)), h('td', {class: 'num'}, fmtNum(c.units, 0) + (c.class === 'cpu' ? ' cores' : ' GPUs')), h('td', {class: 'num'}, fmtNum(c.median_price, 4))))));
      const byRegion = h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Region'), h('th', {class: 'num'}, 'Providers online'), h('th', {class: 'num'}, 'GPUs'))),
        h('tbody', {}, (ov.by_region || []).map(r => h('tr', {}, h('td', {}, h('a', {href: '#/providers?q=' + encodeURIComponent('region=' + r.region)}, r.region || '–')),
          h('td', {class: 'num'}, fmtNum(r.providers, 0)), h('td', {class: 'num'}, fmtNum(r.gpus, 0))))));
      const jobsTable = h('table', {}, h('tbody', {}, STATES.map(st => h('tr', {}, h('td', {}, h('a', {href: '#/jobs?state=' + st}, stateBadge(st))), h('td', {class: 'num', id: 'ov-jobs-' + st}, fmtNum(jobs[st] || 0, 0))))));
      replace(tables,
        h('div', {class: 'panel'}, h('h2', {}, 'GPUs by model'), (ov.by_class || []).length ? byClass : h('p', {class: 'muted'}, 'No provider online.')),
        h('div', {class: 'panel'}, h('h2', {}, 'By region'), (ov.by_region || []).length ? byRegion : h('p', {class: 'muted'}, 'No provider online.')),
        h('div', {class: 'panel'}, h('h2', {}, 'Jobs by state'), jobsTable));
    }

    function drawCharts() {
      const ss = state.series;
      const pts = f => ss.map(x => [x.height, f(x)]);
      const classes = [...new Set(ss.flatMap(x => Object.keys(x.median_price || {})))].sort();
      replace(charts,
        h('div', {class: 'panel'}, h('h2', {}, 'Utilisation'), lineChart([{name: 'busy job slots', points: pts(x => x.utilization)}], {yfmt: fmtPct, ymax: 1, title: 'utilisation'})),
        h('div', {class: 'panel'}, h('h2', {}, 'Median price by class (SYNC/unit·h)'), lineChart(classes.map(c => ({name: c, points: ss.filter(x => x.median_price && c in x.median_price).map(x => [x.height, x.median_price[c]])})), {yfmt: v => fmtNum(v, 4), title: 'prices'})),
        h('div', {class: 'panel'}, h('h2', {}, 'Jobs'), lineChart([
          {name: 'queued', points: pts(x => x.jobs.queued || 0), color: '#9a6700'},
          {name: 'active', points: pts(x => (x.jobs.assigned || 0) + (x.jobs.running || 0) + (x.jobs.verifying || 0)), color: '#1f6feb'},
          {name: 'succeeded', points: pts(x => x.jobs.succeeded || 0), color: '#1a7f37'},
          {name: 'failed', points: pts(x => x.jobs.failed || 0), color: '#cf222e'},
        ], {yfmt: v => fmtNum(v, 0), integer: true, title: 'jobs'})),
        h('div', {class: 'panel'}, h('h2', {}, 'Throughput (tx/s)'), lineChart([{name: 'tx/s', points: pts(x => x.tx_per_s)}], {yfmt: v => fmtNum(v, 1), title: 'tx/s'})),
      );
    }

    const load = async () => {
      try {
        const [st, ov] = await Promise.all([api('/v1/status'), api('/v1/stats/overview')]);
        replace(err);
        if (!ov.ready) append(err, [h('p', {class: 'notice'}, 'The node is still reading the chain state; figures fill in shortly.')]);
        drawCards(st, ov);
      } catch (e) { replace(err, errorBox(e)); }
    };
    (async () => {
      await load();
      try {
        let cursor = '';
        const all = [];
        for (let i = 0; i < 20; i++) {
          const p = await api('/v1/stats/series' + qs({limit: 1000, cursor}));
          all.push(...p.samples);
          if (!p.next_cursor) break;
          cursor = p.next_cursor;
        }
        state.series = all;
      } catch (e) { append(err, [errorBox(e)]); }
      drawCharts();
    })();
    const reload = refresher(load, 500);
    return {
      onBlock(u) {
        if (u.sample) {
          state.series.push(u.sample);
          if (state.series.length > 2000) state.series.shift();
          drawCharts();
        }
        reload();
      },
    };
  }

  // ---------------------------------------------------------------- market

  // marketPage shows each hardware class's price index, utilisation and
  // tier prices, epoch by epoch (GET /v1/market), the epoch's rewards, and
  // each class's price history (its providers' median ask from the node's
  // series, and the tiers' index prices).
  function marketPage(_, params) {
    const only = params.get('class') || '';
    const err = h('div');
    const body = h('div', {id: 'market'});
    replace(app, h('h1', {}, 'Market'), h('p', {class: 'muted'}, 'Per hardware class (a GPU model, or cpu), each epoch: the share of offered capacity that jobs reserved, and the price index it moves (per unit-hour: per GPU, or per core for cpu; a job pays the larger of its provider\'s ask and the index × its tier\'s factor).'), err, body);
    let samples = [];
    // price writes usync per unit-hour in the unit that suits it alone
    // (a legend's exact figure, where the axis shares one unit).
    const price = usync => { const sc = T.priceScale([usync]); return fmtNum(usync / sc.div, sc.div === 1 ? 2 : 6) + ' ' + sc.unit; };
    const load = async () => {
      try {
        const m = await api('/v1/market' + qs({class: only, history: 256}));
        replace(err);
        const classes = m.classes || [];
        const rw = m.rewards || {};
        const idx = c => c.index_micro / 1e6; // usync per unit-hour
        const isc = T.priceScale(classes.flatMap(c => [idx(c), ...(c.history || []).map(e => e.index_micro / 1e6), ...(c.tee ? [idx(c.tee), ...(c.tee.history || []).map(e => e.index_micro / 1e6)] : [])]));
        replace(body,
          h('div', {class: 'cards'},
            h('div', {class: 'card'}, h('div', {class: 'label'}, 'Epoch'), h('div', {class: 'value', id: 'mkt-epoch'}, fmtNum(m.epoch.number, 0)), h('div', {class: 'sub'}, m.epoch_blocks + ' blocks each, target ' + fmtPct(m.target_ppm / 1e6))),
            h('div', {class: 'card'}, h('div', {class: 'label'}, 'Paid this epoch'), h('div', {class: 'value'}, fmtSync(rw.demand && rw.demand.paid)), h('div', {class: 'sub'}, 'fees ' + fmtSync(rw.demand && rw.demand.fees))),
            h('div', {class: 'card'}, h('div', {class: 'label'}, 'Emission so far'), h('div', {class: 'value'}, fmtSync(rw.emission)), h('div', {class: 'sub'}, 'minted ' + fmtSync(rw.minted) + ', burned ' + fmtSync(rw.burned)))),
          classes.length === 0 ? h('p', {class: 'muted'}, 'No class has offers yet.') : h('div', {class: 'panel'}, h('table', {id: 'market-classes'},
            h('thead', {}, h('tr', {}, h('th', {}, 'Class'), h('th', {class: 'num'}, 'Index ' + isc.unit + '/unit·h'), h('th', {class: 'num'}, 'Utilisation'), h('th', {class: 'num wide-only'}, 'Smoothed'), h('th', {class: 'num wide-only'}, 'Reserved / offered'),
              ...(classes[0].prices || []).map(p => h('th', {class: 'num'}, p.tier)))),
            // A class with a TEE market (attested providers, trust: tee
            // work) has a second row: its own index, and in the tier
            // columns what a trust: tee job pays at the index.
            h('tbody', {}, classes.flatMap(c => [c, ...(c.tee ? [Object.assign({}, c.tee, {teeOf: c.class})] : [])]).map(c => h('tr', c.teeOf ? {class: 'tee-market'} : {},
              h('td', {}, c.teeOf ? h('span', {}, '↳ trust: tee', h('span', {class: 'muted'}, ' (attested providers)')) : h('span', {}, h('a', {href: '#/market' + qs({class: c.class})}, c.class), h('span', {class: 'muted'}, ' per ' + T.unitName(c.class)))), h('td', {class: 'num'}, fmtNum(idx(c) / isc.div, isc.digits)),
              h('td', {class: 'num'}, fmtPct(c.utilisation_ppm / 1e6)), h('td', {class: 'num wide-only'}, fmtPct(c.ema_ppm / 1e6)), h('td', {class: 'num wide-only'}, c.reserved_units + ' / ' + c.offered_units),
              ...(c.prices || []).map(p => h('td', {class: 'num'}, fmtSync(p.price_per_hour)))))))),
          h('div', {class: 'grid2'},
            h('div', {class: 'panel', id: 'market-index'}, h('h2', {}, 'Price index (' + isc.unit + '/unit·h)'), lineChart(classes.flatMap(c => [{name: c.class, points: (c.history || []).map(e => [e.epoch, e.index_micro / 1e6 / isc.div])}, ...(c.tee ? [{name: c.class + ' tee', points: (c.tee.history || []).map(e => [e.epoch, e.index_micro / 1e6 / isc.div])}] : [])]), {yfmt: v => fmtNum(v, isc.digits), xname: 'epoch', title: 'index'})),
            h('div', {class: 'panel'}, h('h2', {}, 'Utilisation'), lineChart(classes.flatMap(c => [{name: c.class, points: (c.history || []).map(e => [e.epoch, e.utilisation_ppm / 1e6])}, ...(c.tee ? [{name: c.class + ' tee', points: (c.tee.history || []).map(e => [e.epoch, e.utilisation_ppm / 1e6])}] : [])]), {yfmt: fmtPct, ymax: 1, xname: 'epoch', title: 'utilisation'}))),
          classes.length ? h('div', {class: 'panel', id: 'market-models'}, h('h2', {}, 'Price history by model'),
            h('p', {class: 'muted'}, 'Per unit-hour, by block: the median ask of the online providers of each class (as this node saw it) and each tier\'s index price at the close of each epoch.'),
            h('div', {class: 'models'}, classes.map(c => {
              const series = T.modelHistory(c, samples);
              const sc = T.priceScale(series.flatMap(se => se.points.map(pt => pt[1])));
              const last = series[0].points.length ? series[0].points[series[0].points.length - 1][1] : null;
              return h('div', {class: 'model', 'data-class': c.class},
                h('h3', {}, c.class, h('span', {class: 'muted'}, ' · ' + sc.unit + ' per ' + T.unitName(c.class) + '-hour' + (last === null ? '' : ' · median ask now ' + price(last)))),
                lineChart(series.map(se => ({name: se.name, points: se.points.map(([x, y]) => [x, y / sc.div])})), {yfmt: v => fmtNum(v, sc.digits), lfmt: v => price(v * sc.div), title: c.class + ' prices'}));
            }))) : null);
      } catch (e) { replace(err, errorBox(e)); }
    };
    (async () => {
      try {
        let cursor = '';
        for (let i = 0; i < 5; i++) {
          const p = await api('/v1/stats/series' + qs({limit: 1000, cursor}));
          samples.push(...p.samples);
          if (!p.next_cursor) break;
          cursor = p.next_cursor;
        }
      } catch (e) { append(err, [errorBox(e)]); }
      load();
    })();
    const reload = refresher(load, 2000);
    return {
      onBlock(u) {
        if (u.sample) {
          samples.push(u.sample);
          if (samples.length > 5000) samples = samples.slice(-5000);
        }
        reload();
      },
    };
  }

  // ---------------------------------------------------------------- providers

  const PROVIDER_COLS = [
    ['address', 'Provider'], ['gpu', 'GPU'], ['count', 'Count', 1], ['vram', 'VRAM GiB', 1], ['cpu', 'CPU', 1], ['ram', 'RAM GiB', 1],
    ['region', 'Region'], ['price', 'Price SYNC/h', 1], ['reputation', 'Reputation', 1], ['uptime', 'Uptime', 1], ['tops', 'TOPS', 1],
    ['stake', 'Stake', 1], [null, 'Earned', 1], ['jobs', 'Jobs', 1], ['online', 'Status'],
  ];

  function providersPage(_, params) {
    const q = params.get('q') || '';
    const sort = params.get('sort') || '';
    const all = params.get('all') !== '0';
    const cursor = params.get('cursor') || '';
    const input = h('input', {type: 'text', id: 'offer-query', value: q, placeholder: "offers query, e.g. gpu=RTX_4090 count>=2 price<0.5 region=eu", 'aria-label': 'offers query'});
    const allBox = h('input', {type: 'checkbox', id: 'offer-all', checked: all});
    const apply = () => go('#/providers' + qs({q: input.value.trim(), sort, all: allBox.checked ? '' : '0'}));
    input.addEventListener('keydown', ev => { if (ev.key === 'Enter') apply(); });
    const err = h('div', {id: 'offer-error'});
    const summary = h('p', {class: 'muted', id: 'offer-summary'});
    const body = h('div', {class: 'panel'});
    const pager = h('div', {class: 'pager'});
    replace(app, h('h1', {}, 'Providers'),
      h('div', {class: 'toolbar'}, input, h('button', {class: 'primary', id: 'offer-apply', onclick: apply}, 'Filter'),
        h('label', {}, allBox, ' include offline and under-staked'),
        h('span', {class: 'muted'}, 'Fields: gpu count vram cpu ram disk price region label reputation uptime tops executor stake online jobs; ops < <= = != >= > in notin')),
      err, summary, body, pager);

    function header() {
      const [skey, sdesc] = sort.endsWith('-') ? [sort.slice(0, -1), true] : [sort, false];
      return h('tr', {}, PROVIDER_COLS.map(([field, label, num]) => {
        if (!field) return h('th', {class: num ? 'num' : ''}, label);
        const mark = skey === field ? (sdesc ? ' ▼' : ' ▲') : '';
        const next = skey === field && !sdesc ? field + '-' : field;
        return h('th', {class: 'sortable' + (num ? ' num' : ''), 'data-sort': field, onclick: () => go('#/providers' + qs({q, sort: next, all: all ? '' : '0'}))}, label + mark);
      }));
    }
    function row(o) {
      return h('tr', {'data-address': o.address},
        h('td', {}, addrLink(o.address, true)), h('td', {}, o.gpu), h('td', {class: 'num'}, o.count), h('td', {class: 'num'}, fmtNum(o.vram, 0)),
        h('td', {class: 'num'}, o.cpu), h('td', {class: 'num'}, fmtNum(o.ram, 0)), h('td', {}, o.region),
        h('td', {class: 'num'}, fmtNum(o.price, 4), h('span', {class: 'muted'}, ' per ' + (o.count ? 'GPU' : 'core'))), h('td', {class: 'num'}, fmtNum(o.reputation, 3)), h('td', {class: 'num'}, fmtPct(o.uptime)),
        h('td', {class: 'num'}, fmtNum(o.tops, 3)), h('td', {class: 'num'}, fmtSync(o.stake)), h('td', {class: 'num'}, fmtSync(o.earned)),
        h('td', {class: 'num'}, o.jobs + '/' + o.max_jobs),
        h('td', {}, o.online ? (o.schedulable ? 'online' : 'online, under-staked') : 'offline'));
    }
    const load = async () => {
      try {
        const page = await api('/v1/offers' + qs({q, sort, all: all ? 'true' : '', limit: 50, cursor}));
        learnLabels(page.offers);
        replace(err);
        replace(summary, page.total + ' provider(s) match' + (q ? ' “' + q + '”' : '') + ' at height ' + page.height);
        replace(body, h('table', {id: 'providers-table'}, h('thead', {}, header()), h('tbody', {}, page.offers.map(row))));
        replace(pager,
          cursor ? h('button', {onclick: () => history.back()}, '← previous') : null,
          page.next_cursor ? h('button', {onclick: () => go('#/providers' + qs({q, sort, all: all ? '' : '0', cursor: page.next_cursor}))}, 'next →') : null);
      } catch (e) {
        replace(err, errorBox(e));
        replace(summary);
        replace(body, h('table', {id: 'providers-table'}, h('thead', {}, header()), h('tbody')));
      }
    };
    load();
    const reload = refresher(load, 2000);
    return {onBlock: reload};
  }

  function providerPage([addr], params) {
    const root = h('div');
    const cursor = params.get('history') || '';
    let showRoutine = params.get('liveness') === '1';
    replace(app, root);
    let last = null;
    const draw = () => {
      const [p, jobs, hist, svcs, dl] = last;
      const r = p.record;
      const inv = r.inventory;
      const gpus = (inv.gpus || []);
      const slashes = (r.slash_events || []).slice().reverse();
      const toggle = h('input', {type: 'checkbox', id: 'history-liveness', checked: showRoutine});
      toggle.addEventListener('change', () => { showRoutine = toggle.checked; draw(); });
      replace(root,
        h('h1', {}, 'Provider ', h('span', {class: 'mono'}, addr), provLabel(addr)),
        r.slashed ? h('p', {class: 'error', id: 'provider-slashed'}, 'Slashed ' + fmtSync(r.slashed) + ' in all · ' + r.invalid + ' result(s) outvoted, ' + r.unrevealed + ' not revealed, ' + ((r.challenges || {}).failed || 0) + ' hardware challenge(s) failed') : null,
        h('div', {class: 'grid2'},
          h('div', {class: 'panel'}, h('h2', {}, 'Offer'), h('dl', {class: 'kv'},
            h('dt', {}, 'Status'), h('dd', {id: 'provider-status'}, r.online ? (p.schedulable ? 'online, schedulable' : 'online, under-staked') : 'offline'),
            h('dt', {}, 'Hardware'), h('dd', {}, gpus.length ? gpus.length + ' × ' + p.gpu + ' (' + fmtNum(p.vram, 0) + ' GiB), ' : 'CPU only, ', inv.cpu_cores + ' cores ' + inv.cpu_model + ', ' + fmtBytes(inv.ram) + ' RAM, ' + fmtBytes(inv.disk) + ' disk'),
            h('dt', {}, 'Measured'), h('dd', {}, fmtNum(r.measured.int8_gops / 1000, 3) + ' int8 TOPS, ' + fmtNum(r.measured.bandwidth_mbs / 1000, 1) + ' GB/s memory (' + r.measured.device + ')'),
            h('dt', {}, 'Region'), h('dd', {}, r.region),
            h('dt', {}, 'Label'), h('dd', {id: 'provider-label'}, r.label ? [h('bdi', {}, T.labelText(r.label)), h('span', {class: 'muted'}, ' set by the provider itself; any provider may use any label: the address is what identifies it')] : h('span', {class: 'muted'}, 'none set')),
            h('dt', {}, 'Executors'), h('dd', {}, (r.executors || []).join(', ')),
            h('dt', {}, 'Asks'), h('dd', {}, (r.asks || []).map(a => a.class + ' ' + fmtSync(a.price_per_hour) + '/unit·h').join('; ')),
            h('dt', {}, 'Jobs'), h('dd', {}, r.jobs + ' running of ' + r.max_jobs))),
          h('div', {class: 'panel'}, h('h2', {}, 'Stake and reputation'), h('dl', {class: 'kv'},
            h('dt', {}, 'Stake'), h('dd', {}, fmtSync(r.stake) + ' (required ' + fmtSync(p.required_stake) + ')'),
            h('dt', {}, 'Delegated'), h('dd', {id: 'provider-delegated'}, fmtSync(r.delegated || 0) + ' by ' + countOf(dl) + ' delegator(s), commission ' + fmtPPM(dl.pool.commission_ppm) + (dl.pool.slashed ? ', ' + fmtSync(dl.pool.slashed) + ' slashed' : '')),
            h('dt', {}, 'Unbonding'), h('dd', {}, p.unbonding.length ? p.unbonding.map(u => fmtSync(u.amount) + ' at block ' + u.completion_height).join('; ') : 'none'),
            h('dt', {}, 'Earned'), h('dd', {}, fmtSync(r.earned)),
            h('dt', {}, 'Reputation'), h('dd', {}, fmtNum(r.reputation / 1e6, 3)),
            h('dt', {}, 'Results'), h('dd', {}, r.validated + ' validated, ' + r.invalid + ' outvoted, ' + r.unrevealed + ' not revealed'),
            h('dt', {}, 'Uptime'), h('dd', {}, fmtPct(p.uptime) + ' (' + r.answered + ' challenges answered, ' + r.missed + ' missed, ' + r.missed_in_a_row + ' in a row)'),
            h('dt', {}, 'Hardware'), h('dd', {id: 'provider-hardware'}, hwSummary(r.challenges || {})),
            h('dt', {}, 'TEE'), h('dd', {id: 'provider-tee'}, T.attestationText(p.attestation)),
            h('dt', {}, 'Attested GPUs'), h('dd', {id: 'provider-gpus-attested'}, T.gpuAttestationText(p.attestation && p.attestation.gpus)),
            h('dt', {}, 'Open challenge'), h('dd', {}, p.challenge ? 'issued at block ' + p.challenge.height + ', due by ' + p.challenge.deadline : 'none'),
            h('dt', {}, 'Registered'), h('dd', {}, 'block ' + r.registered_height + ', updated at ' + r.updated_height),
            h('dt', {}, 'Account'), h('dd', {}, addrLink(addr))))),
        h('div', {class: 'panel'}, h('h2', {}, 'Delegations'), delegatorsTable(dl, 'provider-delegations', 'GET /v1/providers/' + addr + '/delegations?cursor=…')),
        h('div', {class: 'panel'}, h('h2', {}, 'Slashes'), slashes.length ? h('table', {id: 'provider-slashes'},
          h('thead', {}, h('tr', {}, h('th', {}, 'Block'), h('th', {class: 'num'}, 'Amount'), h('th', {}, 'Why'))),
          h('tbody', {}, slashes.map(e => h('tr', {class: 'slashed'}, h('td', {}, h('a', {href: '#/block/' + e.height}, e.height)),
            h('td', {class: 'num'}, fmtSync(e.amount)), h('td', {class: 'wrap'}, e.reason))))) :
          h('p', {class: 'muted', id: 'provider-slashes'}, 'Never slashed.'),
          slashes.length >= 16 ? h('p', {class: 'muted'}, 'The ledger keeps a provider’s latest 16 slashes.') : null),
        h('div', {class: 'panel'}, h('h2', {}, 'Running jobs'), jobsTable(jobs.jobs)),
        svcs.services.length ? h('div', {class: 'panel', id: 'provider-services'}, h('h2', {}, 'Services it runs a replica of'), servicesTable(svcs.services)) : null,
        h('div', {class: 'panel'}, h('h2', {}, 'History'),
          h('div', {class: 'toolbar'}, h('label', {}, toggle, ' show each liveness challenge and answer')),
          historyTable(hist.events, showRoutine),
          h('div', {class: 'pager'},
            cursor ? h('button', {onclick: () => history.back()}, '← newer') : null,
            hist.next_cursor ? h('button', {onclick: () => go('#/provider/' + addr + qs({history: hist.next_cursor, liveness: showRoutine ? '1' : ''}))}, 'older →') : null)));
    };
    const load = async () => {
      try {
        last = await Promise.all([
          api('/v1/providers/' + addr), api('/v1/providers/' + addr + '/jobs?limit=100'), api('/v1/providers/' + addr + '/history' + qs({limit: 200, cursor})),
          api('/v1/providers/' + addr + '/services'), api('/v1/providers/' + addr + '/delegations'),
        ]);
        T.providerLabels(provLabels, [{address: addr, label: last[0].record.label}]);
        draw();
      } catch (e) { replace(root, h('h1', {}, 'Provider'), errorBox(e)); }
    };
    load();
    return {onBlock: cursor ? null : refresher(load, 2000)};
  }

  // fmtPPM writes parts per million as a percentage.
  function fmtPPM(v) { return fmtNum((v || 0) / 1e4, 4) + '%'; }

  // targetLink links a delegation's target: a validator (by its
  // operator) or a provider.
  function targetLink(t) {
    if (t.kind === 'validator') return ['validator ', h('a', {href: '#/validator/' + t.address, class: labels.name(t.address) ? 'named' : 'mono', title: t.address}, labels.name(t.address) || short(t.address))];
    return ['provider ', addrLink(t.address, true)];
  }

  // delegationsPanel is an account's delegations, unbonding entries and
  // redelegations (GET /v1/accounts/{addr}/delegations).
  function delegationsPanel(dl) {
    const unb = [], red = [];
    for (const u of dl.unbonding) for (const e of u.entries) unb.push([u.target, e]);
    for (const r of dl.redelegations) for (const e of r.entries) red.push([r, e]);
    if (!dl.delegations.length && !unb.length && !red.length) return h('div', {class: 'panel', id: 'account-delegations'}, h('h2', {}, 'Delegations'), h('p', {class: 'muted'}, 'None: gpunet stake delegate TARGET AMOUNT --from KEY delegates to a validator or a provider.'));
    return h('div', {class: 'panel', id: 'account-delegations'}, h('h2', {}, 'Delegations'),
      dl.delegations.length ? h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'To'), h('th', {class: 'num'}, 'Amount'), h('th', {class: 'num'}, 'Pending rewards'))),
        h('tbody', {}, dl.delegations.map(d => h('tr', {}, h('td', {}, targetLink(d.target)), h('td', {class: 'num'}, fmtSync(d.amount)), h('td', {class: 'num'}, fmtSync(d.pending_rewards)))))) : null,
      unb.length ? h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Unbonding from'), h('th', {class: 'num'}, 'Balance'), h('th', {class: 'num'}, 'Back at block'))),
        h('tbody', {}, unb.map(([t, e]) => h('tr', {}, h('td', {}, targetLink(t)), h('td', {class: 'num'}, fmtSync(e.balance)), h('td', {class: 'num'}, e.completion_height))))) : null,
      red.length ? h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Redelegated from'), h('th', {}, 'To'), h('th', {class: 'num'}, 'Initial'), h('th', {class: 'num'}, 'Slashable for the source until block'))),
        h('tbody', {}, red.map(([r, e]) => h('tr', {}, h('td', {}, targetLink(r.source)), h('td', {}, targetLink(r.destination)), h('td', {class: 'num'}, fmtSync(e.initial)), h('td', {class: 'num'}, e.completion_height))))) : null,
      dl.next_cursor ? h('p', {class: 'muted'}, 'The first page; gpunet query delegations ' + dl.delegator + ' lists them all (the totals above cover all).') : null);
  }

  // countOf is the number of delegators on a target's first page of
  // delegations, with a + when more pages follow (the page is what the
  // API answers at once, never every delegation).
  function countOf(page) {
    return page.delegations.length + (page.next_cursor ? '+' : '');
  }

  // delegatorsTable is a target's first page of delegations, and where to
  // see the rest when there are more.
  function delegatorsTable(page, id, all) {
    const ds = page.delegations;
    if (!ds.length) return h('p', {class: 'muted', id}, 'No delegations.');
    return h('div', {id}, h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Delegator'), h('th', {class: 'num'}, 'Amount'), h('th', {class: 'num'}, 'Shares'))),
      h('tbody', {}, ds.map(d => h('tr', {}, h('td', {}, addrLink(d.delegator)), h('td', {class: 'num'}, fmtSync(d.amount)), h('td', {class: 'num'}, fmtNum(d.shares, 0)))))),
      page.next_cursor ? h('p', {class: 'muted'}, 'The first ' + ds.length + ' delegations; ' + all + ' pages through them all.') : null);
  }

  function validatorsPage() {
    const root = h('div');
    replace(app, root);
    const load = async () => {
      try {
        const l = await api('/v1/validators');
        replace(root, h('h1', {}, 'Validators'),
          !l.managed ? h('p', {class: 'muted'}, 'This chain\'s validator set is fixed at genesis.') :
          h('div', {class: 'panel'}, h('table', {id: 'validators'},
            h('thead', {}, h('tr', {}, h('th', {}, 'Validator'), h('th', {}, 'Operator'), h('th', {}, 'Status'), h('th', {class: 'num'}, 'Power'), h('th', {class: 'num'}, 'Bond'), h('th', {class: 'num'}, 'Delegated'), h('th', {class: 'num'}, 'Missed'))),
            h('tbody', {}, l.validators.map(v => h('tr', {class: v.jailed ? 'slashed' : ''}, h('td', {}, h('a', {href: '#/validator/' + v.operator}, (v.moniker || '').trim() || short(v.address))),
              h('td', {}, addrLink(v.operator)), h('td', {}, v.status), h('td', {class: 'num'}, fmtNum(v.power, 0)), h('td', {class: 'num'}, fmtSync(v.bond)),
              h('td', {class: 'num'}, fmtSync(v.delegated || 0)), h('td', {class: 'num'}, v.missed + '/' + l.window))))),
            h('p', {class: 'muted'}, 'Total power ' + fmtNum(l.total_power, 0) + ' at block ' + l.height + '. Delegate with gpunet stake delegate OPERATOR AMOUNT --from KEY.')));
      } catch (e) { replace(root, h('h1', {}, 'Validators'), errorBox(e)); }
    };
    load();
    return {onBlock: refresher(load, 2000)};
  }

  function validatorPage([addr]) {
    const root = h('div');
    replace(app, root);
    const load = async () => {
      try {
        const v = await api('/v1/validators/' + addr);
        replace(root, h('h1', {}, 'Validator ', h('span', {}, (v.moniker || '').trim()), ' ', h('span', {class: 'mono muted'}, v.address)),
          h('div', {class: 'panel'}, h('dl', {class: 'kv', id: 'validator-info'},
            h('dt', {}, 'Operator'), h('dd', {}, addrLink(v.operator)),
            h('dt', {}, 'Status'), h('dd', {}, v.status + (v.jailed && !v.tombstoned ? ' until block ' + v.jailed_until : '')),
            h('dt', {}, 'Power'), h('dd', {}, fmtNum(v.power, 0)),
            h('dt', {}, 'Bond'), h('dd', {}, fmtSync(v.bond)),
            h('dt', {}, 'Delegated'), h('dd', {id: 'validator-delegated'}, fmtSync(v.delegated || 0) + ' by ' + countOf(v) + ' delegator(s)'),
            h('dt', {}, 'Commission'), h('dd', {}, fmtPPM(v.pool.commission_ppm)),
            h('dt', {}, 'Missed'), h('dd', {}, fmtNum(v.missed, 0) + ' block(s) in the downtime window'),
            h('dt', {}, 'Slashed'), h('dd', {}, fmtSync(v.slashed) + ' of the bond, ' + fmtSync(v.pool.slashed) + ' of its delegations'))),
          h('div', {class: 'panel'}, h('h2', {}, 'Delegations'), delegatorsTable(v, 'validator-delegations', 'gpunet query validator ' + v.operator)));
      } catch (e) { replace(root, h('h1', {}, 'Validator'), errorBox(e)); }
    };
    load();
    return {onBlock: refresher(load, 2000)};
  }

  // historyTable is a provider's events, newest first. Unless showRoutine,
  // each run of liveness challenges and answers is one summary row, so
  // that what matters (slashes, failures, jobs) is not lost among them;
  // slashes are marked.
  function historyTable(events, showRoutine) {
    if (!events.length) return h('p', {class: 'muted'}, 'No events kept by this node.');
    const rows = [];
    let run = null;
    for (const e of events) {
      if (!showRoutine && ROUTINE_EVENTS.has(e.type)) {
        if (!run) { run = {n: 0, hi: e.height, lo: e.height, answered: 0}; rows.push(run); }
        run.n++;
        run.lo = e.height;
        if (e.type === 'liveness_answered') run.answered++;
        continue;
      }
      run = null;
      rows.push(e);
    }
    return h('table', {id: 'provider-history'}, h('thead', {}, h('tr', {}, h('th', {}, 'Block'), h('th', {class: 'wide-only'}, 'Time'), ['Event', 'Job', 'Details'].map(t => h('th', {}, t)))),
      h('tbody', {}, rows.map(e => e.type === undefined ?
        h('tr', {class: 'routine'}, h('td', {}, e.lo === e.hi ? e.lo : e.lo + '–' + e.hi), h('td', {class: 'wide-only'}),
          h('td', {colspan: 3, class: 'muted'}, e.n + ' liveness row(s): ' + (e.n - e.answered) + ' challenge(s), ' + e.answered + ' answer(s)')) :
        h('tr', {class: SLASH_EVENTS.has(e.type) ? 'slashed' : (e.type === 'liveness_missed' ? 'warn' : '')},
          h('td', {}, h('a', {href: '#/block/' + e.height}, e.height)), h('td', {class: 'wide-only'}, fmtTime(e.time)),
          h('td', {}, SLASH_EVENTS.has(e.type) ? h('b', {}, 'slashed: ' + e.type) : e.type),
          h('td', {}, e.job ? jobLink(e.job) : ''),
          h('td', {class: 'muted'}, (e.attrs || []).filter(a => !['job', 'provider', 'providers'].includes(a.key)).map(a => a.key + '=' + a.value).join(' '))))));
  }

  // ---------------------------------------------------------------- jobs

  // providerList lists a job's replicas, one provider per line, each
  // marked with its outcome once the verdict is in.
  function providerList(j) {
    return (j.assignments || []).map((a, i) => {
      const [label, cls] = OUTCOMES[a.outcome] || [];
      return h('span', {class: 'prov' + (a.slashed ? ' slashed' : ''), 'data-provider': a.provider},
        i ? h('span', {class: 'sep'}, ', ') : null, addrLink(a.provider, true),
        label ? h('span', {class: 'mark ' + cls, title: label + (a.slashed ? ', slashed ' + fmtSync(a.slashed) : '')}, cls === 'good' ? ' ✓' : ' ✗') : null);
    });
  }

  function jobsTable(jobs) {
    if (!jobs.length) return h('p', {class: 'muted'}, 'No jobs.');
    return h('table', {class: 'jobs'}, h('thead', {}, h('tr', {}, ['Job', 'Name', 'State', 'Owner', 'Providers', 'Submitted', 'Cost', 'Reason'].map(t => h('th', {}, t)))),
      h('tbody', {}, jobs.map(j => h('tr', {'data-job': j.id},
        h('td', {}, jobLink(j.id)), h('td', {}, j.spec.name), h('td', {class: 'state-cell'}, stateBadge(j.state)), h('td', {}, addrLink(j.owner)),
        h('td', {class: 'providers'}, providerList(j)), h('td', {}, fmtTime(j.submitted_at)),
        h('td', {class: 'num'}, j.state === 'succeeded' || j.state === 'failed' || j.state === 'cancelled' ? fmtSync(j.cost + j.fee) : 'escrow ' + fmtSync(j.escrow)),
        h('td', {class: 'muted reason'}, j.reason || '')))));
  }

  function jobsPage(_, params) {
    const state = params.get('state') || '';
    const owner = params.get('owner') || '';
    const cursor = params.get('cursor') || '';
    const sel = h('select', {id: 'job-state-filter', onchange: () => go('#/jobs' + qs({state: sel.value, owner}))},
      h('option', {value: ''}, 'all states'), STATES.map(st => h('option', {value: st, selected: st === state}, st)));
    const err = h('div');
    const body = h('div', {class: 'panel', id: 'jobs-panel'});
    const pager = h('div', {class: 'pager'});
    replace(app, h('h1', {}, 'Jobs'), h('div', {class: 'toolbar'}, sel, owner ? h('span', {}, 'owner ', addrLink(owner), ' ', h('a', {href: '#/jobs' + qs({state})}, '(all owners)')) : null), err, body, pager);
    const load = async () => {
      try {
        const page = await api('/v1/jobs' + qs({state, owner, cursor, limit: 50}));
        replace(err);
        replace(body, jobsTable(page.jobs));
        replace(pager,
          cursor ? h('button', {onclick: () => history.back()}, '← newer') : null,
          page.next_cursor ? h('button', {onclick: () => go('#/jobs' + qs({state, owner, cursor: page.next_cursor}))}, 'older →') : null);
      } catch (e) { replace(err, errorBox(e)); }
    };
    load();
    const reload = refresher(load, 300);
    return {
      onJob(j) {
        // Show the change at once where the job is listed, then reload.
        const tr = body.querySelector('tr[data-job="' + j.id + '"]');
        if (tr) {
          replace(tr.querySelector('.state-cell'), stateBadge(j.state));
          replace(tr.querySelector('.reason'), j.reason || '');
        }
        if (!cursor) reload();
      },
    };
  }

  // replicaRole names a replica's part: planned by the owner, or an
  // extra one the treasury pays (the audit, then escalations).
  function replicaRole(j, a) {
    if (!a.extra) return 'replica';
    const extras = (j.assignments || []).filter(x => x.extra);
    return j.audit_drawn && extras[0] === a ? 'audit' : 'escalation';
  }

  // replicaVerdict is a replica's line in the verdict, before one exists
  // its progress.
  function replicaVerdict(j, a) {
    const o = OUTCOMES[a.outcome];
    if (o) return h('span', {class: 'verdict ' + o[1]}, o[0]);
    if (a.result && (j.verdict === 'unverified' || j.verdict === 'unchecked')) return h('span', {class: 'verdict good'}, 'accepted');
    if (a.result) return 'revealed';
    if (a.commitment) return 'committed';
    if (a.started_at) return 'running';
    return a.key_grant ? 'key granted' : 'waiting for the key';
  }

  function replicasTable(j) {
    const as = j.assignments || [];
    if (!as.length) return h('p', {class: 'muted'}, 'Not assigned yet.');
    const delivered = j.delivered || '';
    return h('table', {id: 'job-replicas'}, h('thead', {}, h('tr', {}, ['Provider', 'Role', 'Verdict', 'Slashed', 'Result', 'Price', 'Assigned', 'Started', 'Metered', 'Paid'].map(t => h('th', {}, t)))),
      h('tbody', {}, as.map(a => h('tr', {'data-provider': a.provider, class: a.slashed ? 'slashed' : ''},
        h('td', {}, addrLink(a.provider, true), a.provider === delivered ? h('span', {class: 'tag', title: 'the owner gets this replica’s outputs'}, 'delivered') : null),
        h('td', {}, replicaRole(j, a)),
        h('td', {class: 'outcome'}, replicaVerdict(j, a)),
        h('td', {class: 'slash num'}, a.slashed ? fmtSync(a.slashed) : '–'),
        h('td', {}, a.result ? (a.result.failed ? 'failed: ' + a.result.reason : 'exit ' + a.result.exit_code) + ' (block ' + a.result.height + ')' : '–'),
        h('td', {}, fmtSync(a.price_per_hour) + '/h'), h('td', {}, fmtTime(a.assigned_at)), h('td', {}, a.started_at ? fmtTime(a.started_at) : '–'),
        h('td', {class: 'num'}, a.result ? a.result.metered_seconds + ' s' : (a.metered_seconds ? a.metered_seconds + ' s' : '–')), h('td', {class: 'num'}, fmtSync(a.paid))))));
  }

  // checkpointsPanel shows a checkpointing job's committed checkpoints
  // (the one it resumes from marked), why it fell back to an earlier one
  // or refused one (checkpoint_note), and how often it was preempted.
  function checkpointsPanel(j) {
    const sp = j.spec, cs = j.checkpoints || [];
    if (!sp.checkpoint && !cs.length && !j.checkpoint_note && !j.preempted) return null;
    const ck = sp.checkpoint;
    return h('div', {class: 'panel', id: 'job-checkpoints'}, h('h2', {}, 'Checkpoints'),
      h('p', {}, ck ? ['State under ', h('code', {}, ck.path), ', taken every ' + ck.interval_seconds + ' s'] : 'No checkpoint path.',
        j.resume_seq ? ' · resumes from checkpoint ' + j.resume_seq + ' (' + (j.progress_seconds || 0) + ' s of run kept)' : '',
        j.preempted ? ' · preempted ' + j.preempted + '×' : ''),
      j.checkpoint_note ? h('p', {class: 'notice', id: 'job-checkpoint-note'}, j.checkpoint_note) : null,
      cs.length ? h('table', {id: 'job-checkpoints-table'}, h('thead', {}, h('tr', {}, ['Seq', 'Time', 'Size', 'Provider', 'Covered'].map(t => h('th', {}, t)))),
        h('tbody', {}, cs.map(c => h('tr', {'data-seq': c.seq},
          h('td', {class: 'num'}, c.seq, c.seq === j.resume_seq ? h('span', {class: 'tag', title: 'the job resumes from this one'}, 'resume') : null),
          h('td', {}, fmtTime(c.time), ' ', h('a', {href: '#/block/' + c.height}, 'block ' + c.height)),
          h('td', {class: 'num'}, fmtBytes(c.size)),
          h('td', {}, addrLink(c.provider, true)),
          h('td', {class: 'num'}, c.covered_seconds + ' s'))))) : h('p', {class: 'muted'}, 'None committed yet.'));
  }

  function deliveredResult(j) {
    const a = (j.assignments || []).find(x => j.delivered && x.provider === j.delivered);
    return a && a.result;
  }

  // outputsPanel tells how to fetch a job's outputs: they are sealed to
  // the owner's key, so the page gives the command (and the sealed
  // archive), never the plaintext.
  function outputsPanel(j, keyName) {
    const r = deliveredResult(j);
    const from = keyName || 'KEY';
    const kids = [h('h2', {}, 'Outputs')];
    if (!r) {
      kids.push(h('p', {class: 'muted', id: 'job-outputs'}, j.state === 'succeeded' || !['failed', 'cancelled'].includes(j.state) ?
        'The outputs come with the verdict: ' + ((j.spec.outputs || []).join(' ') || 'none declared') + '.' : 'None: the job ' + j.state + ' without a result.'));
      return kids;
    }
    kids.push(h('p', {id: 'job-outputs'}, 'Sealed to the owner’s key (age), so this node cannot show them. Fetch and decrypt them where that key is:'),
      cmdBox('gpunet job get ' + j.id + ' --from ' + from + ' --out job-' + j.id, 'job-get-cmd'),
      h('dl', {class: 'kv'},
        h('dt', {}, 'Paths'), h('dd', {class: 'mono'}, (j.spec.outputs || []).join(' ')),
        h('dt', {}, 'Sealed archive'), h('dd', {}, h('a', {href: '/v1/blobs/' + r.output_blob, class: 'mono', id: 'job-output-blob', download: 'job-' + j.id + '-outputs.age'}, short(r.output_blob))),
        h('dt', {}, 'Manifest hash'), h('dd', {class: 'mono'}, r.manifest_hash)));
    if (!keyName) kids.push(h('p', {class: 'muted'}, 'KEY is the name of the owner’s key (', addrLink(j.owner), ') in your keyring.'));
    return kids;
  }

  // jobLog follows a job's log on its page: with the node's API token,
  // decrypted with the owner's key from the node's keyring (live while the
  // job runs, the result's whole log after); without it, what the relay
  // holds and the command that prints the log.
  function jobLog(id, onKey) {
    const st = {next: 0, text: '', final: false, stop: false, key: '', busy: false};
    const pre = h('pre', {class: 'log', id: 'job-log'});
    const note = h('p', {class: 'muted', id: 'job-log-note'});
    const cmd = h('div');
    const form = h('div');
    const panel = h('div', {class: 'panel', id: 'job-log-panel'}, h('h2', {}, 'Log'), note, pre, form, cmd);
    const showCmd = () => replace(cmd, h('p', {class: 'muted'}, 'In a terminal, where the owner’s key is (live while it runs):'),
      cmdBox('gpunet job logs ' + id + ' --from ' + (st.key || 'KEY'), 'job-logs-cmd'));
    showCmd();
    const askToken = why => {
      const input = h('input', {type: 'password', id: 'log-token', placeholder: 'the api_token of this node’s config', 'aria-label': 'API token'});
      const show = () => { token.set(input.value); st.stop = false; replace(form); load(true); };
      input.addEventListener('keydown', ev => { if (ev.key === 'Enter') show(); });
      replace(form, h('p', {}, why), h('div', {class: 'toolbar'}, input, h('button', {type: 'button', id: 'log-show', onclick: show}, 'Show the log')));
    };
    // relayed says, without the token, what the live relay holds.
    const relayed = async () => {
      try {
        const p = await api('/v1/jobs/' + id + '/logs' + qs({limit: 512}));
        const provs = [...new Set(p.chunks.map(c => c.provider))];
        replace(note, p.chunks.length ? p.chunks.length + ' sealed chunk(s) of live log relayed by ' : 'The node’s live relay holds no chunk of this job’s log', provs.map((a, i) => [i ? ', ' : '', addrLink(a, true)]),
          p.dropped ? ' (' + p.dropped + ' older dropped)' : '', '.');
      } catch (e) { replace(note, errorBox(e)); }
    };
    const load = async force => {
      if (st.busy || (st.final && !force) || st.stop) return;
      if (!token.get()) {
        st.stop = true;
        askToken('The log is sealed to the job’s owner. With this node’s API token the node decrypts it here when the owner’s key is in its keyring.');
        relayed();
        return;
      }
      st.busy = true;
      try {
        const l = await api('/v1/dashboard/jobs/' + id + '/log' + qs({from: st.next}), {headers: token.headers()});
        if (l.key !== st.key) { st.key = l.key; showCmd(); onKey(l.key); }
        if (l.source === 'result') { st.text = l.text; st.final = true; } else { st.text += l.text; st.next = l.next; st.final = l.final; }
        pre.textContent = st.text;
        replace(note, l.source === 'result' ? 'The whole log, from the delivered result' : (l.final ? 'What the live relay held (the job ended without a result)' : 'Live, as the provider relays it'),
          ', decrypted with ', h('b', {}, l.key), ' of this node’s keyring', l.truncated ? ' (its last MiB)' : '', st.text ? '.' : ': nothing yet.');
      } catch (e) {
        st.stop = true;
        if (e.status === 401) { token.clear(); askToken('The token was refused: ' + e.message); } else replace(note, errorBox(e));
      } finally { st.busy = false; }
    };
    return {panel, load};
  }

  function jobPage([id]) {
    const top = h('div'), outputs = h('div', {class: 'panel'}), spec = h('div');
    let keyName = '';
    let job = null;
    const log = jobLog(id, k => { keyName = k; if (job) replace(outputs, outputsPanel(job, keyName)); });
    replace(app, top, h('div', {class: 'grid2'}, outputs, log.panel), spec);
    let done = false;
    const load = async () => {
      try {
        const [j, tl] = await Promise.all([api('/v1/jobs/' + id), api('/v1/jobs/' + id + '/timeline')]);
        job = j;
        done = ['succeeded', 'failed', 'cancelled'].includes(j.state);
        const sp = j.spec;
        const timeline = h('ul', {class: 'timeline', id: 'job-timeline'}, tl.steps.map(st => h('li', {class: st.what === 'failed' || /^failed/.test(st.detail || '') ? 'bad' : (st.what === 'succeeded' ? 'good' : '')},
          h('b', {}, st.what), st.provider ? [' on ', addrLink(st.provider, true)] : null, st.detail ? ' — ' + st.detail : null,
          h('span', {class: 'when'}, st.height ? 'block ' + st.height + ' ' : '', st.time && !st.time.startsWith('1970') && !st.time.startsWith('0001') ? fmtTime(st.time) : ''))));
        const observed = tl.observed.length ? h('p', {class: 'muted'}, 'Seen by this node: ', tl.observed.map((o, i) => [i ? ' → ' : '', o.state, o.height ? ' (block ' + o.height + ')' : ''])) : null;
        const paid = (j.assignments || []).reduce((n, a) => n + a.paid, 0);
        replace(top,
          h('h1', {}, 'Job #' + j.id + ' ', h('span', {class: 'muted'}, sp.name), ' ', h('span', {id: 'job-state'}, stateBadge(j.state))),
          j.reason ? h('p', {class: j.state === 'failed' ? 'error' : 'notice', id: 'job-reason'}, (j.state === 'queued' ? 'Waiting: ' : '') + j.reason) : null,
          h('div', {class: 'panel'}, h('h2', {}, 'Replicas and verdict'),
            h('p', {}, 'Verification: ', h('b', {}, sp.verification), ' · ', h('span', {id: 'job-verification'}, T.verdictText(j, done, fmtSync)), ' · attempts ' + j.attempts),
            replicasTable(j)),
          checkpointsPanel(j),
          h('div', {class: 'grid2'},
            h('div', {class: 'panel'}, h('h2', {}, 'Status timeline'), timeline, observed),
            h('div', {class: 'panel'}, h('h2', {}, 'Cost'), h('dl', {class: 'kv', id: 'job-cost'},
              h('dt', {}, 'Max price'), h('dd', {}, fmtSync(sp.max_price_per_hour) + '/h per replica, timeout ' + sp.timeout_seconds + ' s'),
              h('dt', {}, 'Escrow held'), h('dd', {}, fmtSync(j.escrow)),
              h('dt', {}, 'Paid to providers'), h('dd', {}, fmtSync(j.cost) + (paid === j.cost ? '' : done ? ' from the escrow; ' + fmtSync(paid) + ' to the replicas in all' : ' (' + fmtSync(paid) + ' so far)')),
              h('dt', {}, 'Protocol fee'), h('dd', {}, fmtSync(j.fee)),
              h('dt', {}, 'Refunded'), h('dd', {}, fmtSync(j.refund)),
              j.audit_cost ? [h('dt', {}, 'Audit paid by the treasury'), h('dd', {}, fmtSync(j.audit_cost))] : null,
              h('dt', {}, 'Owner'), h('dd', {}, addrLink(j.owner))))));
        replace(outputs, outputsPanel(j, keyName));
        replace(spec, h('div', {class: 'panel'}, h('h2', {}, 'Spec'), h('dl', {class: 'kv'},
          h('dt', {}, 'Executor'), h('dd', {}, sp.executor + ' ' + (sp.module || sp.image || '')),
          h('dt', {}, 'Args'), h('dd', {class: 'mono'}, (sp.args || []).join(' ')),
          h('dt', {}, 'Resources'), h('dd', {}, (sp.cpu_milli / 1000) + ' CPU, ' + fmtBytes(sp.memory) + ' memory, ' + fmtBytes(sp.disk) + ' disk' + (sp.gpu_count ? ', ' + sp.gpu_count + ' GPU(s) ' + (sp.gpu_models || []).join('/') : '')),
          h('dt', {}, 'Region'), h('dd', {}, sp.region || 'any'),
          h('dt', {}, 'Tier'), h('dd', {id: 'job-tier'}, sp.tier || 'on-demand'),
          h('dt', {}, 'Outputs'), h('dd', {class: 'mono'}, (sp.outputs || []).join(' ')),
          h('dt', {}, 'Submitted'), h('dd', {}, fmtTime(j.submitted_at) + ' in ', h('a', {href: '#/block/' + j.height}, 'block ' + j.height)))));
        log.load(false);
      } catch (e) { replace(top, h('h1', {}, 'Job #' + id), errorBox(e)); }
    };
    load();
    const reload = refresher(load, 200);
    return {
      onJob(j) { if (String(j.id) === String(id)) reload(); },
      onBlock() { if (!done) reload(); },
    };
  }

  // ---------------------------------------------------------------- services

  const SERVICE_DONE = ['stopped', 'failed'];
  function serviceLink(id) { return h('a', {href: '#/service/' + id}, '#' + id); }
  function readyCount(sv) { return (sv.replicas || []).filter(r => r.ready).length; }
  // rate is what the service pays an hour now: its ready replicas' prices.
  function rate(sv) { return (sv.replicas || []).filter(r => r.ready).reduce((n, r) => n + r.price_per_hour, 0); }
  function fmtSeconds(sec) {
    if (!sec) return '0 s';
    const hh = Math.floor(sec / 3600), mm = Math.floor(sec % 3600 / 60), ss = sec % 60;
    return (hh ? hh + ' h ' : '') + (hh || mm ? mm + ' min ' : '') + ss + ' s';
  }

  function servicesTable(svcs) {
    if (!svcs.length) return h('p', {class: 'muted'}, 'No services.');
    return h('table', {id: 'services-table'}, h('thead', {}, h('tr', {}, ['Service', 'Name', 'State', 'Owner', 'Replicas', 'Serves', 'Rate', 'Escrow', 'Runs out'].map(t => h('th', {}, t)))),
      h('tbody', {}, svcs.map(sv => h('tr', {'data-service': sv.id, class: sv.budget_warned_at && !SERVICE_DONE.includes(sv.state) ? 'warn' : ''},
        h('td', {}, serviceLink(sv.id)), h('td', {}, sv.spec.name), h('td', {class: 'state-cell'}, stateBadge(sv.state)), h('td', {}, addrLink(sv.owner)),
        h('td', {class: 'replicas-cell'}, readyCount(sv) + '/' + sv.spec.replicas + ' ready'),
        h('td', {}, sv.spec.openai ? 'OpenAI: ' + sv.spec.openai.models.join(', ') : sv.spec.ports.map(p => p.port + '/' + p.protocol).join(', ')),
        h('td', {class: 'num'}, fmtSync(rate(sv)) + '/h'), h('td', {class: 'num'}, fmtSync(sv.escrow)),
        h('td', {}, SERVICE_DONE.includes(sv.state) ? fmtTime(sv.stopped_at) : fmtTime(sv.runs_out_at))))));
  }

  function servicesPage(_, params) {
    const owner = params.get('owner') || '';
    const cursor = params.get('cursor') || '';
    const err = h('div');
    const body = h('div', {class: 'panel', id: 'services-panel'});
    const pager = h('div', {class: 'pager'});
    replace(app, h('h1', {}, 'Services'),
      h('p', {class: 'muted'}, owner ? ['Every service of ', addrLink(owner), ', newest first. ', h('a', {href: '#/services'}, '(everyone\'s active ones)')] : 'The active services of everyone, oldest first.'),
      err, body, pager);
    const load = async () => {
      try {
        const page = await api('/v1/services' + qs({owner, cursor, limit: 50}));
        replace(err);
        replace(body, servicesTable(page.services));
        replace(pager,
          cursor ? h('button', {onclick: () => history.back()}, '← back') : null,
          page.next_cursor ? h('button', {onclick: () => go('#/services' + qs({owner, cursor: page.next_cursor}))}, 'more →') : null);
      } catch (e) { replace(err, errorBox(e)); }
    };
    load();
    return {onBlock: refresher(load, 1000)};
  }

  // serviceEndpoints says how to reach the service's ports through this
  // node (any node would do), and who may.
  function serviceEndpoints(sv) {
    const base = location.origin;
    return h('div', {class: 'panel', id: 'service-endpoints'}, h('h2', {}, 'Endpoints'),
      SERVICE_DONE.includes(sv.state) ? h('p', {class: 'muted'}, 'No longer served: the service has ended (its addresses answer 404).') : null,
      h('dl', {class: 'kv'},
        sv.spec.ports.map(p => [h('dt', {}, 'Port ' + p.port + (p.name ? ' (' + p.name + ')' : '')),
          h('dd', {}, p.protocol === 'http' ? h('code', {class: 'mono'}, base + '/svc/' + sv.id + '/' + p.port + '/')
            : cmdBox('gpunet service connect ' + sv.id + ' --port ' + p.port + ' --listen 127.0.0.1:' + p.port))]),
        sv.spec.openai ? [h('dt', {}, 'OpenAI API'), h('dd', {}, h('code', {class: 'mono'}, base + '/openai/v1'), ' · models ' + sv.spec.openai.models.join(', '))] : null,
        h('dt', {}, 'Access'), h('dd', {id: 'service-access'}, sv.public ? 'public: anyone, without a key'
          : [(sv.key_hashes || []).length + ' key(s) (Authorization: Bearer sk-gpunet-…); the owner\'s: ', cmdBox('gpunet service key ' + sv.id)])));
  }

  function replicaStatus(r) {
    if (r.ready) return h('span', {class: 'state active'}, 'ready');
    return r.ready_at ? h('span', {class: 'state failed'}, 'not ready') : h('span', {class: 'state assigned'}, 'starting');
  }

  function serviceReplicas(sv) {
    const reps = sv.replicas || [], ended = (sv.ended || []).slice().reverse();
    return h('div', {class: 'panel'}, h('h2', {}, 'Replicas (' + readyCount(sv) + ' of ' + sv.spec.replicas + ' ready, ' + sv.placements + ' placed so far)'),
      reps.length ? h('table', {id: 'service-replicas'}, h('thead', {}, h('tr', {}, ['Provider', 'Status', 'Price', 'Ready since', 'Last report', 'Paid for', 'Paid', 'Relay node'].map(t => h('th', {}, t)))),
        h('tbody', {}, reps.map(r => h('tr', {'data-provider': r.provider},
          h('td', {}, addrLink(r.provider, true)), h('td', {}, replicaStatus(r)), h('td', {class: 'num'}, fmtSync(r.price_per_hour) + '/h'),
          h('td', {}, fmtTime(r.ready_at)), h('td', {}, fmtTime(r.heartbeat_at)), h('td', {class: 'num'}, fmtSeconds(r.ready_seconds)),
          h('td', {class: 'num'}, fmtSync(r.paid)), h('td', {class: 'mono'}, r.relay || '–')))))
        : h('p', {class: 'muted'}, SERVICE_DONE.includes(sv.state) ? 'None: the service has ended.' : 'None placed yet' + (sv.wait_code ? ' (' + sv.wait_code + ')' : '') + '.'),
      ended.length ? [h('h2', {}, 'Replicas that ended'), h('table', {id: 'service-ended'}, h('thead', {}, h('tr', {}, ['Provider', 'Ended', 'Paid for', 'Paid', 'Why'].map(t => h('th', {}, t)))),
        h('tbody', {}, ended.map(e => h('tr', {class: e.slashed ? 'slashed' : ''},
          h('td', {}, addrLink(e.provider, true)), h('td', {}, fmtTime(e.ended_at)), h('td', {class: 'num'}, fmtSeconds(e.ready_seconds)),
          h('td', {class: 'num'}, fmtSync(e.paid)), h('td', {class: 'muted'}, e.why + (e.slashed ? ' (slashed ' + fmtSync(e.slashed) + ')' : ''))))))] : null);
  }

  function serviceCost(sv) {
    const done = SERVICE_DONE.includes(sv.state);
    return h('div', {class: 'panel'}, h('h2', {}, 'Budget'), h('dl', {class: 'kv', id: 'service-cost'},
      h('dt', {}, 'Budget'), h('dd', {}, fmtSync(sv.budget) + ' locked in all'),
      h('dt', {}, 'Escrow held'), h('dd', {}, fmtSync(sv.escrow)),
      h('dt', {}, 'Paid to providers'), h('dd', {}, fmtSync(sv.cost)),
      h('dt', {}, 'Protocol fee'), h('dd', {}, fmtSync(sv.fee)),
      h('dt', {}, 'Refunded'), h('dd', {}, fmtSync(sv.refund)),
      done ? null : [h('dt', {}, 'Rate now'), h('dd', {}, fmtSync(rate(sv)) + '/h (its ready replicas)'),
        h('dt', {}, 'Runs out'), h('dd', {}, sv.runs_out_at ? fmtTime(sv.runs_out_at) : 'not while nothing is paid')],
      h('dt', {}, 'Owner'), h('dd', {}, addrLink(sv.owner), ' · ', h('a', {href: '#/services' + qs({owner: sv.owner})}, 'its services'))));
  }

  function serviceSpec(sv) {
    const sp = sv.spec, rd = sp.readiness;
    return h('div', {class: 'panel'}, h('h2', {}, 'Spec'), h('dl', {class: 'kv'},
      h('dt', {}, 'Image'), h('dd', {class: 'mono'}, sp.image),
      (sp.command || sp.args) ? [h('dt', {}, sp.command ? 'Command' : 'Args'), h('dd', {class: 'mono'}, (sp.command || []).concat(sp.args || []).join(' '))] : null,
      h('dt', {}, 'Resources'), h('dd', {}, (sp.cpu_milli / 1000) + ' CPU, ' + fmtBytes(sp.memory) + ' memory, ' + fmtBytes(sp.disk) + ' disk' + (sp.gpu_count ? ', ' + sp.gpu_count + ' GPU(s) ' + (sp.gpu_models || []).join('/') : '') + ' per replica'),
      h('dt', {}, 'Max price'), h('dd', {}, fmtSync(sp.max_price_per_hour) + '/h per replica'),
      h('dt', {}, 'Readiness'), h('dd', {}, (rd.path ? 'GET :' + rd.port + rd.path : 'TCP connect :' + rd.port) + ' every ' + rd.interval_seconds + ' s, ' + rd.failure_threshold + ' failure(s) in a row, ' + rd.start_seconds + ' s to start'),
      h('dt', {}, 'Network'), h('dd', {}, sp.network ? 'outbound allowed' : 'none outbound'),
      h('dt', {}, 'Region'), h('dd', {}, sp.region ? sp.region + (sp.region_required ? ' (required)' : ' (preferred)') : 'any'),
      h('dt', {}, 'Deployed'), h('dd', {}, fmtTime(sv.created_at) + ' in ', h('a', {href: '#/block/' + sv.height}, 'block ' + sv.height))));
  }

  function servicePage([id]) {
    const root = h('div');
    replace(app, root);
    let done = false;
    const load = async () => {
      try {
        const sv = await api('/v1/services/' + id);
        done = SERVICE_DONE.includes(sv.state);
        const warn = !done && sv.budget_warned_at;
        replace(root,
          h('h1', {}, 'Service #' + sv.id + ' ', h('span', {class: 'muted'}, sv.spec.name), ' ', h('span', {id: 'service-state'}, stateBadge(sv.state))),
          sv.reason ? h('p', {class: sv.state === 'failed' ? 'error' : 'notice', id: 'service-reason'}, sv.reason) : null,
          warn ? h('div', {class: 'notice', id: 'service-budget-warning'}, 'Its budget runs out at ' + fmtTime(sv.runs_out_at) + '; top it up to keep it running:',
            cmdBox('gpunet service topup ' + sv.id + ' AMOUNT')) : null,
          !done && !(sv.replicas || []).length && sv.wait_code ? h('p', {class: 'notice'}, 'Waiting for a provider: ' + sv.wait_code) : null,
          h('div', {class: 'grid2'}, serviceEndpoints(sv), serviceCost(sv)),
          serviceReplicas(sv), serviceSpec(sv));
      } catch (e) { replace(root, h('h1', {}, 'Service #' + id), errorBox(e)); }
    };
    load();
    const reload = refresher(load, 500);
    return {onBlock() { if (!done) reload(); }};
  }

  // ---------------------------------------------------------------- ledger

  function blocksTable(blocks) {
    return h('table', {id: 'blocks-table'}, h('thead', {}, h('tr', {}, h('th', {}, 'Height'), h('th', {class: 'wide-only'}, 'Time'), ['Txs', 'Proposer', 'Hash'].map(t => h('th', {}, t)))),
      h('tbody', {}, blocks.map(b => h('tr', {}, h('td', {}, h('a', {href: '#/block/' + b.height}, b.height)), h('td', {class: 'wide-only'}, fmtTime(b.time)),
        h('td', {class: 'num'}, b.num_txs), h('td', {class: 'mono'}, short(b.proposer)), h('td', {class: 'mono'}, short(b.hash))))));
  }
  function txsTable(txs, withBlock) {
    if (!txs.length) return h('p', {class: 'muted'}, 'No txs.');
    return h('table', {id: 'txs-table'}, h('thead', {}, h('tr', {}, ['Tx', 'Type', 'Sender', withBlock ? 'Block' : null, 'Result'].filter(Boolean).map(t => h('th', {}, t)))),
      h('tbody', {}, txs.map(t => h('tr', {class: (t.events || []).some(e => SLASH_EVENTS.has(e.type)) ? 'slashed' : ''}, h('td', {}, h('a', {href: '#/tx/' + t.tx_hash, class: 'mono'}, short(t.tx_hash))), h('td', {}, t.type),
        h('td', {}, addrLink(t.sender)), withBlock ? h('td', {}, h('a', {href: '#/block/' + t.height}, t.height)) : null,
        h('td', {}, t.code === 0 ? 'ok' : h('span', {class: 'state failed', title: t.log}, 'code ' + t.code))))));
  }

  function ledgerPage(_, params) {
    const bcur = params.get('blocks') || '', tcur = params.get('txs') || '';
    // Filters, server-side: blocks by a tx's message type or an event's
    // type, txs by message type.
    const btx = params.get('tx_type') || '', bev = params.get('event') || '', ttype = params.get('type') || '';
    const nav = o => go('#/ledger' + qs(Object.assign({tx_type: btx, event: bev, type: ttype, blocks: bcur, txs: tcur}, o)));
    const bsel = h('select', {id: 'blocks-filter', 'aria-label': 'which blocks'},
      h('option', {value: ''}, 'all blocks'), h('option', {value: 'tx:any', selected: btx === 'any'}, 'with txs'),
      h('optgroup', {label: 'with a tx of type'}, TX_TYPES.map(t => h('option', {value: 'tx:' + t, selected: btx === t}, t))),
      h('optgroup', {label: 'with an event of type'}, BLOCK_EVENTS.map(t => h('option', {value: 'event:' + t, selected: bev === t}, t))));
    bsel.addEventListener('change', () => {
      const [kind, t] = bsel.value.split(':');
      nav({tx_type: kind === 'tx' ? t : '', event: kind === 'event' ? t : '', blocks: ''});
    });
    const tsel = h('select', {id: 'txs-filter', 'aria-label': 'which txs'},
      h('option', {value: ''}, 'all types'), TX_TYPES.map(t => h('option', {value: t, selected: ttype === t}, t)));
    tsel.addEventListener('change', () => nav({type: tsel.value, txs: ''}));
    const err = h('div');
    const blocks = h('div'), txs = h('div');
    replace(app, h('h1', {}, 'Ledger'), err, h('div', {class: 'grid2'},
      h('div', {class: 'panel'}, h('div', {class: 'panel-head'}, h('h2', {}, 'Recent blocks'), bsel), blocks),
      h('div', {class: 'panel'}, h('div', {class: 'panel-head'}, h('h2', {}, 'Recent txs'), tsel), txs)));
    const load = async () => {
      try {
        const [b, t] = await Promise.all([
          api('/v1/blocks' + qs({limit: 20, cursor: bcur, tx_type: btx, event: bev})),
          api('/v1/txs' + qs({limit: 20, cursor: tcur, type: ttype}))]);
        replace(err);
        replace(blocks, b.blocks.length ? blocksTable(b.blocks) : h('p', {class: 'muted'}, b.next_cursor ? 'None in the blocks looked at; older ones may hold some.' : 'No such block.'),
          h('div', {class: 'pager'}, bcur ? h('button', {onclick: () => history.back()}, '← newer') : null,
            b.next_cursor ? h('button', {id: 'blocks-older', onclick: () => nav({blocks: b.next_cursor})}, 'older →') : null));
        replace(txs, txsTable(t.txs, true),
          h('div', {class: 'pager'}, tcur ? h('button', {onclick: () => history.back()}, '← newer') : null,
            t.next_cursor ? h('button', {id: 'txs-older', onclick: () => nav({txs: t.next_cursor})}, 'older →') : null));
      } catch (e) { replace(err, errorBox(e)); }
    };
    load();
    return {onBlock: bcur || tcur ? null : refresher(load, 1000)};
  }

  function blockPage([height]) {
    (async () => {
      try {
        const b = await api('/v1/blocks/' + encodeURIComponent(height));
        replace(app, h('h1', {}, 'Block ' + b.height),
          h('div', {class: 'panel'}, h('dl', {class: 'kv'},
            h('dt', {}, 'Time'), h('dd', {}, fmtTime(b.time)), h('dt', {}, 'Hash'), h('dd', {class: 'mono'}, b.hash),
            h('dt', {}, 'Proposer'), h('dd', {class: 'mono'}, b.proposer), h('dt', {}, 'App hash (before)'), h('dd', {class: 'mono'}, b.app_hash),
            h('dt', {}, 'Size'), h('dd', {}, fmtBytes(b.size)))),
          h('div', {class: 'pager'}, b.height > 1 ? h('a', {href: '#/block/' + (b.height - 1)}, '← block ' + (b.height - 1)) : null, h('a', {href: '#/block/' + (b.height + 1)}, 'block ' + (b.height + 1) + ' →')),
          h('div', {class: 'panel'}, h('h2', {}, 'Txs'), txsTable(b.txs, false)),
          h('div', {class: 'panel'}, h('h2', {}, 'Block events (scheduling, challenges, deadlines)'), (b.events || []).length ? h('table', {id: 'block-events'}, h('tbody', {}, b.events.map(e => h('tr', {class: SLASH_EVENTS.has(e.type) ? 'slashed' : ''}, h('td', {}, e.type),
            h('td', {class: 'muted'}, (e.attrs || []).map(a => a.key + '=' + a.value).join(' ')))))) : h('p', {class: 'muted'}, 'None.')));
      } catch (e) { replace(app, h('h1', {}, 'Block ' + height), errorBox(e)); }
    })();
    return null;
  }

  function txPage([hash]) {
    (async () => {
      try {
        const t = await api('/v1/txs/' + encodeURIComponent(hash));
        replace(app, h('h1', {}, 'Tx'), h('div', {class: 'panel'}, h('dl', {class: 'kv'},
          h('dt', {}, 'Hash'), h('dd', {class: 'mono'}, t.tx_hash), h('dt', {}, 'Block'), h('dd', {}, h('a', {href: '#/block/' + t.height}, t.height)),
          h('dt', {}, 'Result'), h('dd', {}, t.code === 0 ? 'ok' : 'code ' + t.code + ': ' + (t.log || '')),
          h('dt', {}, 'Events'), h('dd', {}, (t.events || []).map(e => h('div', {}, h('b', {}, e.type), ' ', (e.attrs || []).map(a => a.key + '=' + a.value).join(' ')))))));
      } catch (e) { replace(app, h('h1', {}, 'Tx'), errorBox(e)); }
    })();
    return null;
  }

  // allOf reads every page of a list route (at most pages of 1000): the
  // items, and whether more were left unread.
  async function allOf(path, params, field, pages) {
    const out = [];
    let cursor = '';
    for (let i = 0; i < pages; i++) {
      const p = await api(path + qs(Object.assign({limit: 1000, cursor}, params)));
      out.push(...p[field]);
      if (!p.next_cursor) return {items: out, more: false};
      cursor = p.next_cursor;
    }
    return {items: out, more: true};
  }

  // accountPage is an account's balance, stake and earnings, what its jobs
  // and services cost it, and its jobs and services; it names the account
  // in this browser and marks it as this browser's own (the Account link).
  // The naming bar is drawn once, so that a redraw (each few blocks) never
  // takes what is being typed.
  function accountPage([addr], params) {
    const cursor = params.get('cursor') || '';
    const head = h('div'), body = h('div');
    const labelInput = h('input', {type: 'text', id: 'account-label-input', value: labels.local()[addr] || '', placeholder: 'a name for this address', 'aria-label': 'name'});
    const mineBox = h('span');
    const bar = h('div', {class: 'toolbar'}, labelInput, h('button', {type: 'button', id: 'account-label-save', onclick: () => { labels.set(addr, labelInput.value.trim()); load(); }}, 'Name it'),
      mineBox, h('span', {class: 'muted'}, 'Names and “my account” are kept in this browser only.'));
    labelInput.addEventListener('keydown', ev => { if (ev.key === 'Enter') { labels.set(addr, labelInput.value.trim()); load(); } });
    replace(app, head, bar, body);
    const card = (label, value, sub, id) => h('div', {class: 'card'}, h('div', {class: 'label'}, label), h('div', {class: 'value', id}, value), sub ? h('div', {class: 'sub'}, sub) : null);
    const drawHead = () => {
      const name = labels.name(addr), mine = labels.mine() === addr;
      replace(head, h('h1', {}, 'Account ', name ? [h('span', {id: 'account-name'}, name), ' '] : null, h('span', {class: 'mono muted'}, addr)));
      replace(mineBox, mine ? h('span', {class: 'tag', id: 'account-mine'}, 'your account') : null,
        h('button', {type: 'button', id: 'account-mine-toggle', onclick: () => { labels.setMine(mine ? '' : addr); drawHead(); }}, mine ? 'Not mine' : 'This is my account'));
    };
    // The spend reads every job and service of the account (its latest
    // 2000 and 1000): at most every 15 s, not at each redraw.
    let spent = null, spentAt = 0;
    const spend = async () => {
      if (spent && Date.now() - spentAt < 15000) return spent;
      const [js, ss] = await Promise.all([allOf('/v1/jobs', {owner: addr}, 'jobs', 2), allOf('/v1/services', {owner: addr}, 'services', 1)]);
      spent = {sp: T.spend(js.items, ss.items), more: js.more || ss.more};
      spentAt = Date.now();
      return spent;
    };
    const load = async () => {
      drawHead();
      try {
        const [a, jobs, svcs, all, dl] = await Promise.all([api('/v1/accounts/' + addr), api('/v1/jobs' + qs({owner: addr, limit: 20, cursor})), api('/v1/services' + qs({owner: addr, limit: 20})), spend(), api('/v1/accounts/' + addr + '/delegations')]);
        const sp = all.sp;
        const partial = all.more ? ' (its latest ' + sp.jobs + ' jobs and ' + sp.services + ' services)' : '';
        drawHead();
        replace(body,
          h('div', {class: 'cards'},
            card('Balance', fmtSync(a.balance), null, 'account-balance'),
            card('Spent', fmtSync(sp.spent), 'on ' + sp.jobs + ' job(s) and ' + sp.services + ' service(s)' + partial + ': ' + fmtSync(sp.paid) + ' to providers, ' + fmtSync(sp.fees) + ' fees', 'account-spent'),
            card('In escrow', fmtSync(sp.escrow), fmtSync(sp.refunded) + ' refunded so far', 'account-escrow'),
            card('Stake', fmtSync(a.stake), a.unbonding ? fmtSync(a.unbonding) + ' unbonding' : null),
            card('Earned as a provider', fmtSync(a.earned)),
            card('Delegated', fmtSync(dl.delegated), (dl.unbonding_total ? fmtSync(dl.unbonding_total) + ' unbonding, ' : '') + fmtSync(dl.pending_rewards) + ' rewards pending', 'account-delegated'),
            card('Txs sent', fmtNum(a.sequence, 0), 'next sequence ' + a.next_sequence)),
          delegationsPanel(dl),
          a.provider ? h('p', {}, 'This account is a provider: ', h('a', {href: '#/provider/' + addr}, 'its provider page'), '.') : null,
          h('div', {class: 'panel', id: 'account-jobs'}, h('h2', {}, 'Jobs'), jobsTable(jobs.jobs),
            h('div', {class: 'pager'}, jobs.next_cursor ? h('button', {onclick: () => go('#/account/' + addr + qs({cursor: jobs.next_cursor}))}, 'older →') : null)),
          h('div', {class: 'panel', id: 'account-services'}, h('h2', {}, 'Services'), servicesTable(svcs.services),
            svcs.next_cursor ? h('p', {}, h('a', {href: '#/services' + qs({owner: addr})}, 'all of its services →')) : null));
      } catch (e) { replace(body, errorBox(e)); }
    };
    load();
    return {onBlock: refresher(load, 2000)};
  }

  // mePage is the Account link: this browser's own account if it has
  // one, else a choice among the node's keys (with its API token) or any
  // address.
  function mePage() {
    const mine = labels.mine();
    if (mine) { location.replace('#/account/' + mine); return null; }
    const input = h('input', {type: 'text', id: 'me-address', placeholder: 'gpu1…', 'aria-label': 'address'});
    const open = () => { const v = input.value.trim(); if (v) { labels.setMine(v); go('#/account/' + v); } };
    input.addEventListener('keydown', ev => { if (ev.key === 'Enter') open(); });
    const keys = h('div', {id: 'me-keys'});
    replace(app, h('h1', {}, 'Your account'),
      h('div', {class: 'panel'}, h('p', {}, 'Which account is yours? The page remembers it in this browser.'),
        h('div', {class: 'toolbar'}, input, h('button', {class: 'primary', type: 'button', id: 'me-open', onclick: open}, 'Open')), keys));
    (async () => {
      await labels.load();
      if (!labels.keys.length) {
        replace(keys, h('p', {class: 'muted'}, token.get() ? 'The node’s keyring has no keys.' : 'With the node’s API token (the Submit page asks for it) the keys of its keyring are listed here.'));
        return;
      }
      replace(keys, h('p', {}, 'The keys of this node’s keyring:'), h('ul', {}, labels.keys.map(k => h('li', {},
        h('a', {href: '#/account/' + k.address, 'data-key': k.name, onclick: () => labels.setMine(k.address)}, k.name), ' ', h('span', {class: 'mono muted'}, k.address)))));
    })();
    return null;
  }

  // ---------------------------------------------------------------- submit

  const EXAMPLE_SPEC = `# A job spec as for \`gpunet job run\` (docs/jobspec.md). Local files it
# names (module, inputs[].from) are the files you attach below, by name.
name: wordcount
executor: wasm
module: ./wordcount.wasm
args: ["/in/input.txt"]
inputs:
  - path: /in/input.txt
    from: ./input.txt
outputs: [/out]
resources:
  cpu: 1
  memory: 256MiB
max_price: 0.5
timeout: 1m
verification: spot
`;

  function submitPage() {
    const tokenInput = h('input', {type: 'password', id: 'submit-token', placeholder: 'the api_token of this node’s config', value: token.get()});
    const keySel = h('select', {id: 'submit-key'}, h('option', {value: ''}, '(enter the token, then load keys)'));
    const spec = h('textarea', {id: 'submit-spec', spellcheck: 'false'});
    spec.value = EXAMPLE_SPEC;
    const files = h('input', {type: 'file', id: 'submit-files', multiple: true});
    const out = h('div', {id: 'submit-result'});
    const btn = h('button', {class: 'primary', type: 'submit', id: 'submit-button'}, 'Submit job');
    const auth = () => token.headers();
    const loadKeys = async () => {
      token.set(tokenInput.value);
      try {
        const k = await api('/v1/dashboard/keys', {headers: auth()});
        // Keep the key chosen meanwhile (a load started when the page
        // opened may end after the user picked one).
        const chosen = keySel.value;
        replace(keySel, k.keys.map(x => h('option', {value: x.name, selected: x.name === chosen}, x.name + ' (' + short(x.address) + ')')));
        replace(out);
      } catch (e) { replace(out, errorBox(e)); }
    };
    const form = h('form', {class: 'submit panel'},
      h('p', {class: 'muted'}, 'Submits a job signed by a key of this node’s keyring. The node seals and uploads the files, submits the job, and grants its key to the providers the ledger assigns. It needs the node’s API token.'),
      h('label', {for: 'submit-token'}, 'API token'), tokenInput, ' ', h('button', {type: 'button', id: 'submit-load-keys', onclick: loadKeys}, 'Load keys'),
      h('label', {for: 'submit-key'}, 'Key'), keySel,
      h('label', {for: 'submit-spec'}, 'Job spec (YAML)'), spec,
      h('label', {for: 'submit-files'}, 'Files the spec names (module, inputs)'), files,
      h('p', {}, btn), out);
    form.addEventListener('submit', async ev => {
      ev.preventDefault();
      const fd = new FormData();
      fd.append('key', keySel.value);
      fd.append('spec', spec.value);
      for (const f of files.files) fd.append('file', f, f.name);
      btn.disabled = true;
      replace(out, h('p', {class: 'muted'}, 'Sealing, uploading and submitting…'));
      try {
        const r = await api('/v1/dashboard/jobs', {method: 'POST', headers: auth(), body: fd});
        replace(out, h('p', {class: 'notice'}, 'Submitted ', jobLink(r.id), ' from ', r.key, '.'));
        go('#/job/' + r.id);
      } catch (e) { replace(out, errorBox(e)); } finally { btn.disabled = false; }
    });
    replace(app, h('h1', {}, 'Submit a job'), form);
    if (tokenInput.value) loadKeys();
    return null;
  }

  window.addEventListener('hashchange', route);
  connect();
  route();
  labels.load(); // names appear as the pages redraw
  // The providers' labels, for the pages that show providers but load no
  // list of them (a job's replicas): the first page, once.
  api('/v1/providers' + qs({limit: 1000})).then(p => learnLabels(p.providers)).catch(() => { /* no labels: the addresses stand alone */ });
})();

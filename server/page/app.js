// noderun's page: the runs of a journal, and one run followed live from its
// event stream (docs/http.md). Plain JavaScript, no dependency, no build.
//
// What it shows is only ever added to or updated in place: a lost
// connection leaves everything on screen, and the stream resumes after the
// last event received (?after=SEQ), so nothing is missed or shown twice.
'use strict';
(() => {
  const token = (document.querySelector('meta[name="noderun-write-token"]') || {}).content || '';
  const app = document.getElementById('app');

  // el builds an element: el('div', {class: 'x', onclick: f}, 'text', child).
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else if (k === 'text') e.textContent = v;
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const k of kids) if (k !== null && k !== undefined) e.append(k);
    return e;
  }

  // utf8Len is how many bytes s takes in UTF-8. A surrogate counts 2, so a
  // pair counts 4 even when appends split it.
  function utf8Len(s) {
    let n = 0;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      n += c < 0x80 ? 1 : c < 0x800 || (c >= 0xd800 && c < 0xe000) ? 2 : 3;
    }
    return n;
  }

  // api fetches a document; an error's message is the server's.
  async function api(path, opts) {
    const res = await fetch(path, Object.assign({cache: 'no-store', credentials: 'same-origin'}, opts));
    const text = await res.text();
    let body = null;
    try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
    if (!res.ok) throw new Error((body && body.error) || `${res.status} ${res.statusText}`);
    return body;
  }

  function post(path, body) {
    return api(path, {method: 'POST', headers: {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + token},
      body: JSON.stringify(body || {})});
  }

  const enc = encodeURIComponent;
  const short = (id) => id.slice(0, 8);
  const words = {canceled: 'interrupted'}; // the journal's word, as the CLI shows it
  const stateWord = (s) => words[s] || s;
  function secs(ms) {
    if (!isFinite(ms) || ms < 0) return '-';
    const s = ms / 1000;
    if (s < 60) return s.toFixed(1) + ' s';
    const m = Math.floor(s / 60);
    return m < 60 ? `${m}m${Math.round(s % 60)}s` : `${Math.floor(m / 60)}h${m % 60}m`;
  }
  const when = (t) => (t ? new Date(t).toLocaleString() : '');

  const m = location.pathname.match(/^\/runs\/([^/]+)\/?$/);
  const tm = location.pathname.match(/^\/temporal\/runs\/([^/]+)\/?$/);
  if (m) runPage(decodeURIComponent(m[1]));
  else if (tm) temporalPage(decodeURIComponent(tm[1]));
  else runsPage();

  // ---- the runs list --------------------------------------------------

  function runsPage() {
    document.title = 'noderun';
    const filter = el('input', {type: 'search', id: 'filter', placeholder: 'graph, status or run id', 'aria-label': 'Filter runs'});
    const body = el('tbody');
    const note = el('p', {class: 'note', role: 'status'});
    app.append(
      el('header', {}, el('h1', {}, 'noderun'), el('label', {for: 'filter', class: 'sr'}, 'Filter'), filter),
      el('table', {class: 'runs'}, el('thead', {}, el('tr', {}, ...['Run', 'Graph', 'Status', 'Started', 'Profile'].map((h) => el('th', {scope: 'col'}, h)))), body),
      note, temporalRuns(), startForm());
    const rows = new Map();
    function apply() {
      const f = filter.value.trim().toLowerCase();
      for (const [, r] of rows) r.row.hidden = f !== '' && !r.text.includes(f);
    }
    filter.addEventListener('input', apply);
    async function load() {
      try {
        const doc = await api('/api/runs');
        note.textContent = doc.runs.length ? '' : 'No runs yet: start one below, or with noderun run --db on this journal.';
        doc.runs.forEach((r, i) => {
          const status = r.status + (r.abandoned ? ' (runner gone)' : '');
          let x = rows.get(r.run_id);
          if (!x) {
            const cells = [el('td', {}, el('a', {href: '/runs/' + enc(r.run_id), title: r.run_id}, short(r.run_id))),
              el('td'), el('td'), el('td'), el('td')];
            x = {row: el('tr', {'data-run': r.run_id}, ...cells), cells};
            rows.set(r.run_id, x);
          }
          const [, g, s, st, p] = x.cells;
          g.textContent = r.graph; s.textContent = status; s.className = 'st-' + r.status; st.textContent = when(r.started); p.textContent = r.profile;
          x.text = [r.run_id, r.graph, status].join(' ').toLowerCase();
          if (body.children[i] !== x.row) body.insertBefore(x.row, body.children[i] || null);
        });
        apply();
      } catch (e) {
        note.textContent = 'Could not read the runs: ' + e.message;
      }
      setTimeout(load, 3000);
    }
    load();
  }

  // temporalRuns lists the runs on Temporal when the server reads a
  // frontend (serve --temporal); nothing otherwise.
  function temporalRuns() {
    const sec = el('section', {id: 'temporal', hidden: true, 'aria-label': 'Runs on Temporal'});
    const body = el('tbody');
    const title = el('h2');
    const note = el('p', {class: 'note', role: 'status'});
    sec.append(title, el('table', {class: 'runs'}, el('thead', {}, el('tr', {},
      ...['Run', 'Status', 'Started', 'Closed', 'Executions'].map((h) => el('th', {scope: 'col'}, h)))), body), note);
    async function load() {
      let doc;
      try {
        doc = await api('/api/temporal/runs');
      } catch (e) {
        if (sec.hidden) return; // no frontend: the section stays away
        note.textContent = 'Could not read the runs on Temporal: ' + e.message;
        setTimeout(load, 5000);
        return;
      }
      sec.hidden = false;
      title.textContent = `On Temporal (${doc.temporal})`;
      note.textContent = doc.runs.length ? '' : 'No runs on Temporal yet (noderun run --temporal).';
      body.replaceChildren(...doc.runs.map((r) => el('tr', {'data-temporal-run': r.run_id},
        el('td', {}, el('a', {href: '/temporal/runs/' + enc(r.run_id)}, r.run_id)),
        el('td', {class: 'st-' + r.status}, r.status), el('td', {}, when(r.started)), el('td', {}, when(r.closed)),
        el('td', {}, String(r.executions)))));
      setTimeout(load, 5000);
    }
    load();
    return sec;
  }

  function startForm() {
    const out = el('p', {class: 'note', role: 'status'});
    const form = el('form', {id: 'start'},
      el('h2', {}, 'Start a run'),
      el('label', {for: 'graph'}, 'Graph file (relative to the served directory)'),
      el('input', {id: 'graph', name: 'graph', placeholder: 'graphs/goal.yaml'}),
      el('label', {for: 'yaml'}, 'or the graph itself (YAML)'),
      el('textarea', {id: 'yaml', name: 'yaml', rows: 6, spellcheck: 'false'}),
      el('label', {for: 'inputs'}, 'Inputs, one KEY=VALUE a line'),
      el('textarea', {id: 'inputs', name: 'inputs', rows: 2, spellcheck: 'false'}),
      el('button', {type: 'submit'}, 'Start'), out);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const fd = new FormData(form);
      const inputs = {};
      for (const line of String(fd.get('inputs') || '').split('\n')) {
        if (!line.trim()) continue;
        const i = line.indexOf('=');
        if (i < 1) { out.textContent = `An input needs KEY=VALUE: ${line}`; return; }
        inputs[line.slice(0, i).trim()] = line.slice(i + 1);
      }
      const body = {inputs};
      if (String(fd.get('graph')).trim()) body.graph = String(fd.get('graph')).trim();
      if (String(fd.get('yaml')).trim()) body.yaml = String(fd.get('yaml'));
      out.textContent = 'Starting…';
      try {
        const r = await post('/api/runs', body);
        location.assign(r.url);
      } catch (e) {
        out.textContent = 'Not started: ' + e.message;
      }
    });
    return form;
  }

  // ---- one run on Temporal -----------------------------------------------

  // temporalPage shows a run on Temporal as diagnose --temporal accounts
  // for it, read again every 2 s while it runs: its workers' journals are
  // elsewhere, so there is no event stream (docs/http.md). What it shows
  // is updated in place; a failed read leaves it on screen.
  function temporalPage(id) {
    document.title = 'noderun: run ' + id + ' on Temporal';
    const runStatus = el('span', {id: 'run-status'});
    const conn = el('span', {id: 'conn', 'data-state': 'connecting', role: 'status', 'aria-live': 'polite'}, 'reading');
    const summary = el('section', {id: 'figures', 'aria-label': 'Figures'});
    const nodesEl = el('section', {id: 'nodes', 'aria-label': 'Nodes'});
    const hand = el('section', {id: 'handovers', 'aria-label': 'Hand-overs'});
    app.append(el('header', {}, el('h1', {}, el('a', {href: '/'}, 'noderun'), ' run ', el('span', {class: 'id'}, id), ' on Temporal ', runStatus),
      el('p', {class: 'conn'}, 'Temporal: ', conn)),
    el('p', {class: 'meta'}, 'Figures and hand-overs from the workflow history, as diagnose --temporal prints them; ',
      'a node\'s output once it completed. Its tokens are not streamed here: they are in its worker\'s journal.'),
    summary, nodesEl, hand);
    const nodes = new Map();
    let fails = 0;
    function node(nid) {
      let n = nodes.get(nid);
      if (n) return n;
      const stateEl = el('span', {class: 'node-state'});
      const figs = el('p', {class: 'line'});
      const verdict = el('p', {class: 'node-verdict'});
      const out = el('pre', {class: 'node-output', tabindex: '0', hidden: true});
      const sec = el('article', {'data-node': nid, class: 'node'}, el('h2', {}, nid, ' ', stateEl), figs, verdict, out);
      nodesEl.append(sec);
      n = {sec, stateEl, figs, verdict, out, fetched: false};
      nodes.set(nid, n);
      return n;
    }
    async function load() {
      let d;
      try {
        d = await api(`/api/temporal/runs/${enc(id)}`);
        fails = 0;
      } catch (e) {
        fails++;
        conn.dataset.state = fails > 5 ? 'error' : 'reconnecting';
        conn.textContent = (fails > 5 ? 'unreachable: ' : `reconnecting (attempt ${fails}): `) + e.message;
        setTimeout(load, Math.min(30000, 2000 * 2 ** Math.min(fails, 4)) * (0.75 + Math.random() / 2));
        return;
      }
      const running = d.status === 'running';
      conn.dataset.state = 'live';
      conn.textContent = running ? 'following (read every 2 s)' : 'read';
      runStatus.textContent = d.status;
      runStatus.className = 'st-' + d.status;
      summary.replaceChildren(el('h2', {}, 'Figures'), ...d.summary.map((l) => el('p', {}, l)),
        el('p', {}, el('a', {href: `/api/temporal/runs/${enc(id)}`}, 'diagnose --temporal --json')));
      for (const na of d.nodes) {
        const n = node(na.id);
        n.sec.dataset.state = na.state;
        n.stateEl.textContent = stateWord(na.state);
        const t = na.tokens || {};
        n.figs.textContent = `${na.attempts} attempt${na.attempts === 1 ? '' : 's'} · ${t.generated || 0} tokens generated, ` +
          `${t.regenerated || 0} regenerated, ${t.preserved || 0} preserved · took ${secs(na.wall_ms)}, lost ${secs(na.time_lost_ms)}`;
        n.verdict.textContent = na.verdict;
        if (na.state === 'completed' && !n.fetched) {
          n.fetched = true;
          fetch(`/api/temporal/runs/${enc(id)}/nodes/${enc(na.id)}/output`, {cache: 'no-store', credentials: 'same-origin'})
            .then((r) => (r.ok ? r.text() : Promise.reject(new Error(r.statusText))))
            .then((text) => { n.out.textContent = text; n.out.hidden = false; })
            .catch(() => { n.fetched = false; });
        }
      }
      const rows = d.handovers.map((h) => el('tr', {'data-node': h.node},
        ...[h.node, h.lost_worker || '-', h.worker || '-', h.failure, h.handover_ms == null ? '-' : secs(h.handover_ms), h.recovery,
          `${h.tokens.generated} / ${h.tokens.regenerated} / ${h.tokens.preserved}`].map((v) => el('td', {}, v))));
      hand.replaceChildren(el('h2', {}, 'Hand-overs'), rows.length ? el('table', {class: 'runs'}, el('thead', {}, el('tr', {},
        ...['Node', 'Lost worker', 'Taken over by', 'Why', 'Took', 'Recovery', 'Generated / regenerated / preserved'].map((x) => el('th', {scope: 'col'}, x)))),
      el('tbody', {}, ...rows)) : el('p', {class: 'note'}, 'No node changed worker.'));
      if (running || [...nodes.values()].some((n) => n.sec.dataset.state === 'completed' && !n.fetched)) setTimeout(load, 2000);
    }
    load();
  }

  // ---- one run ---------------------------------------------------------

  // Recovery steps (their codes' role: docs/diagnostics.md): what a node
  // line says is under way, with its budget.
  const stepCodes = new Set(['NR102', 'NR103', 'NR110', 'NR112', 'NR201', 'NR202', 'NR203', 'NR205', 'NR206', 'NR208', 'NR303', 'NR602', 'NR603']);
  // Outcomes that settle a node: the status document is read again.
  const outcome = (code) => /^NR9/.test(code) || code === 'NR108' || code === 'NR404' || code === 'NR402' || code === 'NR403';

  function runPage(arg) {
    document.title = 'noderun: run ' + arg;
    const conn = el('span', {id: 'conn', 'data-state': 'connecting', role: 'status', 'aria-live': 'polite'}, 'connecting');
    const runStatus = el('span', {id: 'run-status'}, '');
    const head = el('p', {class: 'meta'});
    const actions = el('section', {id: 'actions', 'aria-label': 'Actions'});
    // The actions redraw with every refresh; what an action answered, and
    // that one is on its way, outlive the redraw (a refresh while a cancel
    // is in flight would otherwise drop its answer, and offer it again).
    const say = el('p', {class: 'note', role: 'status'});
    let acting = false;
    const nodesEl = el('section', {id: 'nodes', 'aria-label': 'Nodes'});
    const figures = el('section', {id: 'figures', 'aria-label': 'Figures'});
    const runDiags = el('ul', {class: 'diags', id: 'run-diags'});
    const retryBtn = el('button', {type: 'button', hidden: true, onclick: () => { attempt = 0; reconnect(); }}, 'Retry');
    app.append(
      el('header', {}, el('h1', {}, el('a', {href: '/'}, 'noderun'), ' run ', el('span', {class: 'id'}, arg), ' ', runStatus),
        el('p', {class: 'conn'}, 'stream: ', conn, ' ', retryBtn)),
      head, actions, nodesEl, figures, el('details', {}, el('summary', {}, 'Run diagnostics'), runDiags));

    let runID = arg;
    let doc = null; // the status document
    let lastSeq = 0;
    let ended = false;
    let es = null;
    let attempt = 0; // reconnections in a row
    const nodes = new Map();

    function setConn(state, text) {
      conn.dataset.state = state;
      conn.textContent = text;
      retryBtn.hidden = state !== 'error';
    }

    // node is a node's view: its row in the DOM, made once, and what the
    // stream said of it.
    function node(id) {
      let n = nodes.get(id);
      if (n) return n;
      const stateEl = el('span', {class: 'node-state'}, 'pending');
      const figs = el('span', {class: 'node-figures'});
      const step = el('span', {class: 'node-step'});
      const verdict = el('p', {class: 'node-verdict'});
      const out = el('pre', {class: 'node-output', tabindex: '0'});
      const think = el('pre', {class: 'node-thinking-text'});
      const diags = el('ul', {class: 'node-diags'});
      const sec = el('article', {'data-node': id, class: 'node'},
        el('h2', {}, id, ' ', stateEl), el('p', {class: 'line'}, figs, ' ', step), verdict,
        el('details', {class: 'node-thinking'}, el('summary', {}, 'Thinking'), think),
        out, el('details', {}, el('summary', {}, 'Diagnostics'), diags));
      nodesEl.append(sec);
      n = {id, sec, stateEl, figs, step, verdict, out, think, diags, state: 'pending', atts: new Map(), modes: new Map(),
        latest: 0, tokens: null, chunks: 0, first: 0, last: 0, done: false, codes: new Set(), reconciled: false};
      n.out.append(document.createTextNode(''));
      n.think.append(document.createTextNode(''));
      nodes.set(id, n);
      return n;
    }

    function att(n, a) {
      let x = n.atts.get(a);
      if (!x) { x = {text: '', thinking: '', reset: false}; n.atts.set(a, x); }
      return x;
    }

    // chain is the text the node's latest attempt stands for: a re-attach
    // goes on from the attempt before it; a reset voids what came before.
    function chain(n, field) {
      let from = n.latest;
      while (from > 1 && n.modes.get(from) === 'reattach') from--;
      let s = '';
      for (let a = from; a <= n.latest; a++) {
        const x = n.atts.get(a);
        if (!x) continue;
        if (x.reset) s = '';
        s += x[field];
      }
      return s;
    }

    // show puts text in a pre, appending when it only grew: the text node
    // is never emptied while what it holds is still true.
    // It keeps the text's length in UTF-8 bytes, the unit the journal and
    // every other figure count in (a JavaScript length counts UTF-16 units:
    // fewer than the bytes of any text beyond ASCII).
    function show(pre, text) {
      const t = pre.firstChild;
      if (text === t.data) return;
      if (text.startsWith(t.data)) {
        const more = text.slice(t.data.length);
        t.appendData(more);
        pre.bytes = (pre.bytes || 0) + utf8Len(more);
      } else {
        t.data = text;
        pre.bytes = utf8Len(text);
      }
    }

    function render(n) {
      if (!n.reconciled) show(n.out, chain(n, 'text'));
      show(n.think, chain(n, 'thinking'));
      n.stateEl.textContent = stateWord(n.state);
      n.sec.dataset.state = n.state;
      const tokens = n.tokens !== null ? `${n.tokens} tokens` : `${n.chunks} chunks`;
      const span = n.last && n.first ? (n.last - n.first) / 1000 : 0;
      const rate = span > 0 && n.chunks > 1 ? ` · ${((n.tokens !== null ? n.tokens : n.chunks) / span).toFixed(0)}/s` : '';
      const running = n.state === 'running' && !ended;
      const silent = running && n.last ? ` · silent ${secs(Date.now() - n.last)}` : '';
      const elapsed = n.first ? ` · ${secs((running ? Date.now() : n.last) - n.first)}` : '';
      n.figs.textContent = `${n.out.bytes || 0} bytes · ${tokens}${rate}${elapsed}${silent}`;
    }

    // Modes of attempts, read when a new attempt shows up (a re-attach
    // continues the text of the one before it).
    const modeReads = new Map();
    function readModes(n) {
      if (modeReads.get(n.id)) return;
      modeReads.set(n.id, true);
      api(`/api/runs/${enc(runID)}/nodes/${enc(n.id)}/attempts`).then((d) => {
        for (const a of d.attempts) n.modes.set(a.n, a.mode);
        render(n);
      }).catch(() => {}).finally(() => modeReads.set(n.id, false));
    }

    // reconcile sets a node's text to its output as the journal has it
    // once the node has its terminal evidence (a cached node streams none).
    async function reconcile(n) {
      try {
        const o = await api(`/api/runs/${enc(runID)}/nodes/${enc(n.id)}/output`);
        if (o.state === 'completed') {
          show(n.out, o.output);
          n.reconciled = true;
          if (o.thinking) show(n.think, o.thinking);
        }
      } catch (e) { /* the stream goes on; the next refresh tries again */ }
    }

    function diag(list, d) {
      const p = d.payload || {};
      list.append(el('li', {'data-code': d.code}, el('code', {}, d.code), ' ', p.message || p.name || '',
        el('time', {datetime: d.time}, ' ' + new Date(d.time).toLocaleTimeString())));
    }

    function apply(d) {
      if (!d.node) {
        if (d.kind === 'diagnostic') diag(runDiags, d);
        if (d.kind === 'diagnostic' && outcome(d.code)) refresh();
        return;
      }
      const n = node(d.node);
      const t = Date.parse(d.time);
      if (d.attempt > n.latest) {
        n.latest = d.attempt;
        if (d.attempt > 1 && !n.modes.has(d.attempt)) readModes(n);
      }
      const a = att(n, d.attempt);
      switch (d.kind) {
        case 'delta':
          a.text += d.payload.text;
          n.chunks++;
          n.first = n.first || t;
          n.last = t;
          if (n.state === 'pending') n.state = 'running';
          break;
        case 'reasoning':
          a.thinking += d.payload.text;
          n.last = t;
          break;
        case 'reset':
          a.text = ''; a.thinking = ''; a.reset = true;
          break;
        case 'usage':
          if (typeof d.payload.output_tokens === 'number') n.tokens = (n.tokens || 0) + d.payload.output_tokens;
          break;
        case 'done':
          // Terminal evidence: the node is complete.
          n.done = true;
          n.state = 'completed';
          n.step.textContent = '';
          reconcile(n);
          break;
        case 'diagnostic':
          n.codes.add(d.code);
          diag(n.diags, d);
          if (stepCodes.has(d.code)) {
            n.step.textContent = `${d.code} ${(d.payload && d.payload.message) || ''}`;
            if (n.state === 'running' || n.state === 'pending') n.state = 'recovering';
          } else if (d.code === 'NR101' || d.code === 'NR106' || d.code === 'NR107' || d.code === 'NR105') {
            n.step.textContent = `${d.code} ${(d.payload && d.payload.message) || ''}`;
          }
          if (outcome(d.code)) refresh();
          break;
      }
      if (n.state === 'recovering' && d.kind === 'delta') { n.state = 'running'; n.step.textContent = ''; }
      render(n);
    }

    // The status document: states as the journal has them (completed only
    // on terminal evidence), and the actions they justify.
    let refreshing = null;
    function refresh() {
      if (refreshing) return refreshing;
      refreshing = (async () => {
        try {
          doc = await api(`/api/runs/${enc(runID)}`);
          runID = doc.run_id;
          runStatus.textContent = doc.status + (doc.abandoned ? ' (its runner is gone)' : '');
          runStatus.className = 'st-' + doc.status;
          head.textContent = `graph ${doc.graph} · profile ${doc.profile} · started ${when(doc.started)}` + (doc.finished ? ` · finished ${when(doc.finished)}` : '');
          for (const s of doc.nodes) {
            const n = node(s.id);
            // A node reads completed only on its terminal evidence, which
            // the journal has when it says so.
            if (s.state === 'completed' && !n.reconciled) reconcile(n);
            if (s.state !== 'running' || n.state === 'pending') n.state = s.state;
            n.reason = s.error || s.reason || '';
            render(n);
          }
          actionsOf();
          figuresOf();
        } catch (e) { /* shown by the stream's state */ }
        refreshing = null;
      })();
      return refreshing;
    }

    async function figuresOf() {
      try {
        const a = await api(`/api/runs/${enc(runID)}/diagnose`);
        for (const na of a.nodes) if (nodes.has(na.id)) nodes.get(na.id).verdict.textContent = na.verdict;
        figures.replaceChildren(el('h2', {}, 'Figures'), ...a.summary.map((l) => el('p', {}, l)),
          el('p', {}, el('a', {href: `/api/runs/${enc(runID)}/report`}, 'The report'), ' (timeline, every attempt)'));
      } catch (e) { /* figures come with the next refresh */ }
    }

    // actionsOf offers what the journal justifies, and says why; nothing
    // it cannot justify.
    function actionsOf() {
      const out = [];
      const stopped = doc.status === 'interrupted' || doc.abandoned;
      const unfinished = doc.nodes.filter((s) => !['completed', 'skipped'].includes(s.state));
      const act = (label, attrs, why, fn) => out.push(el('div', {class: 'action'},
        el('button', Object.assign({type: 'button', disabled: acting, onclick: async () => {
          acting = true;
          for (const b of actions.querySelectorAll('button')) b.disabled = true;
          say.textContent = 'Sending…';
          try { say.textContent = await fn(); } catch (e) { say.textContent = e.message; }
          acting = false;
          actionsOf();
          refresh();
        }}, attrs), label), ' ', el('span', {}, why)));
      if (stopped || (doc.status === 'failed' && unfinished.length)) {
        act('Resume', {'data-action': 'resume'}, stopped
          ? 'The run was interrupted: resume re-attaches what is still running at the provider and continues the rest.'
          : 'The run failed with unfinished nodes: resume tries them again within their budgets.',
        async () => { await post(`/api/runs/${enc(runID)}/resume`, {}); follow(); return 'Resumed.'; });
      }
      for (const s of doc.nodes) {
        const n = nodes.get(s.id);
        const unsafe = n.codes.has('NR905') || s.state === 'attention' || /side.effects|unsafe/i.test(s.reason || s.error || '');
        if (unsafe && s.state !== 'completed' && doc.status !== 'running') {
          act(`Retry ${s.id}`, {'data-action': 'retry', 'data-node': s.id, class: 'warn'},
            `Its request may already have had side effects (side_effects: unsafe): sending it again may repeat them.`,
            async () => { await post(`/api/runs/${enc(runID)}/resume`, {retry: [s.id]}); follow(); return `Retrying ${s.id}.`; });
        }
      }
      const detached = doc.nodes.filter((s) => s.state === 'canceled' && nodes.get(s.id).codes.has('NR209'));
      if (stopped && detached.length) {
        act('Cancel at the provider', {'data-action': 'cancel'},
          `The interruption left ${detached.map((s) => s.id).join(', ')} running at the provider (and billing): cancel stops it; a later resume starts it again.`,
          async () => {
            const r = await post(`/api/runs/${enc(runID)}/cancel`, {nodes: detached.map((s) => s.id)});
            return r.cancelled.map((c) => `${c.node}: ${c.note}`).join('; ') || 'Nothing was running.';
          });
      }
      if (!out.length) {
        out.push(el('p', {class: 'note'}, doc.status === 'running' && !doc.abandoned
          ? 'The run is going: nothing to do.'
          : doc.status === 'completed' ? 'The run completed: nothing to do.' : 'Nothing here can be resumed or cancelled.'));
      }
      actions.replaceChildren(el('h2', {class: 'sr'}, 'Actions'), ...out, say);
    }

    // ---- the stream and its reconnection ----

    const kinds = ['delta', 'reasoning', 'diagnostic', 'ref', 'raw', 'reset', 'done', 'usage', 'mark'];
    function connect() {
      if (es) es.close();
      es = new EventSource(`/api/runs/${enc(runID)}/events?after=${lastSeq}`);
      for (const k of kinds) {
        es.addEventListener(k, (ev) => {
          const d = JSON.parse(ev.data);
          if (d.seq <= lastSeq) return; // seen: never shown twice
          lastSeq = d.seq;
          apply(d);
        });
      }
      es.addEventListener('open', () => { attempt = 0; setConn('live', 'live'); });
      es.addEventListener('end', () => {
        ended = true;
        es.close();
        setConn('ended', 'the run has ended');
        refresh();
        for (const n of nodes.values()) render(n);
      });
      es.addEventListener('error', () => {
        es.close(); // our backoff, not the browser's
        if (!ended) reconnect();
      });
    }

    // reconnect waits (capped exponential backoff, full jitter), probes the
    // server, and resumes the stream after the last event received; past 8
    // attempts it says so and waits for the Retry button.
    let timer = null;
    function reconnect() {
      clearTimeout(timer);
      attempt++;
      if (attempt > 8) {
        setConn('error', 'the server cannot be reached (8 attempts); what is shown is what was received');
        return;
      }
      setConn('reconnecting', `reconnecting (attempt ${attempt})`);
      const delay = Math.random() * Math.min(8000, 250 * 2 ** attempt);
      timer = setTimeout(async () => {
        try {
          await api(`/api/runs/${enc(runID)}`);
          connect();
        } catch (e) {
          reconnect();
        }
      }, delay);
    }

    function follow() {
      ended = false;
      attempt = 0;
      connect();
      refresh();
    }

    setInterval(() => { if (!ended) for (const n of nodes.values()) if (n.state === 'running') render(n); }, 1000);
    refresh().then(() => {
      if (!doc) {
        head.textContent = `No run ${arg} in this journal.`;
        setConn('error', 'no such run');
        return;
      }
      connect();
    });
  }
})();

// owc: the status panel of a chat's OpenClaw session (owc/owui/status_panel.py fills __DATA__, __BASE__, __PREFIX__ in
// one pass). A dialog "OpenClaw status" (Context, Rate limits, Goal, Sub-agents, Compact) filled live from owc's
// route `<base><chat>/live` (NDJSON: one view now and one after each change the Gateway reports), and a right-side
// drawer for one sub-agent (Overview, Transcript, Tools) live from `.../subagents/<task>/live`. Each stream is one
// fetch, aborted when its part closes. Escape and the backdrop close the drawer first, then the dialog. One panel per
// page: a second click focuses it. Every value the routes send is the Gateway's data: set with textContent only.
// The code returns at once ({shown}): the Action that sent it waits for nothing else.
const d = __DATA__;
const base = __BASE__ + encodeURIComponent(d.chat);
const rootId = __PREFIX__;
const already = document.getElementById(rootId);
if (already && already.__owc && already.dataset.owcChat === d.chat) {
  if (d.task) already.__owc.drawer(d.task); else already.__owc.dialog();
  return {shown: false};
}
if (already && already.__owc) already.__owc.close();
else if (already) already.remove();

const mk = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined && text !== null) e.textContent = String(text); return e; };
const headers = () => { const h = {}; const t = localStorage.getItem('token'); if (t) h['Authorization'] = 'Bearer ' + t; return h; };
const num = (v) => (typeof v === 'number' && isFinite(v) ? v : null);
const tokens = (n) => {
  if (n < 1000) return String(n);
  if (n < 1e6) return n >= 10000 ? Math.round(n / 1000) + 'k' : (n / 1000).toFixed(1).replace('.0', '') + 'k';
  return (n / 1e6).toFixed(1) + 'm';
};
const span = (ms) => {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return s + 's';
  const m = Math.floor(s / 60);
  if (m < 60) return m + 'm ' + (s % 60) + 's';
  const h = Math.floor(m / 60);
  return h < 48 ? h + 'h ' + (m % 60) + 'm' : Math.round(h / 24) + 'd';
};
const until = (ms) => {
  const m = Math.max(0, Math.round(ms / 60000));
  if (m < 60) return m + 'm';
  const h = Math.floor(m / 60);
  return h < 48 ? (m % 60 ? h + 'h ' + (m % 60) + 'm' : h + 'h') : Math.round(h / 24) + 'd';
};
const clock = (ms, seconds) => new Date(ms).toLocaleTimeString([], seconds ? {hour: '2-digit', minute: '2-digit', second: '2-digit'} : {hour: '2-digit', minute: '2-digit'});
const colour = (pct) => (pct >= 85 ? '#ef4444' : pct >= 60 ? '#f59e0b' : '#22c55e');
const bar = (pct) => {
  const track = mk('div', 'w-full rounded-full bg-gray-100 dark:bg-gray-800 overflow-hidden');
  Object.assign(track.style, {height: '6px', margin: '6px 0'});
  const fill = mk('div', '');
  const p = Math.max(0, Math.min(100, pct || 0));
  Object.assign(fill.style, {height: '100%', width: p + '%', background: colour(p), borderRadius: '9999px'});
  fill.dataset.colour = p >= 85 ? 'red' : p >= 60 ? 'amber' : 'green';
  track.appendChild(fill);
  return track;
};
const muted = 'text-xs text-gray-500 dark:text-gray-400';

// Leaving the chat (Open WebUI's router moves with pushState / replaceState, popstate on Back): one wrapper per page,
// shared with owc's question panel (the same event), tells every owc panel.
if (!window.__owcNavigation) {
  window.__owcNavigation = true;
  const tell = () => window.dispatchEvent(new Event('owc:navigated'));
  for (const name of ['pushState', 'replaceState']) {
    const original = history[name];
    history[name] = function () { const out = original.apply(this, arguments); tell(); return out; };
  }
  window.addEventListener('popstate', tell);
}
const chatPath = location.pathname;

// The backdrop holds the dialog and the drawer; it covers the page (a status view is looked at, then closed).
const root = mk('div', '');
root.id = rootId;
root.dataset.owcChat = d.chat;
Object.assign(root.style, {position: 'fixed', inset: '0', zIndex: '9999', background: 'rgba(0,0,0,0.45)',
  display: 'flex', justifyContent: 'center', alignItems: 'flex-start', overflowY: 'auto', padding: '8vh 1rem 1rem'});
const ticks = new Set();  // what shows the passing time (elapsed, resets in): redrawn each second while open
const timer = setInterval(() => ticks.forEach((f) => f()), 1000);  // presentation only: no run is decided by it
let dialogEl = null, dialogStream = null, drawerEl = null, drawerStream = null;

// One NDJSON stream: each line to onLine; a refused request's {detail} (or the HTTP status) to onRefused; the end
// (the server or the network closed it) to onEnd. Aborting the controller ends it quietly.
const follow = (url, controller, onLine, onRefused, onEnd) => {
  (async () => {
    let res;
    try {
      res = await fetch(url, {headers: headers(), credentials: 'same-origin', signal: controller.signal});
    } catch (e) { if (!controller.signal.aborted) onRefused('Could not reach owc: ' + e); return; }
    if (!res.ok) {
      let said = {};
      try { said = await res.json(); } catch (e) { said = {}; }
      onRefused((said && typeof said.detail === 'string' && said.detail) || ('owc answered HTTP ' + res.status));
      return;
    }
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, {stream: true});
        let cut;
        while ((cut = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, cut).trim();
          buffer = buffer.slice(cut + 1);
          if (!line) continue;
          let view;
          try { view = JSON.parse(line); } catch (e) { continue; }
          onLine(view);
        }
      }
    } catch (e) { if (controller.signal.aborted) return; }
    if (!controller.signal.aborted) onEnd();
  })();
};

// ------------------------------------------------------------------------------------------------ the dialog
const section = (title, part) => {
  const sec = mk('section', 'mb-4');
  sec.dataset.part = part;
  sec.appendChild(mk('div', 'text-xs font-semibold uppercase tracking-wide text-gray-500 dark:text-gray-400 mb-1', title));
  return sec;
};
const couldNot = (sec) => { const line = mk('div', 'text-sm text-gray-500 dark:text-gray-400', 'Could not read'); line.dataset.state = 'unread'; sec.appendChild(line); };

const fillContext = (ctx) => {
  const sec = section('Context', 'context');
  if (!ctx) { couldNot(sec); return sec; }
  const who = [ctx.provider, ctx.model].filter((v) => typeof v === 'string' && v).join(' · ');
  if (who) sec.appendChild(mk('div', 'text-sm font-medium', who));
  const used = num(ctx.used), window_ = num(ctx.window), pct = num(ctx.percent);
  if (used === null) {
    sec.appendChild(bar(0));
    sec.appendChild(mk('div', muted, 'Not fresh until the next reply' + (window_ ? ' · window ' + tokens(window_) + ' tokens' : '')));
  } else {
    sec.appendChild(bar(pct === null ? 0 : pct));
    sec.appendChild(mk('div', muted, tokens(used) + (window_ ? ' / ' + tokens(window_) : '') + ' tokens' + (pct === null ? '' : ' · ' + pct + '%')));
  }
  const extra = [];
  if (ctx.running) extra.push('A reply is running');
  if (num(ctx.compactions)) extra.push('Compacted ' + ctx.compactions + (ctx.compactions === 1 ? ' time' : ' times'));
  if (extra.length) sec.appendChild(mk('div', muted, extra.join(' · ')));
  return sec;
};

const fillGoal = (goal) => {
  const sec = section('Goal', 'goal');
  sec.appendChild(mk('div', 'text-sm', goal.objective));
  const usedT = num(goal.tokensUsed), budget = num(goal.tokenBudget);
  if (usedT !== null && budget) {
    sec.appendChild(bar((100 * usedT) / budget));
    sec.appendChild(mk('div', muted, tokens(usedT) + ' / ' + tokens(budget) + ' tokens of its budget'));
  } else if (usedT !== null) {
    sec.appendChild(mk('div', muted, tokens(usedT) + ' tokens used'));
  }
  return sec;
};

const fillLimits = (limits) => {
  const sec = section('Rate limits', 'limits');
  if (!limits) { couldNot(sec); return sec; }
  const windows = Array.isArray(limits.windows) ? limits.windows : [];
  if (!windows.length) {
    const none = mk('div', 'text-sm text-gray-500 dark:text-gray-400', 'No rate-limit data from the Gateway');
    none.dataset.state = 'none';
    sec.appendChild(none);
  }
  for (const w of windows) {
    const row = mk('div', 'mb-2');
    row.dataset.window = String(w.label);
    const head = mk('div', 'flex justify-between text-sm');
    head.appendChild(mk('span', 'font-medium', w.label));
    head.appendChild(mk('span', '', (num(w.usedPercent) ?? 0) + '% used'));
    row.appendChild(head);
    row.appendChild(bar(num(w.usedPercent) ?? 0));
    const reset = num(w.resetAtMs);
    if (reset !== null) {
      const when = mk('div', muted);
      const draw = () => { when.textContent = 'resets in ' + until(reset - Date.now()) + ' · ' + clock(reset, false); };
      draw();
      ticks.add(draw);
      row.appendChild(when);
    }
    sec.appendChild(row);
  }
  if (limits.summary) sec.appendChild(mk('div', muted, limits.summary));
  return sec;
};

const dot = (status) => {
  const e = mk('span', '');
  const c = status === 'running' ? '#22c55e' : status === 'queued' ? '#9ca3af' : status === 'failed' || status === 'timed_out' ? '#ef4444' : '#3b82f6';
  Object.assign(e.style, {display: 'inline-block', width: '8px', height: '8px', borderRadius: '9999px', background: c, flexShrink: '0', marginTop: '6px'});
  e.title = String(status || '');
  return e;
};
const elapsedOf = (item, el) => {
  const start = num(item.startedAtMs);
  if (start === null) return;
  const end = num(item.endedAtMs);
  const draw = () => { el.textContent = span((end ?? Date.now()) - start); };
  draw();
  if (end === null) ticks.add(draw);
};

const fillSubagents = (list) => {
  if (Array.isArray(list) && !list.length) return null;  // none running or queued: no section
  const sec = section(Array.isArray(list) ? 'Sub-agents (' + list.length + ')' : 'Sub-agents', 'subagents');
  if (!Array.isArray(list)) { couldNot(sec); return sec; }
  for (const item of list) {
    const row = mk('button', 'w-full text-left flex gap-2 items-start rounded-lg px-2 py-1.5 hover:bg-gray-50 dark:hover:bg-gray-850');
    row.type = 'button';
    row.dataset.task = String(item.id);
    row.appendChild(dot(item.status));
    const words = mk('div', 'flex-1 min-w-0');
    words.appendChild(mk('div', 'text-sm font-medium truncate', item.title || item.id));
    if (item.doing) words.appendChild(mk('div', muted + ' truncate', item.doing));
    row.appendChild(words);
    const el = mk('span', muted + ' tabular-nums');
    el.dataset.elapsed = '';
    elapsedOf(item, el);
    row.appendChild(el);
    row.addEventListener('click', () => openDrawer(String(item.id)));
    sec.appendChild(row);
  }
  return sec;
};

const openDialog = () => {
  if (dialogEl) { dialogEl.focus(); return; }
  const box = mk('div', 'rounded-2xl bg-white dark:bg-gray-900 text-gray-900 dark:text-gray-100 shadow-lg border border-gray-100 dark:border-gray-800 p-5');
  Object.assign(box.style, {width: 'min(32rem, 100%)', outline: 'none'});
  box.setAttribute('role', 'dialog');
  box.setAttribute('aria-modal', 'true');
  box.setAttribute('aria-label', 'OpenClaw status');
  box.tabIndex = -1;
  box.dataset.owcStatus = 'dialog';
  const head = mk('div', 'flex justify-between items-center mb-3');
  head.appendChild(mk('div', 'text-lg font-medium', 'OpenClaw status'));
  const x = mk('button', 'text-gray-500 hover:text-gray-900 dark:hover:text-white px-2 text-lg', '×');
  x.type = 'button'; x.setAttribute('aria-label', 'Close'); x.dataset.action = 'close';
  x.addEventListener('click', () => close());
  head.appendChild(x);
  box.appendChild(head);
  const body = mk('div', '');
  body.appendChild(mk('div', 'text-sm text-gray-500 dark:text-gray-400', 'Reading the session…'));
  box.appendChild(body);
  // Compact: the server says what happened (done, refused while a reply runs, nothing to compact, not allowed).
  const actions = mk('div', 'flex items-center gap-3 mt-2');
  const compact = mk('button', 'px-3.5 py-1.5 text-sm font-medium bg-gray-100 hover:bg-gray-200 text-gray-800 dark:bg-gray-850 dark:hover:bg-gray-800 dark:text-white rounded-full disabled:opacity-60', 'Compact');
  compact.type = 'button'; compact.dataset.action = 'compact';
  const said = mk('div', 'text-sm text-gray-600 dark:text-gray-300 flex-1');
  said.setAttribute('role', 'status'); said.dataset.part = 'compact-line';
  actions.appendChild(compact); actions.appendChild(said);
  box.appendChild(actions);
  const foot = mk('div', muted + ' mt-3');
  foot.dataset.part = 'footer';
  box.appendChild(foot);
  compact.addEventListener('click', async () => {
    if (compact.disabled) return;
    compact.disabled = true; compact.textContent = 'Compacting…'; said.textContent = ''; said.dataset.ok = '';
    try {
      const res = await fetch(base + '/compact', {method: 'POST', headers: headers(), credentials: 'same-origin'});
      let out = {};
      try { out = await res.json(); } catch (e) { out = {}; }
      let line = (out && typeof out.detail === 'string' && out.detail) || ('Compact failed: owc answered HTTP ' + res.status);
      if (res.ok && num(out.tokensBefore) !== null && num(out.tokensAfter) !== null) line += ' ' + tokens(out.tokensBefore) + ' → ' + tokens(out.tokensAfter) + ' tokens';
      said.textContent = line;
      said.dataset.ok = res.ok ? 'yes' : 'no';
      said.dataset.code = String(res.status);
    } catch (e) {
      said.textContent = 'Compact could not be sent: ' + e; said.dataset.ok = 'no';
    }
    compact.disabled = false; compact.textContent = 'Compact';
  });
  const render = (view) => {
    for (const f of [...ticks]) if (f.owner === 'dialog') ticks.delete(f);
    const before = new Set(ticks);
    const parts = [fillContext(view.context), fillLimits(view.limits)];
    if (view.goal) parts.splice(1, 0, fillGoal(view.goal));
    const subs = fillSubagents(view.subagents);
    if (subs) parts.push(subs);
    for (const f of ticks) if (!before.has(f)) f.owner = 'dialog';
    body.replaceChildren(...parts);
    foot.textContent = 'Updated ' + clock(Date.now(), true);
  };
  const controller = new AbortController();
  dialogStream = controller;
  follow(base + '/live', controller, render, (detail) => {
    const line = mk('div', 'text-sm text-red-600 dark:text-red-400', detail);
    line.setAttribute('role', 'alert');
    body.replaceChildren(line);
    compact.disabled = true;
  }, () => { foot.textContent += ' · live updates ended: reopen to follow again'; });
  dialogEl = box;
  root.insertBefore(box, root.firstChild);
  box.focus();
};

// ------------------------------------------------------------------------------------------------ the drawer
const openDrawer = (taskId) => {
  closeDrawer();
  const pane = mk('aside', 'bg-white dark:bg-gray-900 text-gray-900 dark:text-gray-100 shadow-lg border-l border-gray-100 dark:border-gray-800');
  Object.assign(pane.style, {position: 'fixed', top: '0', right: '0', bottom: '0', width: 'min(36rem, 100%)',
    display: 'flex', flexDirection: 'column', zIndex: '10000', outline: 'none'});
  pane.id = rootId + '-drawer';
  pane.setAttribute('role', 'dialog');
  pane.setAttribute('aria-label', 'Sub-agent');
  pane.tabIndex = -1;
  pane.dataset.task = taskId;
  pane.addEventListener('click', (e) => e.stopPropagation());
  const head = mk('div', 'flex items-start gap-2 p-4 border-b border-gray-100 dark:border-gray-800');
  const title = mk('div', 'flex-1 min-w-0');
  const name = mk('div', 'text-lg font-medium break-words', 'Sub-agent');
  name.dataset.part = 'title';
  const sub = mk('div', muted, '');
  title.appendChild(name); title.appendChild(sub);
  head.appendChild(title);
  const x = mk('button', 'text-gray-500 hover:text-gray-900 dark:hover:text-white px-2 text-lg', '×');
  x.type = 'button'; x.setAttribute('aria-label', 'Close the sub-agent'); x.dataset.action = 'close-drawer';
  x.addEventListener('click', () => closeDrawer(true));
  head.appendChild(x);
  pane.appendChild(head);
  const tabs = mk('div', 'flex gap-1 px-4 pt-2 border-b border-gray-100 dark:border-gray-800');
  pane.appendChild(tabs);
  const panes = {};
  let shown = 'overview';
  const buttons = {};
  for (const [key, label] of [['overview', 'Overview'], ['transcript', 'Transcript'], ['tools', 'Tools']]) {
    const b = mk('button', 'px-3 py-1.5 text-sm rounded-t-lg', label);
    b.type = 'button'; b.dataset.tab = key;
    b.addEventListener('click', () => { shown = key; show(); });
    tabs.appendChild(b); buttons[key] = b;
    const p = mk('div', 'p-4 text-sm');
    Object.assign(p.style, {flex: '1', overflowY: 'auto', minHeight: '0'});
    p.dataset.pane = key;
    panes[key] = p;
    pane.appendChild(p);
  }
  // The transcript follows its newest line until the person scrolls up; then it keeps their place.
  let following = true;
  panes.transcript.addEventListener('scroll', () => {
    const t = panes.transcript;
    if (t.clientHeight) following = t.scrollHeight - t.scrollTop - t.clientHeight < 8;
  });
  const show = () => {
    for (const key in panes) {
      panes[key].style.display = key === shown ? 'block' : 'none';
      buttons[key].className = 'px-3 py-1.5 text-sm rounded-t-lg ' + (key === shown ? 'font-medium bg-gray-100 dark:bg-gray-800' : 'text-gray-500 dark:text-gray-400');
    }
    if (shown === 'transcript' && following) panes.transcript.scrollTop = panes.transcript.scrollHeight;
  };
  show();
  panes.overview.appendChild(mk('div', muted, 'Reading the sub-agent…'));
  const label = (text) => mk('div', 'text-xs font-semibold uppercase tracking-wide text-gray-500 dark:text-gray-400 mt-3 mb-1', text);
  const pre = (text, cls) => { const e = mk('pre', 'whitespace-pre-wrap break-words text-xs rounded-lg p-2 bg-gray-50 dark:bg-gray-850 ' + (cls || ''), text); return e; };
  const pretty = (text) => { try { return JSON.stringify(JSON.parse(text), null, 2); } catch (e) { return String(text); } };
  const render = (v) => {
    for (const f of [...ticks]) if (f.owner === 'drawer') ticks.delete(f);
    const before = new Set(ticks);
    if (v.gone) {
      sub.textContent = 'This sub-agent is gone from the Gateway.';
      return;
    }
    name.textContent = v.title || v.id || 'Sub-agent';
    sub.textContent = [v.status, v.agent ? 'agent ' + v.agent : null].filter(Boolean).join(' · ');
    // Overview
    const o = [];
    const status = mk('div', 'flex items-center gap-2');
    status.appendChild(dot(v.status));
    status.appendChild(mk('span', 'font-medium', v.status || 'unknown'));
    if (v.doing) status.appendChild(mk('span', muted, v.doing));
    o.push(status);
    if (v.error) { o.push(label('Error')); o.push(mk('div', 'text-red-600 dark:text-red-400 break-words', v.error)); }
    if (v.summary) { o.push(label('Summary')); o.push(mk('div', 'break-words', v.summary)); }
    const start = num(v.startedAtMs);
    if (start !== null) {
      const when = mk('div', muted + ' mt-2');
      when.dataset.part = 'ran';
      const end = num(v.endedAtMs);
      const draw = () => { when.textContent = 'Started ' + clock(start, true) + ' · ran ' + span((end ?? Date.now()) - start); };
      draw();
      if (end === null) ticks.add(draw);
      o.push(when);
    }
    if (num(v.toolUses)) o.push(mk('div', muted, v.toolUses + (v.toolUses === 1 ? ' tool use' : ' tool uses')));
    if (v.context) {
      o.push(label('Model'));
      const who = [v.context.provider, v.context.model].filter((s) => typeof s === 'string' && s).join(' · ');
      if (who) o.push(mk('div', 'font-medium', who));
      if (num(v.context.used) !== null) {
        o.push(bar(num(v.context.percent) ?? 0));
        o.push(mk('div', muted, tokens(v.context.used) + (num(v.context.window) ? ' / ' + tokens(v.context.window) : '') + ' tokens' + (num(v.context.percent) === null ? '' : ' · ' + v.context.percent + '%')));
      } else {
        o.push(mk('div', muted, 'Context not fresh until its next reply'));
      }
    }
    if (v.prompt) { o.push(label('Task')); o.push(pre(v.prompt)); }
    if (v.result) { o.push(label('Result')); o.push(pre(v.result)); }
    panes.overview.replaceChildren(...o);
    // Transcript: keeps its place across updates (at the bottom it follows the new lines).
    const t = panes.transcript;
    const top = t.scrollTop;
    const lines = (Array.isArray(v.messages) ? v.messages : []).map((m) => {
      const row = mk('div', 'mb-3');
      row.dataset.role = String(m.role);
      row.appendChild(mk('div', 'text-xs font-semibold text-gray-500 dark:text-gray-400 mb-0.5', m.role === 'assistant' ? 'Sub-agent' : m.role === 'user' ? 'Task' : String(m.role)));
      row.appendChild(mk('div', 'whitespace-pre-wrap break-words', m.text));
      return row;
    });
    t.replaceChildren(...(lines.length ? lines : [mk('div', muted, 'No messages yet')]));
    t.scrollTop = following ? t.scrollHeight : top;
    // Tools
    const tools = Array.isArray(v.tools) ? v.tools : [];
    buttons.tools.textContent = 'Tools (' + tools.length + ')';
    const tt = panes.tools;
    const toolsTop = tt.scrollTop;
    tt.replaceChildren(...(tools.length ? tools.map((tool) => {
      const row = mk('div', 'mb-3 pb-3 border-b border-gray-100 dark:border-gray-800');
      row.dataset.tool = String(tool.name);
      if (tool.error) row.dataset.failed = 'true';
      const h = mk('div', 'font-medium ' + (tool.error ? 'text-red-600 dark:text-red-400' : ''), (tool.error ? '❌ ' : '🔧 ') + tool.name + (tool.error ? ' (failed)' : ''));
      row.appendChild(h);
      if (tool.arguments) row.appendChild(pre(pretty(tool.arguments)));
      if (tool.result !== null && tool.result !== undefined) row.appendChild(pre(tool.result, tool.error ? 'text-red-600 dark:text-red-400' : ''));
      else row.appendChild(mk('div', muted, 'running…'));
      return row;
    }) : [mk('div', muted, 'No tools used yet')]));
    tt.scrollTop = toolsTop;
    for (const f of ticks) if (!before.has(f)) f.owner = 'drawer';
  };
  const controller = new AbortController();
  drawerStream = controller;
  follow(base + '/subagents/' + encodeURIComponent(taskId) + '/live', controller, render, (detail) => {
    const line = mk('div', 'text-red-600 dark:text-red-400', detail);
    line.setAttribute('role', 'alert');
    panes.overview.replaceChildren(line);
  }, () => { sub.textContent += ' · live updates ended'; });
  drawerEl = pane;
  root.appendChild(pane);
  pane.focus();
};

const closeDrawer = (focusDialog) => {
  if (drawerStream) drawerStream.abort();
  drawerStream = null;
  for (const f of [...ticks]) if (f.owner === 'drawer') ticks.delete(f);
  if (drawerEl) drawerEl.remove();
  drawerEl = null;
  if (focusDialog && !dialogEl) close();
  else if (focusDialog && dialogEl) dialogEl.focus();
};

// ------------------------------------------------------------------------------------------------ closing
const onKey = (e) => {
  if (e.key !== 'Escape') return;
  e.stopPropagation(); e.preventDefault();  // the panel's Escape, not also Open WebUI's (which would stop a reply)
  if (drawerEl) closeDrawer(true); else close();
};
const leave = () => { if (location.pathname !== chatPath) close(); };
const close = () => {
  if (dialogStream) dialogStream.abort();
  if (drawerStream) drawerStream.abort();
  clearInterval(timer);
  ticks.clear();
  window.removeEventListener('keydown', onKey, true);
  window.removeEventListener('owc:navigated', leave);
  root.remove();
};
window.addEventListener('keydown', onKey, true);
window.addEventListener('owc:navigated', leave);
root.addEventListener('click', (e) => {
  if (e.target !== root) return;
  if (drawerEl) closeDrawer(true); else close();
});
root.__owc = {dialog: openDialog, drawer: openDrawer, close};
document.body.appendChild(root);
if (d.task) openDrawer(d.task); else openDialog();
return {shown: true};

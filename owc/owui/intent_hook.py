"""The page intent hook: the JavaScript owc runs in an Open WebUI 0.12.4 tab to learn which control stopped a task.

Open WebUI runs an ``execute`` event's ``data.code`` as the body of an async function in the tab, when the event's
chat is the tab's open chat and its message is in the tab's history (frontend ``Chat.svelte``, ``chatEventHandler``);
an event *call* returns the function's result (reference ``pipe-runtime-0.12.4.md`` section 6).

**What the hook records.** It wraps ``window.fetch`` once per page. Every stop the page makes is a
``POST /api/tasks/chat/<chat>/stop`` (``stopTasksByChatId``), called synchronously inside the click or key handler
that asked for it (``stopResponse`` reaches the ``fetch`` before its first ``await``), so ``window.event`` is the
user's own gesture. The hook records one entry per stop call: ``send_now`` when that gesture's button is a queued
message's "Send now" button, ``stop`` for anything else (the Stop button, Escape, an interrupting send, the call
overlay, a stop with no gesture). Language-free: the "Send now" button is recognized by its icon (the arrow path
of ``QueuedMessageItem.svelte``), with its English label as a second sign, never by translated text alone.

**What owc asks.** Entries are numbered per page; each owc process (an *asker*) has its own mark of what it has
read, so two Open WebUI processes asking the same tab both see a Stop, and an entry is never counted twice by one.
The question installs the hook when it is missing (a reload dropped it) and says so (``hook: false``).

The hook keeps at most ``KEEP`` entries per chat. Everything it stores lives in the page's memory only.
"""

from __future__ import annotations

import json

#: The "Send now" button's icon (Open WebUI 0.12.4 ``QueuedMessageItem.svelte``, a Heroicons arrow-up path).
SEND_NOW_ICON = "M4.5 10.5 12 3"
#: Its English label, a second sign for a version whose icon differs.
SEND_NOW_LABEL = "Send now"
#: Entries kept per chat in a page.
KEEP = 16
#: The page global (one per tab): versioned, so a later owc can recognize an older hook.
GLOBAL = "__owcIntentV1"

_HOOK = """
const owcHook = () => {
  const existing = window[GLOBAL];
  if (existing) return [existing, true];
  const s = {n: 0, recs: Object.create(null), seen: Object.create(null)};
  const kindOf = (ev) => {
    const t = ev && ev.target;
    const b = t && t.closest ? t.closest('button') : null;
    if (!b) return 'stop';
    const p = b.querySelector('path');
    const d = (p && p.getAttribute('d')) || '';
    return d.startsWith(SEND_NOW_ICON) || b.getAttribute('aria-label') === SEND_NOW_LABEL ? 'send_now' : 'stop';
  };
  const original = window.fetch;
  window.fetch = function (input, init) {
    try {
      const url = typeof input === 'string' ? input : (input && input.url) || String(input);
      const m = /\\/api\\/tasks\\/chat\\/([^/?#]+)\\/stop(?:[?#]|$)/.exec(url);
      if (m) {
        const chat = decodeURIComponent(m[1]);
        const list = s.recs[chat] || (s.recs[chat] = []);
        list.push({n: ++s.n, kind: kindOf(window.event)});
        if (list.length > KEEP) list.splice(0, list.length - KEEP);
      }
    } catch (e) {}
    return original.apply(this, arguments);
  };
  window[GLOBAL] = s;
  return [s, false];
};
"""


def _prelude() -> str:
    consts = {
        "GLOBAL": GLOBAL,
        "SEND_NOW_ICON": SEND_NOW_ICON,
        "SEND_NOW_LABEL": SEND_NOW_LABEL,
        "KEEP": KEEP,
    }
    return "".join(f"const {name} = {json.dumps(value)};\n" for name, value in consts.items())


def install_code(asker: str, chat_id: str, *, fresh: bool) -> str:
    """Install the hook (a no-op when the page has it). The asker's mark for the chat starts at "now" in a tab
    where it has none (stops made before are not about its runs); ``fresh`` moves it to "now" in every tab (its
    first writer on the chat)."""
    return (
        _prelude()
        + _HOOK
        + f"const ASKER = {json.dumps(asker)}; const CHAT = {json.dumps(chat_id)}; const FRESH = {json.dumps(fresh)};\n"
        + """
const [s] = owcHook();
const a = s.seen[ASKER] || (s.seen[ASKER] = Object.create(null));
if (FRESH || !(CHAT in a)) a[CHAT] = s.n;
return {hook: true};
"""
    )


def ask_code(asker: str, chat_id: str) -> str:
    """Ask the page which controls made the stop calls it sent for the chat since this asker last asked."""
    return (
        _prelude()
        + _HOOK
        + f"const ASKER = {json.dumps(asker)}; const CHAT = {json.dumps(chat_id)};\n"
        + """
const [s, had] = owcHook();
const a = s.seen[ASKER] || (s.seen[ASKER] = Object.create(null));
const recs = s.recs[CHAT] || [];
// Never asked by this asker here (a tab the hook reached only now): only its newest stop can be this cancel's.
const from = CHAT in a ? a[CHAT] : (recs.length ? recs[recs.length - 1].n - 1 : s.n);
const kinds = recs.filter((r) => r.n > from).map((r) => r.kind);
a[CHAT] = s.n;
return {hook: had, kinds: kinds};
"""
    )

"""The page intent hook: the JavaScript owc puts in every Open WebUI 0.12.4 tab so each stop request says which
control made it (issue 25, item 1; the rule that reads it is ``owc.rules.intent``).

**What it does.** It wraps ``window.fetch`` once per page. Every stop the page makes is a
``POST /api/tasks/chat/<chat>/stop`` (``stopTasksByChatId``), called synchronously inside the click or key handler
that asked for it (``stopResponse`` reaches the ``fetch`` before its first ``await``), so ``window.event`` is the
user's own gesture (measured: ``click`` on "Send now" and on Stop, ``keydown`` Escape). The hook adds the header
``X-OWC-Stop-Intent`` to that request: ``send_now`` when the gesture's button is a queued message's "Send now"
button, ``stop`` for anything else (the Stop button, Escape, an interrupting send, the call overlay, a stop with no
gesture). Language-free: the "Send now" button is recognized by its icon (the arrow path of
``QueuedMessageItem.svelte``), with its English label as a second sign, never by translated text alone. Nothing
is asked of the tab afterwards, and nothing is stored in it beyond a count for diagnosis.

**How it reaches every tab** (``owc.owui.page``): served with the page, appended to Open WebUI's own
``/static/loader.js`` (which ``index.html`` loads before the app, at a URL versioned by ``VERSION`` so a browser's
cached copy of the empty file is not used); for a page loaded before owc was installed, sent as an ``execute``
event when the page opens a chat, and when owc introduces a message to the tabs (``install_code``). The same code
either way: a page runs it once (``GLOBAL``).
"""

from __future__ import annotations

import hashlib
import json

from owc.rules.intent import HEADER, SEND_NOW, STOP

#: The "Send now" button's icon (Open WebUI 0.12.4 ``QueuedMessageItem.svelte``, a Heroicons arrow-up path).
SEND_NOW_ICON = "M4.5 10.5 12 3"
#: Its English label, a second sign for a version whose icon differs.
SEND_NOW_LABEL = "Send now"
#: The page global (one per tab): versioned, so a later owc can tell an older hook from its own. V1 (issue 12's
#: hook, which only recorded stops for a question owc no longer asks) may still sit in a tab open across an
#: upgrade; it wraps ``fetch`` too, and does no harm under this one.
GLOBAL = "__owcIntentV2"

_BODY = """
(() => {
  if (window[GLOBAL]) return;
  const STOP_URL = /\\/api\\/tasks\\/chat\\/[^/?#]+\\/stop(?:[?#]|$)/;
  const kindOf = (ev) => {
    const t = ev && ev.target;
    const b = t && t.closest ? t.closest('button') : null;
    if (!b) return STOP;
    const p = b.querySelector('path');
    const d = (p && p.getAttribute('d')) || '';
    return d.startsWith(SEND_NOW_ICON) || b.getAttribute('aria-label') === SEND_NOW_LABEL ? SEND_NOW : STOP;
  };
  const s = {via: VIA, tagged: 0, last: null};
  const original = window.fetch;
  window.fetch = function (input, init) {
    try {
      const url = typeof input === 'string' ? input : (input && input.url) || String(input);
      if (STOP_URL.test(url)) {
        const kind = kindOf(window.event);
        const options = Object.assign({}, init || {});
        const headers = new Headers(options.headers || (input instanceof Request ? input.headers : undefined));
        headers.set(HEADER, kind);
        options.headers = headers;
        s.tagged += 1;
        s.last = kind;
        return original.call(this, input, options);
      }
    } catch (e) {}
    return original.apply(this, arguments);
  };
  window[GLOBAL] = s;
})();
"""


def _script(via: str) -> str:
    consts = {
        "GLOBAL": GLOBAL,
        "HEADER": HEADER,
        "STOP": STOP,
        "SEND_NOW": SEND_NOW,
        "SEND_NOW_ICON": SEND_NOW_ICON,
        "SEND_NOW_LABEL": SEND_NOW_LABEL,
        "VIA": via,
    }
    prelude = "".join(f"const {name} = {json.dumps(value)};\n" for name, value in consts.items())
    return "{\n" + prelude + _BODY + "}\n"  # a block: its consts stay out of the page's scope


#: The hook as served with the page (appended to Open WebUI's own ``loader.js``).
LOADER_SCRIPT = "/* owc: tags each stop request with the control that made it (Stop or Send now) */\n" + _script(
    "loader"
)
#: Changes whenever the hook does: the ``loader.js`` URL carries it, so browsers fetch the new one.
VERSION = hashlib.sha256(LOADER_SCRIPT.encode()).hexdigest()[:12]


def install_code() -> str:
    """The body of an ``execute`` event that installs the hook (a no-op in a tab that has it); the tab answers
    whether it had it."""
    return f"const had = !!window[{json.dumps(GLOBAL)}];\n" + _script("execute") + "return {hook: had};\n"

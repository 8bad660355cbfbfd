// owc: the Gateway's question as a dialog (owc/owui/question_dialog.py fills __DATA__, __PATH__, __PREFIX__ in one
// pass). Single select: radio buttons; multi select: check boxes; "Other": a text field (a password field for a
// secret question); Escape inside the panel or "Dismiss" cancels the question; "Send" posts the answers. A refused
// answer keeps the panel open with the server's line under the buttons, unless the question has ended (409) or is
// not this person's (403): then the panel goes, saying why. The panel belongs to its chat: it goes when the page
// shows another chat (Open WebUI then drops that chat's events, its close included), and comes back with the
// chat (owc shows what waits when a tab opens a chat).
const q = __DATA__;
const prefix = __PREFIX__;
const elId = prefix + q.id;
const chatPath = '/c/' + q.chat;
if (document.getElementById(elId) || (q.chat && location.pathname !== chatPath)) return {shown: false};
const mk = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; };
// Leaving the chat: Open WebUI's router moves with history.pushState / replaceState (and popstate on Back). One
// wrapper per page tells every panel; each removes itself when the page is no longer on its chat.
if (!window.__owcNavigation) {
  window.__owcNavigation = true;
  const tell = () => window.dispatchEvent(new Event('owc:navigated'));
  for (const name of ['pushState', 'replaceState']) {
    const original = history[name];
    history[name] = function () { const out = original.apply(this, arguments); tell(); return out; };
  }
  window.addEventListener('popstate', tell);
}
// The panels share one column above the composer, not a modal over the page: the reply stays readable and the Stop
// button (and Open WebUI's own Escape, from outside a panel) stays reachable while a question waits.
let column = document.getElementById('owc-questions');
if (!column) {
  column = mk('div', '');
  column.id = 'owc-questions';
  Object.assign(column.style, {position: 'fixed', left: '50%', transform: 'translateX(-50%)', bottom: '120px',
    width: 'min(32rem, calc(100% - 2rem))', zIndex: '60', display: 'flex', flexDirection: 'column', gap: '8px',
    maxHeight: '70vh', overflowY: 'auto'});
  document.body.appendChild(column);
}
const root = mk('div', '');
root.id = elId;
root.setAttribute('role', 'dialog');
root.setAttribute('aria-modal', 'false');
root.setAttribute('aria-label', 'A question from the agent');
root.dataset.owcQuestion = q.id;
root.dataset.owcChat = q.chat;
const leave = () => {
  if (location.pathname !== chatPath) { root.remove(); window.removeEventListener('owc:navigated', leave); }
};
window.addEventListener('owc:navigated', leave);
const box = mk('div', 'rounded-2xl bg-white dark:bg-gray-900 text-gray-900 dark:text-gray-100 shadow-lg border border-gray-100 dark:border-gray-800 p-5');
root.appendChild(box);
box.appendChild(mk('div', 'text-lg font-medium mb-1', (q.agent ? q.agent + ' asks' : 'The agent asks')));
if (q.expiresAtMs) {
  const t = new Date(q.expiresAtMs);
  box.appendChild(mk('div', 'text-xs text-gray-500 mb-3', 'Waiting for your answer until ' + t.toLocaleTimeString([], {hour: '2-digit', minute: '2-digit'})));
}
const fields = [];
q.questions.forEach((item, n) => {
  const sec = mk('fieldset', 'mb-4');
  sec.dataset.question = item.id;
  if (item.header) sec.appendChild(mk('legend', 'text-xs font-semibold uppercase tracking-wide text-gray-500 mb-1', item.header));
  sec.appendChild(mk('div', 'text-sm mb-2', item.question));
  const name = elId + '-' + n;
  const inputs = [];
  item.options.forEach((opt) => {
    const row = mk('label', 'flex items-start gap-2 py-1 cursor-pointer text-sm');
    const input = mk('input', 'mt-1');
    input.type = item.multi ? 'checkbox' : 'radio';
    input.name = name;
    input.value = opt.label;
    row.appendChild(input);
    const words = mk('span', '');
    words.appendChild(mk('span', 'font-medium', opt.label));
    if (opt.description) words.appendChild(mk('span', 'block text-xs text-gray-500', opt.description));
    row.appendChild(words);
    sec.appendChild(row);
    inputs.push(input);
  });
  let other = null;
  if (item.other) {
    other = mk('input', 'mt-1 w-full rounded-lg px-3 py-2 text-sm bg-gray-50 dark:bg-gray-850 dark:text-gray-200 outline-hidden border border-gray-100 dark:border-gray-800');
    other.type = item.secret ? 'password' : 'text';
    other.autocomplete = 'off';
    other.placeholder = item.options.length ? 'Other: your own answer' : 'Your answer';
    other.setAttribute('aria-label', (item.header || item.question) + ': other answer');
    if (!item.multi) other.addEventListener('input', () => { if (other.value.trim()) inputs.forEach((i) => { i.checked = false; }); });
    if (!item.multi) inputs.forEach((i) => i.addEventListener('change', () => { if (i.checked) other.value = ''; }));
    sec.appendChild(other);
  }
  fields.push({item, inputs, other});
  box.appendChild(sec);
});
const note = mk('div', 'text-sm text-red-600 dark:text-red-400 mb-2');
note.setAttribute('role', 'alert');
box.appendChild(note);
const buttons = mk('div', 'flex justify-end gap-2');
const dismiss = mk('button', 'px-3.5 py-1.5 text-sm font-medium bg-gray-100 hover:bg-gray-200 text-gray-800 dark:bg-gray-850 dark:hover:bg-gray-800 dark:text-white rounded-full', 'Dismiss');
const send = mk('button', 'px-3.5 py-1.5 text-sm font-medium bg-black hover:bg-gray-900 text-white dark:bg-white dark:text-black dark:hover:bg-gray-100 rounded-full', 'Send');
dismiss.type = 'button'; send.type = 'button';
dismiss.dataset.action = 'dismiss'; send.dataset.action = 'send';
buttons.appendChild(dismiss); buttons.appendChild(send);
box.appendChild(buttons);
let busy = false;
const post = async (body) => {
  if (busy) return;
  busy = true; send.disabled = true; dismiss.disabled = true; note.textContent = '';
  try {
    const headers = {'Content-Type': 'application/json'};
    const token = localStorage.getItem('token');
    if (token) headers['Authorization'] = 'Bearer ' + token;
    const res = await fetch(__PATH__ + encodeURIComponent(q.id), {method: 'POST', headers, body: JSON.stringify(body), credentials: 'same-origin'});
    let said = {};
    try { said = await res.json(); } catch (e) { said = {}; }
    if (res.ok) { root.dataset.closedBy = 'me'; root.remove(); return; }
    if (res.status === 409 || res.status === 403) {
      // Ended (answered in another tab, dismissed, expired) or not this person's: nothing here can change that.
      box.replaceChildren(mk('div', 'text-sm text-gray-600 dark:text-gray-300', said.detail || 'This question is closed.'));
      root.dataset.closedBy = 'server';
      setTimeout(() => root.remove(), 4000);  // the page's own: how long the line stays readable, nothing of the run's
      return;
    }
    note.textContent = said.detail || ('The answer was not taken (' + res.status + ').');
  } catch (e) {
    note.textContent = 'The answer could not be sent: ' + e;
  }
  busy = false; send.disabled = false; dismiss.disabled = false;
};
// Escape inside the panel dismisses the question (and is not also Open WebUI's Stop); outside it, it is Open WebUI's.
const onKey = (e) => {
  if (e.key === 'Escape') { e.stopPropagation(); e.preventDefault(); post({cancel: true}); }
};
root.addEventListener('keydown', onKey);
dismiss.addEventListener('click', () => post({cancel: true}));
send.addEventListener('click', () => {
  const answers = {};
  for (const f of fields) {
    const values = f.inputs.filter((i) => i.checked).map((i) => i.value);
    if (f.other && f.other.value.trim()) values.push(f.other.value.trim());
    if (!values.length) { note.textContent = 'Please answer “' + (f.item.header || f.item.question) + '”.'; return; }
    answers[f.item.id] = values;
  }
  post({answers});
});
column.appendChild(root);
// Focus the question only when nothing else has it: a person typing in the composer keeps their keys.
const active = document.activeElement;
const first = root.querySelector('input');
if (first && (!active || active === document.body)) first.focus();
return {shown: true};

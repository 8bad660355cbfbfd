"""``owc owui install``: put owc's two Function files into a running Open WebUI, through its admin API.

What it does, each step reported (reference ``pipe-runtime-0.12.4.md`` section 1):

1. signs in as an admin (``POST /api/v1/auths/signin``);
2. for the Pipe (``openclaw``), the startup Event (``openclaw_startup``), the thinking Filter
   (``openclaw_thinking``, issue 28) and the status Action (``openclaw_status``, issue 29): creates the Function,
   or updates its content **in place**
   (``POST /api/v1/functions/id/{id}/update``), which leaves its saved Valves as they are;
3. activates each (a new Function is stored inactive; ``toggle`` flips it, so only when it is off). The Filter and
   the Action are never made global (they would show for every model of every person); one an admin made global is
   said, and left;
4. sets the Valves given on the command line (the Gateway URL, the agent, the token *file*), merged over the saved
   ones; the token itself is never passed on a command line, printed or logged;
5. lists the models (``GET /api/models``): Open WebUI refreshes its model list only then, and a chat with a
   model it has not listed fails with "Model not found";
6. attaches the Filter and the Action to each of owc's models listed: a non-global Filter applies only to a model
   whose row lists it in ``meta.filterIds``, a non-global Action only to one listing it in ``meta.actionIds``
   (``utils/models.py``), and a Pipe's models have no row until an admin edits one, so the installer writes what
   ticking them in Admin > Models writes: a row for the model id (no base model: it only adds settings to the
   Pipe's model) with the Filter in ``meta.filterIds`` and the Action in ``meta.actionIds``, or each added to the
   row there is (its other settings kept, an id the admin added kept). Then the models are listed again (the
   toggle and the button show from that list on). Gateway models listed later (another whitelist) get them from
   the next install, or from the admin.

``apply`` (issue 31, configuration as code: ``owc owui install --config FILE`` or the environment form) does the
same steps from an ``install_config.InstallSpec``, but compares first (``install_plan``): only what differs is
written, one line per change, "nothing changed" when applied again, ``--dry-run`` the same lines as a plan. It
waits for Open WebUI to answer (``wait_for_open_webui``) and, before listing the models, for owc's hello
(``wait_for_hello``: until then the Pipe lists only its base entry). ``install`` stays for ``owc owui migrate``.

Blocking HTTP (urllib, no new dependency): a command-line tool, run once, outside any event loop.

**No redirect is followed** (issue 24): the sign-in carries the admin's password and every later call the admin's
token, and urllib's own redirect handling sends the ``Authorization`` header on to whatever host a ``Location``
names (and turns a ``POST`` into a body-less ``GET`` on a 301 / 302). A redirect means ``--url`` is not the
address Open WebUI's API answers on (``http`` to ``https``, a proxy's path, a sign-in portal), so the install stops
with one line naming the address the redirect points at, to pass as ``--url`` instead. Same-origin redirects are
refused too: following them would gain nothing the right ``--url`` does not, and the same rule everywhere is
simpler to trust.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any

import attrs

from owc.owui import models
from owc.owui.install_plan import Change, Found, Step, global_warning, plan_function
from owc.owui.pipe import EVENT_ID, PIPE_ID
from owc.owui.status_action import ACTION_ID
from owc.owui.status_action import NAME as ACTION_NAME
from owc.owui.thinking_filter import FILTER_ID
from owc.protocol.agents import GatewayAgent

#: (id, name, file in ``owc/owui/functions``, description).
FUNCTIONS = (
    (PIPE_ID, "OpenClaw", "openclaw_pipe.py", "OpenClaw agent runs in Open WebUI chats, through owc"),
    (EVENT_ID, "OpenClaw startup", "openclaw_startup.py", "Starts owc's runtime when Open WebUI starts"),
    (FILTER_ID, "OpenClaw thinking", "openclaw_thinking.py", "The thinking level of OpenClaw's replies"),
    (ACTION_ID, ACTION_NAME, "openclaw_status.py", "The chat's OpenClaw session: context, limits, sub-agents, Compact"),
)
#: What each of owc's models lists in its row's ``meta`` (key -> the Function id): owc's Filter and Action.
ATTACHED = (("filterIds", FILTER_ID), ("actionIds", ACTION_ID))
TIMEOUT_S = 30.0  # per HTTP request: a server that does not answer is reported, not waited on forever


class InstallError(RuntimeError):
    """The install could not be done; the message says which step and what Open WebUI answered."""


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """Follows no redirect: the 3xx answer reaches the caller as an ``HTTPError`` (see the module doc)."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        return None


#: urllib's opener without redirects: ``Api``'s default.
_OPENER = urllib.request.build_opener(_RefuseRedirects)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_MAX_URL_CHARS = 200


def _redirect_line(method: str, path: str, request_url: str, code: int, location: str | None) -> str:
    """One line for a redirect: where it points (redacted, one line, short) and the ``--url`` to pass instead
    (the target with the requested path taken off, else its origin)."""
    from owc.gateway.url import redact_url

    if not location:
        return f"{method} {path}: Open WebUI answered HTTP {code} (a redirect without a Location): check --url"
    target = urllib.parse.urljoin(request_url, _CONTROL.sub("", location)[:2000])
    parts = urllib.parse.urlsplit(target)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return f"{method} {path}: Open WebUI answered HTTP {code}, a redirect owc does not follow: check --url"
    base = parts.path[: -len(path)] if path and parts.path.endswith(path) else ""
    suggest = redact_url(urllib.parse.urlunsplit((parts.scheme, parts.netloc, base.rstrip("/"), "", "")))
    shown = redact_url(target)
    if len(shown) > _MAX_URL_CHARS:
        shown = shown[: _MAX_URL_CHARS - 1] + "…"
    return (
        f"{method} {path}: Open WebUI answered HTTP {code}, a redirect to {shown}; owc follows no redirect (it would"
        f" carry the admin's password or token on): pass --url {suggest} if that is Open WebUI"
    )


def function_source(filename: str) -> str:
    return resources.files("owc.owui").joinpath("functions", filename).read_text(encoding="utf-8")


@attrs.define
class Api:
    """Open WebUI's HTTP API as an admin. ``opener`` is urllib's (tests may pass their own)."""

    base_url: str
    token: str | None = attrs.field(default=None, repr=False)
    opener: Callable[..., Any] = _OPENER.open

    def call(self, method: str, path: str, body: Any = None, *, missing_ok: bool = False) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url.rstrip("/") + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with self.opener(request, timeout=TIMEOUT_S) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            if 300 <= exc.code < 400:
                raise InstallError(
                    _redirect_line(method, path, request.full_url, exc.code, exc.headers.get("Location"))
                ) from None
            if missing_ok and exc.code in (401, 404):  # Open WebUI answers 401 for a Function it does not have
                return None
            detail = exc.read().decode(errors="replace")[:300]
            raise InstallError(f"{method} {path}: HTTP {exc.code} {detail}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise InstallError(f"{method} {path}: Open WebUI at {self.base_url} did not answer ({exc})") from None
        try:
            return json.loads(raw) if raw else None
        except ValueError:  # Open WebUI's page (its single-page app answers any path it has no route for)
            raise InstallError(f"{method} {path}: Open WebUI answered something that is not JSON") from None

    def sign_in(self, email: str, password: str) -> None:
        answer = self.call("POST", "/api/v1/auths/signin", {"email": email, "password": password})
        token = answer.get("token") if isinstance(answer, Mapping) else None
        if not token:
            raise InstallError("sign-in gave no token")
        if answer.get("role") != "admin":
            raise InstallError(f"{email} is not an admin of this Open WebUI (role {answer.get('role')!r})")
        self.token = str(token)


def install(
    api: Api,
    *,
    valves: Mapping[str, Any] | None = None,
    report: Callable[[str], None] = print,
    pipe_id: str = PIPE_ID,
    replace_valves: bool = False,
) -> list[str]:
    """Create or update, activate and configure owc's Functions; returns the OpenClaw model ids Open WebUI lists.

    ``pipe_id``: the Function id owc's Pipe goes under (``owc owui migrate`` puts it under the old Pipe's id, so the
    old chats' model ids keep answering). ``replace_valves``: the Pipe's valves become ``valves`` exactly (the
    migration's mapped ones: an old valve owc has no use for, a secret among them, is not left behind); else they
    are merged over the saved ones."""
    put_functions(api, valves=valves, report=report, pipe_id=pipe_id, replace_valves=replace_valves)
    return attach_all(api, report=report, pipe_id=pipe_id)


def functions_for(pipe_id: str = PIPE_ID) -> tuple[tuple[str, str, str, str], ...]:
    """``FUNCTIONS`` with owc's Pipe under ``pipe_id``."""
    return tuple((pipe_id if fid == PIPE_ID else fid, name, f, d) for fid, name, f, d in FUNCTIONS)


def put_functions(
    api: Api,
    *,
    valves: Mapping[str, Any] | None = None,
    report: Callable[[str], None] = print,
    pipe_id: str = PIPE_ID,
    replace_valves: bool = False,
) -> None:
    """Steps 2-4 of the module doc. The Pipe's valves are written right after its code and before any Function is
    enabled: enabling one starts owc with the Pipe's saved valves, which are then already the right ones."""
    for function_id, name, filename, description in functions_for(pipe_id):
        form = {
            "id": function_id,
            "name": name,
            "content": function_source(filename),
            "meta": {"description": description},
        }
        existing = api.call("GET", f"/api/v1/functions/id/{function_id}", missing_ok=True)
        if existing is None:
            api.call("POST", "/api/v1/functions/create", form)
            report(f"created {function_id} ({name})")
        else:
            api.call("POST", f"/api/v1/functions/id/{function_id}/update", form)
            report(f"updated {function_id} ({name}) in place; its valves are kept")
        if function_id == pipe_id and (valves or replace_valves):
            _set_valves(api, pipe_id, valves or {}, replace_valves, report)
        current = api.call("GET", f"/api/v1/functions/id/{function_id}")
        if not (isinstance(current, Mapping) and current.get("is_active")):
            api.call("POST", f"/api/v1/functions/id/{function_id}/toggle")
            report(f"activated {function_id}")
        if isinstance(current, Mapping) and current.get("is_global") and function_id != pipe_id:
            report(
                f"warning: {function_id} is global (it runs for every model, not only OpenClaw's): left so;"
                " Admin > Functions turns that off"
            )


def _set_valves(
    api: Api, pipe_id: str, valves: Mapping[str, Any], replace: bool, report: Callable[[str], None]
) -> None:
    """The Pipe's valves: ``valves`` merged over the saved ones, or (``replace``) exactly ``valves``. Names only
    are reported: a valve may be the token."""
    if replace:
        merged = dict(valves)
    else:
        saved = api.call("GET", f"/api/v1/functions/id/{pipe_id}/valves") or {}
        merged = {**(saved if isinstance(saved, Mapping) else {}), **valves}
    api.call("POST", f"/api/v1/functions/id/{pipe_id}/valves/update", merged)
    report(f"set {pipe_id} valves: {', '.join(sorted(valves)) or 'none'}")


def attach_all(
    api: Api,
    *,
    report: Callable[[str], None] = print,
    pipe_id: str = PIPE_ID,
    before: Callable[[Mapping[str, str]], None] | None = None,
) -> list[str]:
    """Steps 5-6 of the module doc: list the models, attach owc's Filter and Action to each of the Pipe's, list
    again. ``before`` sees the models about to be attached to (the migration backs up their rows first)."""
    ours = our_models(api, pipe_id)
    if before is not None and ours:
        before(ours)
    metas = agent_metas(api, pipe_id) if ours else {}
    for model_id, name in ours.items():
        attach(api, model_id, name, report, extra_meta=metas.get(model_id))
    if ours:
        ours = our_models(api, pipe_id)  # listed again: Open WebUI builds each model's Filters (its toggle) then
    report(f"models: {', '.join(ours) if ours else 'none listed yet (see the Pipe valves and Open WebUI log)'}")
    return list(ours)


def our_models(api: Api, pipe_id: str = PIPE_ID) -> dict[str, str]:
    """owc's models as Open WebUI lists them now (id -> name)."""
    listed = api.call("GET", "/api/models")
    models = listed.get("data", []) if isinstance(listed, Mapping) else []
    return {
        str(m.get("id")): str(m.get("name") or m.get("id"))
        for m in models
        if isinstance(m, Mapping) and str(m.get("id", "")).startswith(pipe_id + ".")
    }


def agent_metas(api: Api, pipe_id: str = PIPE_ID) -> dict[str, dict[str, Any]]:
    """Model id (``<pipe>.<agent>``) -> what its row's ``meta`` should hold for the agent (``models.agent_model_meta``:
    its avatar as the model's image, a description), from the agents owc last listed (the health route's
    ``agents``: a ``pipes()`` entry carries only an id and a name, so only a row can show the avatar). Empty when owc
    does not answer or lists no other agent."""
    state = health(api)
    listed = state.get("agents") if state is not None else None
    out: dict[str, dict[str, Any]] = {}
    for item in listed if isinstance(listed, list) else ():
        if not isinstance(item, Mapping) or not isinstance(item.get("id"), str):
            continue
        text = {k: item.get(k) if isinstance(item.get(k), str) else None for k in ("name", "emoji", "avatar_url")}
        agent = GatewayAgent(id=item["id"], **text)
        out[f"{pipe_id}.{agent.id}"] = models.agent_model_meta(agent)
    return out


def attach(
    api: Api,
    model_id: str,
    name: str,
    report: Callable[[str], None],
    *,
    extra_meta: Mapping[str, Any] | None = None,
) -> None:
    """owc's Filter in ``meta.filterIds`` and its Action in ``meta.actionIds`` of the model's row (made if there is
    none, as Admin > Models makes it when the admin ticks them there), in one write; the row's other settings and
    the ids an admin added are kept, and an id already there is not added again. ``extra_meta`` (an agent's avatar
    and description, ``agent_metas``): set where the row has no such key yet (an admin's image is kept)."""
    planned = attach_plan(api, model_id, name, extra_meta=extra_meta)
    if planned is None:
        return
    route, form, lines = planned
    api.call("POST", route, form)  # an update leaves the row's access grants (a route of their own) untouched
    for line in lines:
        report(line)


def attach_plan(
    api: Api, model_id: str, name: str, *, extra_meta: Mapping[str, Any] | None = None
) -> tuple[str, dict[str, Any], list[str]] | None:
    """The one write ``attach`` makes for ``model_id`` (the route, its form, the lines it says), or None when the
    model's row lists owc's Filter and Action already (and holds every key of ``extra_meta``). Reads only."""
    query = urllib.parse.urlencode({"id": model_id})
    row = api.call("GET", f"/api/v1/models/model?{query}", missing_ok=True)
    extra = dict(extra_meta or {})
    if not isinstance(row, Mapping):
        meta = {**extra, **{key: [function_id] for key, function_id in ATTACHED}}
        # The name as it lasts: a row's name shows over the Pipe's live one (a "Gateway not reached" would stay).
        form = {"id": model_id, "base_model_id": None, "name": models.lasting_name(name), "meta": meta, "params": {}}
        lines = [f"attached {fid} to {model_id}" for _, fid in ATTACHED]
        if "profile_image_url" in extra:
            lines.append(f"gave {model_id} its agent's avatar")
        return "/api/v1/models/create", form, lines
    meta = dict(row.get("meta") or {})
    added = []
    for key, function_id in ATTACHED:
        listed = list(meta.get(key) or [])
        if function_id not in listed:
            meta[key] = [*listed, function_id]
            added.append(function_id)
    # An agent's avatar and description where the row has none (an admin's own image or text is theirs: kept).
    # Open WebUI's own default image (its favicon) counts as none.
    gained = [k for k, v in extra.items() if not meta.get(k) or meta.get(k) == DEFAULT_PROFILE_IMAGE]
    for key in gained:
        meta[key] = extra[key]
    if not added and not gained:
        return None
    form = {
        "id": model_id,
        "base_model_id": row.get("base_model_id"),
        "name": row.get("name") or models.lasting_name(name),  # a row's name is the admin's: kept
        "meta": meta,
        "params": row.get("params") or {},
        "is_active": row.get("is_active", True),
    }
    lines = [f"attached {fid} to {model_id} (its other settings kept)" for fid in added]
    if "profile_image_url" in gained:
        lines.append(f"gave {model_id} its agent's avatar")
    return "/api/v1/models/model/update", form, lines


#: The image Open WebUI 0.12.4 gives a model row made without one (``/static/favicon.png``): not an admin's choice.
DEFAULT_PROFILE_IMAGE = "/static/favicon.png"
#: owc's health route inside Open WebUI (``owc/owui/health.py``), admin only.
HEALTH_PATH = "/api/owc/health"
#: How long the smoke check waits for owc to connect after an install (it started a moment ago).
SMOKE_WAIT_S = 20.0
#: The longest wait one health request asks for (``owc.owui.health.MAX_WAIT_S``; below ``TIMEOUT_S``).
HEALTH_WAIT_MAX_S = 25.0
#: How often the smoke check asks again while owc's health route is not there yet (owc not started in the worker
#: that answered: Open WebUI starts it when the Function is enabled; no event reaches a command line over HTTP).
ROUTE_RETRY_S = 0.5


def health(api: Api, wait_s: float = 0.0) -> Mapping[str, Any] | None:
    """What owc running inside Open WebUI says of itself (``HEALTH_PATH``), or None when it does not answer there:
    owc not started in that process (the route is added when it starts), or an Open WebUI without owc. ``wait_s``
    (at most ``HEALTH_WAIT_MAX_S``): the route holds its answer until owc has something to say (``owc.owui.health.
    settled_within``)."""
    path = HEALTH_PATH if wait_s <= 0 else f"{HEALTH_PATH}?wait_s={min(wait_s, HEALTH_WAIT_MAX_S):.1f}"
    try:
        answer = api.call("GET", path, missing_ok=True)
    except InstallError:
        return None
    return answer if isinstance(answer, Mapping) and "connected" in answer else None


def wait_for_hello(
    api: Api,
    *,
    wait_s: float = SMOKE_WAIT_S,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] | None = None,
) -> Mapping[str, Any] | None:
    """What owc inside Open WebUI says of itself once it has had the Gateway's ``hello`` (``connected``), or is
    stopped at a person's step (a device to approve, a refusal), or ``wait_s`` passed: the last answer of
    ``HEALTH_PATH`` (None: owc does not answer there). A command line's bounded wait for another process: it
    decides only what is said and whether the Gateway's models can be listed yet.

    The hello is waited for by the runtime itself (the route's ``?wait_s``, an event on its Trio side): the answer
    comes the moment owc connects. Only while the route is not there yet (owc still starting in that worker) is it
    asked again every ``ROUTE_RETRY_S``."""
    import time

    sleep = sleep or time.sleep  # timer-ok: CLI wait
    clock = clock or time.monotonic  # timer-ok: CLI wait
    deadline = clock() + wait_s  # timer-ok: CLI wait
    while True:
        asked = min(max(0.0, deadline - clock()), HEALTH_WAIT_MAX_S)  # timer-ok: CLI wait
        began = clock()  # timer-ok: CLI wait
        state = health(api, wait_s=asked)
        if state is not None and (state.get("connected") or state.get("pairing") or state.get("refusal")):
            return state
        if clock() >= deadline:  # timer-ok: CLI wait
            return state
        if state is None or clock() - began < asked:  # timer-ok: CLI wait
            # The route is not there yet, or answered before the wait it was asked for (an owc that does not
            # hold it): asked again soon, never in a tight loop.
            sleep(ROUTE_RETRY_S)  # timer-ok: CLI wait


def say_smoke(state: Mapping[str, Any] | None, models: list[str], report: Callable[[str], None] = print) -> bool:
    """The smoke check's lines for ``state`` (``wait_for_hello``'s) and the models listed; True when all hold."""
    ok = bool(models)
    if state is None:
        report("smoke: owc is not running inside Open WebUI (no answer at /api/owc/health): see Open WebUI's log")
        ok = False
    elif state.get("connected"):
        report(f"smoke: owc connected to {state.get('gateway')}, Gateway boot {state.get('boot_id') or 'unknown'}")
    elif state.get("pairing"):
        report(f"smoke: owc waits for the Gateway to approve its device: {state.get('pairing')}")
        ok = False
    else:
        why = state.get("refusal") or "not yet"
        report(f"smoke: owc runs inside Open WebUI but is not connected to {state.get('gateway')}: {why}")
        ok = False
    report(f"smoke: {len(models)} OpenClaw model(s) listed" if models else "smoke: no OpenClaw model listed")
    report("smoke check passed" if ok else "smoke check not passed (owc owui status says more)")
    return ok


def smoke(
    api: Api,
    models: list[str],
    *,
    report: Callable[[str], None] = print,
    wait_s: float = SMOKE_WAIT_S,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] | None = None,
) -> bool:
    """The check an install or a migration ends with, needing no agent reply: owc runs in Open WebUI and is
    connected (the Gateway's ``hello`` boot id), and Open WebUI lists owc's models. It waits up to ``wait_s`` for the
    connection (owc starts as the Functions are enabled), but not for a person: a device waiting for approval on
    the Gateway host is said at once. One line per fact; True when all hold."""
    state = wait_for_hello(api, wait_s=wait_s, sleep=sleep, clock=clock)  # timer-ok: CLI wait
    return say_smoke(state, models, report)


# ------------------------------------------------------------------------------------- configuration as code

#: Open WebUI's readiness route: 200 once its startup is complete and its database answers (``main.py``).
READY_PATH = "/ready"


def wait_for_open_webui(
    api: Api,
    wait_s: float,
    *,
    report: Callable[[str], None] = print,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] | None = None,
) -> None:
    """Until Open WebUI answers ``READY_PATH``, for at most ``wait_s`` (0: one attempt): an init container may
    start beside Open WebUI. A transport timer, not a decision: past it the install stops with
    ``OpenWebUIUnreachable`` and the last answer (a refused connection, HTTP 503 while it starts)."""
    import time

    sleep = sleep or time.sleep  # timer-ok: CLI wait for another process
    clock = clock or time.monotonic  # timer-ok: CLI wait for another process
    deadline = clock() + wait_s  # timer-ok: CLI wait for another process
    said = False
    while True:
        try:
            api.call("GET", READY_PATH)
            return
        except InstallError as exc:
            if "redirect" in str(exc):
                raise
            last = str(exc)
        if clock() >= deadline:  # timer-ok: CLI wait for another process
            waited = f" within {wait_s:g} s" if wait_s else ""
            raise OpenWebUIUnreachable(f"Open WebUI at {api.base_url} did not answer{waited}: {last}")
        if not said:
            report(f"waiting up to {wait_s:g} s for Open WebUI at {api.base_url} to answer")
            said = True
        sleep(1.0)  # timer-ok: CLI wait for another process


class OpenWebUIUnreachable(InstallError):
    """Open WebUI did not answer within the wait (``--wait``): a deploy job may retry later."""


def apply(
    api: Api,
    spec: Any,
    *,
    dry_run: bool = False,
    report: Callable[[str], None] = print,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] | None = None,
) -> int:
    """Make owc's Functions in Open WebUI what ``spec`` (an ``install_config.InstallSpec``, signed in already)
    says: each Function's code, name, valves and flags (``install_plan``), then owc's Filter and Action attached to
    each of the Pipe's models. One line per change; "nothing changed" when there was none. ``dry_run``: the same
    lines as a plan, nothing written. Returns the number of changes (made, or planned)."""
    prefix = "would: " if dry_run else ""
    count = 0
    for fspec in spec.functions:
        fid = fspec.function_id
        answer = api.call("GET", f"/api/v1/functions/id/{fid}", missing_ok=True)
        found = None
        if isinstance(answer, Mapping):
            valves = api.call("GET", f"/api/v1/functions/id/{fid}/valves") if fspec.valves else None
            found = Found.from_answer(answer, valves)
        warning = global_warning(fspec, found)
        if warning:
            report(warning)
        for change in plan_function(fspec, function_source(fspec.section.filename), found):
            if not dry_run:
                _write(api, change)
            for line in change.lines:
                report(prefix + line)
            count += len(change.lines)
    pipe_id = spec.pipe_id
    if dry_run:
        count += _plan_attach(api, pipe_id, report)
        report(f"dry run: {count} change(s) planned, nothing written" if count else "dry run: nothing would change")
        return count
    wait_s = spec.connection.connect_wait_s
    state = wait_for_hello(api, wait_s=wait_s, sleep=sleep, clock=clock)  # timer-ok: CLI wait
    lines: list[str] = []
    listed = attach_all(api, report=lines.append, pipe_id=pipe_id)
    for line in lines:
        if line.startswith("models: "):
            report(_models_line(listed, state))
        else:
            report(line)
            count += 1
    report(f"{count} change(s) made" if count else "nothing changed")
    say_smoke(state, listed, report)
    return count


def install_and_check(
    api: Api,
    *,
    valves: Mapping[str, Any],
    connect_wait_s: float,
    report: Callable[[str], None] = print,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] | None = None,
) -> bool:
    """The command-line form (``--url --admin-email`` and the valve options): ``install``'s steps as they were
    (each Function's code written again, its valves kept), but the models listed after owc's hello, as ``apply``
    does. Returns the smoke check's verdict."""
    put_functions(api, valves=valves, report=report)
    state = wait_for_hello(api, wait_s=connect_wait_s, sleep=sleep, clock=clock)  # timer-ok: CLI wait
    lines: list[str] = []
    listed = attach_all(api, report=lines.append)
    for line in lines:
        report(_models_line(listed, state) if line.startswith("models: ") else line)
    return say_smoke(state, listed, report)


def _write(api: Api, change: Change) -> None:
    """One planned write, by the route Open WebUI 0.12.4 has for it (``routers/functions.py``)."""
    fid = change.function_id
    if change.step is Step.CREATE:
        api.call("POST", "/api/v1/functions/create", dict(change.form or {}))
    elif change.step is Step.UPDATE:
        api.call("POST", f"/api/v1/functions/id/{fid}/update", dict(change.form or {}))
    elif change.step is Step.VALVES:
        api.call("POST", f"/api/v1/functions/id/{fid}/valves/update", dict(change.form or {}))
    elif change.step is Step.TOGGLE_ACTIVE:
        api.call("POST", f"/api/v1/functions/id/{fid}/toggle")
    else:
        api.call("POST", f"/api/v1/functions/id/{fid}/toggle/global")


def _plan_attach(api: Api, pipe_id: str, report: Callable[[str], None]) -> int:
    """A dry run's attach lines: for the models Open WebUI lists now (none before the Pipe is there and active)."""
    ours = our_models(api, pipe_id)
    if not ours:
        report(f"would: attach {FILTER_ID} and {ACTION_ID} to the Pipe's models once Open WebUI lists them")
        return 0
    count = 0
    metas = agent_metas(api, pipe_id)
    for model_id, name in ours.items():
        planned = attach_plan(api, model_id, name, extra_meta=metas.get(model_id))
        for line in planned[2] if planned else ():
            report("would: " + line)
            count += 1
    return count


def _models_line(listed: list[str], state: Mapping[str, Any] | None) -> str:
    """The models Open WebUI lists, and, when owc has not had the Gateway's hello, that the Gateway's own models
    are not among them yet (the Pipe lists only its base entry until then)."""
    shown = ", ".join(listed) if listed else "none listed yet (see the Pipe valves and Open WebUI log)"
    if state is not None and state.get("connected"):
        return f"models: {shown}"
    return (
        f"models: {shown}; owc is not connected to the Gateway yet, so the Gateway's models are not listed: they"
        " follow once it connects (run this install again then to attach the Filter and the Action to them)"
    )

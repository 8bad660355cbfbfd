"""What the Function files call (``owc/owui/functions/``): kept here, in the installed package, so a Function file
stays a few lines that Open WebUI may re-execute on every save without touching owc's state.

* ``on_event``: the startup Event Function's ``event()``; at ``system.startup.completed`` the runtime starts with
  the Pipe's saved Valves (read from Open WebUI's ``function`` table), else the environment;
* ``pipe``: the Pipe's ``pipe()``; starts the runtime if the startup hook did not (the fallback). Open WebUI's
  background tasks are answered locally (``owc.owui.background``: never the agent's session). A user's message
  is sent to the agent as a run whose id carries Open WebUI's reply stub, and the reply streams through the
  request as Responses items (``user_turn``); every way the request ends hands the reply to owc's writer
  (``owc/runs/inline.py``).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator, Mapping
from functools import partial
from typing import Any

import anyio.to_thread
import attrs

from owc import ids
from owc.gateway import MissingScopes, Refused
from owc.owui import attachments, background, models
from owc.owui.emitter import OwuiEmitter
from owc.owui.process import DEFAULT_AGENT_ID, SettingsError, ensure_started, settings_from
from owc.owui.trio_host import HostError
from owc.protocol.agents import AgentRoster, read_agents
from owc.render.diff import diff
from owc.render.status import Ended, Queued, StatusLines
from owc.rules import agents as agent_rule
from owc.runs.inline import UserTurnError
from owc.runtime import KEEP_MODEL

log = logging.getLogger("owc.owui")

#: The Pipe Function's id in Open WebUI (its models are ``openclaw.<agent id>``).
PIPE_ID = "openclaw"
#: The startup Event Function's id.
EVENT_ID = "openclaw_startup"

#: What a person sees when owc itself cannot run (its settings are incomplete).
NOT_RUNNING = "owc is not running: its Gateway settings are incomplete (see Open WebUI's log)."


def unusable_settings(error: SettingsError) -> str:
    """The reply when the Pipe's settings cannot be used (no token, a bad URL): what is wrong, naming the valve or
    variable (``SettingsError`` never holds a value that could be the token)."""
    return f"owc cannot use the OpenClaw Pipe's settings, so your message was not sent: {error}."


#: A temporary chat is never saved: owc could not finish its reply if the request ended early.
TEMPORARY_CHAT = "OpenClaw answers in saved chats only (this one is temporary)."


def _valve_text(valves: Any, name: str) -> str:
    """A text valve as written ('' when the Valves do not have it: an older Function file)."""
    value = getattr(valves, name, "")
    return value if isinstance(value, str) else ""


def gateway_agents(runtime: Any) -> AgentRoster:
    """The Gateway's agents as this process last listed them (``agents.list``, refreshed with the models)."""
    roster = getattr(runtime, "gateway_agents", None)
    return roster if isinstance(roster, AgentRoster) else AgentRoster()


def _agent_models(runtime: Any) -> dict[str, list[models.GatewayModel]]:
    """The Gateway models of the agents the ``AGENT_MODELS`` valve names, as last listed (``models.list {agentId}``)."""
    held = getattr(runtime, "gateway_agent_models", None)
    return held if isinstance(held, dict) else {}


async def _list_agents(host: Any, runtime: Any) -> AgentRoster:
    """``agents.list`` now, kept on the runtime; the last roster when the Gateway does not answer it (an older
    Gateway without the method, a lost connection): agents stay listed, as models do."""
    try:
        payload = await host.run_in_trio(partial(runtime.client.request, "agents.list", {}))
    except Exception as exc:
        log.warning("owui.agents_unavailable error=%s", type(exc).__name__)
        return gateway_agents(runtime)
    roster = read_agents(payload)
    # The runtime holds what the Gateway last listed (its models too): kept with them, no timer refreshes it.
    runtime.gateway_agents = roster
    return roster


async def _list_agent_models(host: Any, runtime: Any, agent_ids: list[str]) -> dict[str, list[models.GatewayModel]]:
    """``models.list {agentId}`` for each agent whose models are listed too (``AGENT_MODELS``); an agent the Gateway
    does not answer for keeps its last list."""
    held = dict(_agent_models(runtime))
    for agent_id in agent_ids:
        try:
            payload = await host.run_in_trio(partial(runtime.client.request, "models.list", {"agentId": agent_id}))
        except Exception as exc:
            log.warning("owui.agent_models_unavailable agent=%s error=%s", agent_id, type(exc).__name__)
            continue
        held[agent_id] = models.read_models(payload)
    runtime.gateway_agent_models = held
    return held


async def pipes(valves: Any) -> list[dict[str, str]]:
    """The Pipe's models: the agent's own ("OpenClaw", ``openclaw.<agent id>``) first, then each other agent of
    the Gateway (``agents.list``, the ``AGENT_WHITELIST`` valve: ``openclaw.<agent>``, named as the Gateway names it),
    then the Gateway's models (``models.list``, whitelist and cap from the Valves; for the agents the ``AGENT_MODELS``
    valve names, theirs too). Without an answer from the Gateway (owc not running, not connected, a refusal) the
    last list it gave is shown, marked as such; never an exception."""
    agent = (getattr(valves, "AGENT_ID", "") or "").strip() or DEFAULT_AGENT_ID
    whitelist = str(getattr(valves, "MODEL_WHITELIST", "") or "")
    cap = getattr(valves, "MAX_MODELS", 30)
    agent_whitelist = _valve_text(valves, "AGENT_WHITELIST")
    # Installed under the old Pipe's Function id, the list is the old chats' model ids (issue 28).
    listing = partial(
        models.manifold_entries,
        agent,
        whitelist=whitelist,
        cap=cap,
        old_ids=models.serves_old_ids(valves),
        presets=models.preset_models(valves),
        agent_whitelist=agent_whitelist,
    )
    from owc.owui.process import current_runtime

    try:
        host, runtime = current_runtime()
    except HostError:
        return listing([], reached=False)
    # Open WebUI hands ``pipes()`` the saved valves each time: a valve saved since is applied now (issue 25, item 6).
    try:
        await ensure_started(settings_from(valves))
    except SettingsError as exc:
        log.warning("owui.settings_unusable %s", exc)
    except Exception as exc:  # closing meanwhile, Open WebUI's settings unreadable: the picker must still open
        log.warning("owui.settings_not_applied error=%s", type(exc).__name__)
    try:
        payload = await host.run_in_trio(partial(runtime.client.request, "models.list", {}))
    except Exception as exc:  # not connected, refused, a transport timeout: the picker must still open
        refusal = runtime.client.refusal
        if refusal is not None:  # its whole line was logged when the Gateway refused; the picker says its gist
            log.warning("owui.models_unavailable refused=%s (the picker says: %s)", refusal.code, refusal.short)
        else:
            log.warning("owui.models_unavailable error=%s", exc)
        why = refusal.short if refusal is not None else None
        return listing(
            runtime.gateway_models,
            reached=False,
            why=why,
            agents=gateway_agents(runtime).agents,
            agent_models=_agent_models(runtime),
        )
    runtime.gateway_models = models.read_models(payload)
    roster = await _list_agents(host, runtime)
    listed = {a.id for a in models.select_agents(roster.agents, agent, whitelist=agent_whitelist)}
    wanted = [a for a in models.parse_whitelist(_valve_text(valves, "AGENT_MODELS")) if a in listed]
    by_agent = await _list_agent_models(host, runtime, wanted) if wanted else {}
    return listing(runtime.gateway_models, reached=True, agents=roster.agents, agent_models=by_agent)


async def _start(valves: Any, app: Any) -> SettingsError | None:
    """Start owc with these valves, or apply them to the running owc; the settings' error if they cannot be used."""
    try:
        await ensure_started(settings_from(valves), app=app)
    except SettingsError as exc:
        log.error("owui.not_started %s", exc)
        return exc
    return None


def _starts_owc(event: Any) -> bool:
    """Open WebUI has started, or one of owc's Functions is being enabled (``owc owui install`` on a running
    Open WebUI: agent turns then show at once, not from the next restart or the first message), or the Pipe's
    valves were saved (``function.valves_updated``, published by the worker that saved them: applied at once,
    issue 25, item 6; another worker applies them at its next ``pipe()`` / ``pipes()``, which Open WebUI calls
    with the saved valves)."""
    if not isinstance(event, Mapping):
        event = {"event": getattr(event, "event", None), "subject": getattr(event, "subject", None)}
    name = event.get("event")
    if name == "system.startup.completed":
        return True
    subject = event.get("subject")
    subject_id = subject.get("id") if isinstance(subject, Mapping) else None
    if name == "function.valves_updated":
        return subject_id in (PIPE_ID, models.OLD_FUNCTION_ID)
    return name in ("function.enable_started", "function.enabled") and subject_id in (
        PIPE_ID,
        EVENT_ID,
        models.OLD_FUNCTION_ID,
    )


#: What owc's Pipe file holds (``functions/openclaw_pipe.py``): tells owc's Pipe under the old Pipe's id (after
#: ``owc owui migrate``) from the old Pipe itself, whose valves owc must never start with.
OWC_PIPE_MARK = "from owc.owui.pipe import"


async def pipe_valves(functions: Any) -> Mapping[str, Any]:
    """The saved valves of owc's Pipe: the Function ``openclaw``'s, else (``owc owui migrate`` put owc's Pipe under
    the old Pipe's id, issue 30) ``openclaw_gateway``'s when that Function holds owc's code."""
    valves = await functions.get_function_valves_by_id(PIPE_ID)
    if valves:
        return valves
    get = getattr(functions, "get_function_by_id", None)
    old = await get(models.OLD_FUNCTION_ID) if get is not None else None
    if old is not None and OWC_PIPE_MARK in (getattr(old, "content", "") or ""):
        return await functions.get_function_valves_by_id(models.OLD_FUNCTION_ID) or {}
    return valves or {}


async def on_event(event: Any, app: Any) -> None:
    """The startup Event Function: start owc once Open WebUI has started (or owc's Functions are enabled), with
    the Pipe's saved Valves."""
    if not _starts_owc(event):
        return
    valves: Mapping[str, Any] = {}
    try:
        from open_webui.models.functions import Functions

        valves = await pipe_valves(Functions)
    except Exception:
        log.exception("owui.valves_unreadable (starting from the environment)")
    await _start(valves, app)


async def pipe(
    valves: Any,
    body: Mapping[str, Any],
    *,
    user: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    request: Any = None,
    task: Any = None,
    task_body: Mapping[str, Any] | None = None,
    event_emitter: Any = None,
) -> str | AsyncIterator[dict[str, Any] | str]:
    """The Pipe's ``pipe()``. A background task of Open WebUI (title, tags, follow-ups: ``__task__`` set) never
    reaches the agent: it is answered here. A user's message becomes an agent run streamed back as Responses
    events (``user_turn``); what cannot be sent is said in one line. ``event_emitter``: the request's own
    ``__event_emitter__``, through which the turn's status lines go (Open WebUI stores them with the message)."""
    if task:
        return background.answer(str(task), dict(body or {}), dict(task_body) if task_body else None)
    unusable = await _start(valves, getattr(request, "app", None))
    if unusable is not None:
        return unusable_settings(unusable)
    turn = _turn_from(valves, body, user or {}, metadata or {})
    if isinstance(turn, str):
        return turn
    return user_turn(turn, event_emitter)


@attrs.frozen
class Turn:
    """One user message to send: where it goes and the reply stub it fills."""

    chat_id: str
    message_id: str
    #: The user who sent it (``__user__``): the request's own events go to this user's tabs, and its stop is theirs.
    user_id: str
    session_key: str
    run_id: str
    text: str
    model: str | object | None
    #: The user message's content as Open WebUI sent it (its image parts) and its own uploaded files.
    content: Any = None
    files: tuple[Any, ...] = ()
    user: Mapping[str, Any] = attrs.field(factory=dict)
    agent_id: str = DEFAULT_AGENT_ID
    #: The thinking level asked for this turn (``reasoning_effort``: owc's Filter, or Advanced Params' "Reasoning
    #: Effort"), as written; None: the session's default. Checked and clamped by ``Runtime.user_turn``.
    thinking: str | None = None
    #: The request's Open WebUI model id (``openclaw.matcha``), and how owc's model ids read with this Pipe's valves
    #: (``models.resolve_agent`` with ``agent_id``, ``DEFAULT_MODEL`` and the presets bound; the Gateway's agents are
    #: given at the turn): which agent the turn goes to is decided in ``user_turn`` (issue 31).
    model_id: str = ""
    resolver: Any = None
    #: The Function ids whose model ids are owc's (``openclaw``, the old Pipe's ``openclaw_gateway``, the one these
    #: valves were loaded under): only replies on these tell a chat's agent (``owc.rules.agents.chat_agent``).
    function_ids: frozenset[str] = frozenset()
    #: The ``AGENT_WHITELIST`` valve: the agents listed as models, so the ones a turn may go to.
    agent_whitelist: str = ""
    #: False when the message came from the request's own copy (``request_messages``): its content then has no
    #: image parts, and its raster images are read as uploads (``attachments.attachments_from``).
    images_in_content: bool = True

    def in_chat_of(self, owner_key: str) -> Turn:
        """The same turn on the chat's own session key (its owner's: ``Runtime.chat_session_key``)."""
        return attrs.evolve(self, session_key=owner_key)


def _turn_from(
    valves: Any, body: Mapping[str, Any], user: Mapping[str, Any], metadata: Mapping[str, Any]
) -> Turn | str:
    chat_id, message_id, user_id = metadata.get("chat_id"), metadata.get("message_id"), user.get("id")
    if not (isinstance(chat_id, str) and isinstance(message_id, str) and isinstance(user_id, str)):
        return "OpenClaw needs a chat to answer in: this request named none."
    if chat_id.startswith("local:") or not chat_id:
        return TEMPORARY_CHAT
    agent = (getattr(valves, "AGENT_ID", "") or "").strip() or DEFAULT_AGENT_ID
    messages = request_messages(body.get("messages"), metadata)
    from_request = messages is not body.get("messages")
    if from_request:
        log.info(
            "owui.user_message_from_request chat=%s message=%s (the reloaded history had none)",
            chat_id,
            message_id,
        )
    text = last_user_text(messages)
    content = last_user_content(messages)
    files = tuple(attachments.message_files(metadata))
    if not text and not files and not (isinstance(content, list) and content):
        return "There is no text in your message for the agent."
    # The picked entry (owc's ids, the old Pipe's, DEFAULT_MODEL for the "OpenClaw" entry: issue 28).
    chosen = models.resolve_with_valves(str(body.get("model") or ""), agent, valves)
    # The token after "input-" is the user's message id: a request Open WebUI retries sends the same run id,
    # which the Gateway answers "in_flight" instead of starting a second run.
    token = hashlib.sha256(str(metadata.get("user_message_id") or message_id).encode()).hexdigest()[:12]
    return Turn(
        chat_id=chat_id,
        message_id=message_id,
        user_id=user_id,
        # The sender's key until the chat's owner is read (``user_turn``): the same key in the sender's own chat.
        session_key=ids.session_key(agent, user_id, chat_id),
        run_id=ids.input_run_id(chat_id, message_id, token),
        text=text,
        model=KEEP_MODEL if chosen.keep else chosen.model,
        content=content,
        files=files,
        user=dict(user),
        agent_id=agent,
        thinking=thinking_of(body),
        model_id=str(body.get("model") or ""),
        resolver=partial(
            models.resolve_agent,
            agent_id=agent,
            default_model=models.default_model_of(valves),
            presets=models.preset_models(valves),
        ),
        function_ids=frozenset(
            {PIPE_ID, models.OLD_FUNCTION_ID} | {models.function_id_of_module(type(valves).__module__)} - {None}
        ),
        agent_whitelist=_valve_text(valves, "AGENT_WHITELIST"),
        images_in_content=not from_request,
    )


def thinking_of(body: Mapping[str, Any]) -> str | None:
    """The thinking level the request asks for: ``reasoning_effort`` at the body's top level (Open WebUI puts a
    chat's or a model's "Reasoning Effort" there before the Filters run, and owc's Filter writes it there), else in
    ``params`` (a request that skipped that step). None: nothing asked, the session's default is used."""
    params = body.get("params")
    nested = params.get("reasoning_effort") if isinstance(params, Mapping) else None
    for value in (body.get("reasoning_effort"), nested):
        if isinstance(value, str) and value.strip():
            return value.strip()[:64]
    return None


def request_messages(messages: Any, metadata: Mapping[str, Any]) -> Any:
    """The messages to read the user's message from: the body's, unless they hold nothing but system messages while
    the request names a user's message (``__metadata__["user_message"]``, the message as the page sent it:
    ``main.py:1277,1325``); then that message alone. Only then: a body with other messages is Open WebUI's own
    reading (a Regenerate or a Continue of an agent's turn names that turn's parent, which may be the agent's own
    earlier reply, and its body holds no user message: it is refused as before, never sent as the user's words).

    Why: Open WebUI 0.12.4 rebuilds a saved chat's messages from its database (``utils/middleware.py:2087-2089``;
    the page sends none) and, when that read does not find the request's own message, goes on with none
    (``:2186-2187``: only the system prompt is left). A cause seen in the browser tier (a "Send now" landing as the
    reply before it ended): a task cancelled mid-read leaves its pooled SQLite connection on an old snapshot
    (``internal/db.py:481-485`` keeps it; measured with that engine's settings), and a later read on it finds the
    chat as it was before the message was inserted. The message's raster images, which come only as parts of the
    rebuilt history, are read from its files instead (``Turn.images_in_content``)."""
    if messages is not None and not (
        isinstance(messages, list) and all(isinstance(m, Mapping) and m.get("role") == "system" for m in messages)
    ):
        return messages
    sent = metadata.get("user_message")
    if not isinstance(sent, Mapping) or sent.get("role", "user") != "user" or sent.get("content") is None:
        return messages
    return [{"role": "user", "content": sent.get("content")}]


def last_user_content(messages: Any) -> Any:
    """The last user message's content, as Open WebUI sent it."""
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, Mapping) and message.get("role") == "user":
                return message.get("content")
    return None


def last_user_text(messages: Any) -> str:
    """The text of the last user message (a string, or the text parts of a list; images are not sent yet)."""
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content.strip()
            if isinstance(content, list):
                parts = [p.get("text", "") for p in content if isinstance(p, Mapping) and p.get("type") == "text"]
                return "\n".join(t for t in parts if isinstance(t, str)).strip()
            return ""
    return ""


async def _attachments(turn: Turn) -> tuple[list[dict[str, Any]], list[str]]:
    """The message's images and uploads as ``chat.send`` attachments (``owc.owui.attachments``), read off the
    loop (file reads block); what cannot be sent, as lines for the person."""
    if not turn.files and not isinstance(turn.content, list):
        return [], []
    try:
        read = await attachments.owui_file_reader(list(turn.files), turn.user) if turn.files else None
        build = partial(
            attachments.attachments_from,
            turn.content,
            list(turn.files),
            read=read,
            images_in_content=turn.images_in_content,
        )
        # Off the loop; a Stop while it reads does not wait for the read (the thread finishes it, unwanted).
        return await anyio.to_thread.run_sync(build, abandon_on_cancel=True)
    except Exception:
        log.exception("owui.attachments_failed chat=%s", turn.chat_id)
        return [], ["The attached files could not be read, so only the text was sent."]


async def _on_agent(host: Any, runtime: Any, turn: Turn) -> tuple[Turn, str | None]:
    """The turn on the agent it goes to, and the status line to show (or None).

    The picked entry is read with the Gateway's agents (``models.resolve_agent``): ``openclaw.<agent>`` and
    ``openclaw.<agent>~<key>`` of an agent owc lists go to that agent. An entry of an agent this process has not seen
    listed (another worker served the picker, or the agent is new) gets one ``agents.list`` first. Then the chat's own
    agent, from its first reply on owc's models (``owc.rules.agents``), wins over a switched picker: the message goes
    there, its session's model untouched, and the person is told. A turn ``_turn_from`` made without a resolver
    (tests, an older caller) is left as it is."""
    if turn.resolver is None:
        return turn, None
    roster = gateway_agents(runtime)

    def known(roster: AgentRoster) -> set[str]:
        listed = models.select_agents(roster.agents, turn.agent_id, whitelist=turn.agent_whitelist)
        return {a.id for a in listed}

    picked = turn.resolver(turn.model_id, known=known(roster))
    if picked.reading == "another agent" and picked.agent not in roster.ids:
        roster = await _list_agents(host, runtime)
        picked = turn.resolver(turn.model_id, known=known(roster))
    listed = known(roster)

    def read(model_id: str) -> str | None:
        function_id, dot, _ = model_id.partition(".")
        if not dot or function_id not in turn.function_ids:
            return None
        got = turn.resolver(model_id, known=listed)
        return None if got.keep else got.agent

    try:
        chat = await host.run_in_trio(partial(runtime.keeper.store.read_chat, turn.chat_id))
    except Exception as exc:  # unread, the picked agent is the best guess (as for a new chat)
        log.warning("owui.chat_agent_unread chat=%s error=%s", turn.chat_id, type(exc).__name__)
        chat = None
    history = chat.get("history") if isinstance(chat, Mapping) else None
    messages = history.get("messages") if isinstance(history, Mapping) else None
    kept = agent_rule.chat_agent(messages, read, skip=turn.message_id)
    # The names the picker shows: the Default entry's agent is "OpenClaw" there.
    names = {a.id: a.label for a in roster.agents} | {turn.agent_id: models.DEFAULT_NAME}
    # An entry of an agent owc does not list reads as before issue 31: the Default entry's agent, its model kept.
    choice = agent_rule.choose(turn.agent_id if picked.keep else picked.agent, kept, names)
    model = KEEP_MODEL if (picked.keep or choice.keep_model) else picked.model
    if choice.agent != turn.agent_id or picked.reading in ("agent", "agent model") or choice.note:
        log.info(
            "owui.turn_agent chat=%s picked=%s agent=%s reading=%s",
            turn.chat_id,
            picked.agent,
            choice.agent,
            picked.reading,
        )
    return attrs.evolve(turn, agent_id=choice.agent, model=model), choice.note


def stopped_line(host: Any) -> str:
    """owc's runtime ended under the request: the one line that says why, when the Gateway said (a wrong token, a
    device that must be paired, missing scopes: messages built from the Gateway's answer, never the token)."""
    outcome = getattr(host, "run_outcome", None)
    error = getattr(outcome, "error", None)
    refusal = _refusal_in(error)
    if refusal is not None:
        return refusal.refusal.reply  # type: ignore[attr-defined]
    return "owc stopped before your message could be sent (see Open WebUI's log)."


def _refusal_in(error: BaseException | None) -> BaseException | None:
    """The Gateway's refusal among an error's causes and exception-group leaves, if there is one."""
    seen: set[int] = set()
    todo = [error] if error is not None else []
    while todo:
        exc = todo.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        if isinstance(exc, (Refused, MissingScopes)):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            todo.extend(exc.exceptions)
        todo.extend([exc.__cause__, exc.__context__])
    return None


async def user_turn(turn: Turn, event_emitter: Any = None) -> AsyncIterator[dict[str, Any] | str]:
    """Send the turn and relay its rendering as Responses events, which Open WebUI folds into the reply's
    ``output`` and shows live (reference ``pipe-runtime-0.12.4.md`` section 4). When the request ends (the run's
    end, a Stop, "Send now", a closed tab, Open WebUI stopping), its task's end hands the run to owc's writer.
    The turn's status lines (``owc.render.status``: queued, a tool running, the Gateway connection lost and back)
    go through the request's ``event_emitter`` (Open WebUI appends them to the reply's ``statusHistory``)."""
    from owc.owui.process import current_runtime

    try:
        host, runtime = current_runtime()
    except HostError:
        yield NOT_RUNNING
        return
    emitter = runtime.keeper.emitter

    async def say(entries: Any) -> None:
        for entry in entries:
            event = {"type": "status", "data": entry}
            try:
                if event_emitter is not None:
                    await event_emitter(event)  # Open WebUI's own: it stores the line with the reply
                elif isinstance(emitter, OwuiEmitter):
                    await emitter.say(turn.chat_id, turn.message_id, turn.user_id, event)
            except Exception:  # a status line must not cost the reply
                log.exception("owui.status_failed chat=%s", turn.chat_id)

    try:
        # Which agent (issue 31): the picked entry's, unless the chat already has another (its first reply's).
        turn, note = await _on_agent(host, runtime, turn)
        if note is not None:
            await say([{"description": note, "done": True}])
        # A chat another user shared with the sender is the owner's session (``Runtime.chat_session_key``).
        turn = turn.in_chat_of(
            await host.run_in_trio(partial(runtime.chat_session_key, turn.agent_id, turn.chat_id, turn.user_id))
        )
    except HostError:
        yield stopped_line(host)
        return
    mark = None
    if isinstance(emitter, OwuiEmitter):
        await emitter.install_hook(turn.chat_id, turn.message_id, turn.user_id)
        mark = await emitter.stop_mark(turn.chat_id)  # the stops recorded so far are not about this request
    send: dict[str, Any] = {}
    found, problems = await _attachments(turn)
    if found:
        send["attachments"] = found
    if problems:
        # Said above the reply (a status line), not sent to the agent as if the user had written it.
        await say([{"description": " ".join(problems), "done": True}])
        if not turn.text and not found:
            yield " ".join(problems)
            return
    lines = StatusLines()

    async def said(event: Any) -> None:
        await say(lines.apply(event))
        lines.take()

    try:
        if await host.run_in_trio(runtime.busy, turn.session_key):
            # owc sends it once the run before it has ended (``Runtime.user_turn``): the tab says it waits.
            await said(Queued())
        inline = await host.run_in_trio(
            partial(
                runtime.user_turn,
                turn.session_key,
                turn.run_id,
                turn.text,
                model=turn.model,
                status=lines,
                thinking=turn.thinking,
                **send,
            )
        )
    except UserTurnError as exc:
        log.warning("owui.turn_not_sent chat=%s: %s", turn.chat_id, exc)
        await said(Ended())  # a "Queued" line said above no longer holds
        yield str(exc)
        return
    except HostError:
        await said(Ended())
        yield stopped_line(host)
        return
    except asyncio.CancelledError:
        if lines.open is not None:
            await said(Ended())  # stopped while it waited: never sent, and its "Queued" line must not spin on
        raise

    def stop() -> None:
        runtime.keeper.stop_run(inline.run)

    def request_ended(ended: asyncio.Task[Any]) -> None:
        try:
            host.run_sync_soon(inline.request_ended)
        except HostError:
            log.info("owui.handover_after_close run=%s (the next start finishes it)", turn.run_id)
        if isinstance(emitter, OwuiEmitter) and (ended.cancelled() or ended.cancelling()):
            # The request was cancelled (a stop request, Open WebUI stopping): what the stop request said decides.
            # Read here, at the request task's end, not in this generator's ``except``: the cancel lands wherever
            # Open WebUI's middleware awaits, often outside this generator (which then only sees its close), and
            # Open WebUI's own handlers swallow it, so the task ends "done" with its cancel still counted.
            emitter.decide_after_request_cancel(turn.chat_id, turn.message_id, turn.user_id, mark, stop)

    current = asyncio.current_task()
    if current is not None:
        current.add_done_callback(request_ended)
    shown: list[dict[str, Any]] = []
    try:
        while True:
            step = await host.run_in_trio(inline.next_output, shown)
            if step.statuses:
                await say(step.statuses)
            change = diff(shown, step.output)
            if change.needs_snapshot:
                # A rewrite the request's stream cannot carry (an item replaced): the writer takes it on (it
                # sends snapshots) when this request ends, now.
                log.info("owui.turn_rewrite run=%s (handed to the writer)", turn.run_id)
                return
            for event in change.events:
                yield event["data"]
            shown = step.output
            if step.over:
                return
    except asyncio.CancelledError:
        log.info("owui.request_cancelled run=%s", turn.run_id)
        raise

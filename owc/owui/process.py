"""owc inside Open WebUI: the one runtime of this process, how it starts, where its settings come from, and how it
closes (issue 12; reference ``pipe-runtime-0.12.4.md`` sections 1, 9 and 10).

* **Started once per process**, from whichever comes first: the startup Event Function at
  ``system.startup.completed`` or the Pipe's first ``pipe()`` call. Both call ``ensure_started``; the second
  caller gets the same runtime (``owc.owui.trio_host.start`` keeps the one guest run; this module keeps what it was
  started with, because Open WebUI re-executes a Function's file on every save and module state there is lost).
* **Open WebUI's page and Stop route are patched** once per process at the start (``owc.owui.page``: the hook that
  tells a Stop from "Send now" in every tab), and unpatched at the close.
* **Closed at ``system.shutdown.started``** through an entry in ``open_webui.events.EVENT_SINKS``: uvicorn re-raises
  SIGTERM right after the lifespan's shutdown, before leftover asyncio tasks are cancelled, so only a sink awaited
  inside the lifespan closes owc cleanly (the Gateway socket closed, the guest run ended; a run still going is
  finished by the next process's reconcile from its transcript).
* **Settings**: the Gateway URL, agent id and token from the Pipe's Valves, else from the environment
  (``OWC_GATEWAY_URL``, ``OWC_AGENT_ID``, ``OWC_GATEWAY_TOKEN`` or ``OWC_GATEWAY_TOKEN_FILE``); the database is
  Open WebUI's own (its ``DATABASE_URL``), written through owc's store under the same row lock Open WebUI uses.
  The token is never logged or echoed in an error. owc signs in as a device kept in ``<DATA_DIR>/owc`` (the
  folder that survives a container rebuild; the ``DEVICE_DIR`` valve), which a Gateway on another host pairs;
  ``wss://`` takes a CA file and a certificate pin (``GATEWAY_CA_FILE``, ``GATEWAY_TLS_PIN``). A saved valve
  applies at once (``apply_changes``: the Gateway connection closed and the next opened with it); a refusal
  retrying cannot fix is held, and said in each reply (issue 25).

Several uvicorn workers are several processes: one runtime each, racing safely through the claim's row lock.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import trio

from owc.gateway import GatewayConfig
from owc.gateway.url import redact_url
from owc.owui import models, trio_host
from owc.owui.emitter import OpenWebUISurface, OwuiEmitter, Surface
from owc.owui.files import OwuiFiles
from owc.owui.questions import OwuiAsker
from owc.protocol import refusals
from owc.runtime import Runtime, RuntimeConfig, open_runtime
from owc.store import open_store

log = logging.getLogger("owc.owui")

DEFAULT_GATEWAY_URL = "ws://127.0.0.1:18789"
DEFAULT_AGENT_ID = "main"


class SettingsError(ValueError):
    """owc cannot start with these settings (no Gateway token, a bad URL). The message never holds the token."""


@attrs.frozen
class HostSettings:
    """What the process's runtime is started with."""

    gateway_url: str = attrs.field(repr=lambda url: repr(redact_url(url)))
    token: str = attrs.field(repr=False)
    database_url: str = attrs.field(repr=lambda url: repr(redact_url(url)))
    agent_id: str = DEFAULT_AGENT_ID
    instance_id: str = "owc-openwebui"
    #: owc's device identity folder (``owc/device.py``): ``<DATA_DIR>/owc`` unless the DEVICE_DIR valve says
    #: otherwise (``off``: the shared token alone). A Gateway on another host pairs this device.
    device_dir: Path | None = None
    #: ``wss://``: a CA file to trust besides the system's, and the Gateway certificate's SHA-256 pin.
    ca_file: Path | None = None
    pin_sha256: str | None = None
    #: Where the token came from (a valve's or a variable's name, never the value): a refusal's line names it.
    token_source: str = "GATEWAY_TOKEN"
    #: The usage line after each reply (the USAGE_LINE valve): applies from the next reply, no reconnect.
    usage_line: bool = True
    #: The DEFAULT_MODEL valve as saved (a model key, '' for the agent's own default): carried here only so the
    #: valve's select can show the saved value (``default_model_options``); each turn reads it from its Valves.
    default_model: str = ""

    def gateway_config(self) -> GatewayConfig:
        """The connection's settings. A refusal retrying cannot fix (a wrong token) is held, not raised: owc goes on
        answering each message and the model picker with its line, and connects once a valve changes."""
        return GatewayConfig(
            instance_id=self.instance_id,
            device_dir=self.device_dir,
            ca_file=self.ca_file,
            pin_sha256=self.pin_sha256,
            names=refusals.pipe_names(self.token_source),
            hold_refusals=True,
        )


#: The settings a connection is made with, by the valve that sets each (a change closes the connection and opens
#: the next with the new ones at once: ``apply_changes``).
CONNECTION_VALVES = {
    "gateway_url": "GATEWAY_URL",
    "token": "GATEWAY_TOKEN",
    "device_dir": "DEVICE_DIR",
    "ca_file": "GATEWAY_CA_FILE",
    "pin_sha256": "GATEWAY_TLS_PIN",
}


def connection_changes(old: HostSettings, new: HostSettings) -> tuple[str, ...]:
    """The valves whose connection setting differs between ``old`` and ``new`` (names only, never a value). The
    agent id and the model valves are read on each call and need no reconnect; the database is Open WebUI's own."""
    return tuple(valve for field, valve in CONNECTION_VALVES.items() if getattr(old, field) != getattr(new, field))


def _value(valves: Any, name: str) -> str:
    """A valve's value as text ('' when unset): Valves are a pydantic model or, in tests, a mapping."""
    raw = valves.get(name) if isinstance(valves, Mapping) else getattr(valves, name, None)
    return raw.strip() if isinstance(raw, str) else ""


def open_webui_database_url() -> str:
    """Open WebUI's own database (its ``DATABASE_URL``, which defaults to ``sqlite:///$DATA_DIR/webui.db``)."""
    from open_webui.env import DATABASE_URL  # imported here: owc imports without Open WebUI installed

    return str(DATABASE_URL)


def open_webui_data_dir() -> Path | None:
    """Open WebUI's ``DATA_DIR`` (the folder that survives a container rebuild), None outside Open WebUI."""
    try:
        from open_webui.env import DATA_DIR  # imported here: owc imports without Open WebUI installed
    except ImportError:
        return None
    return Path(DATA_DIR)


#: The DEVICE_DIR valve's value that turns the device off (the shared token alone: the Gateway's loopback only).
DEVICE_OFF = "off"


def _device_dir(valves: Any, env: Mapping[str, str], data_dir: Path | None) -> Path | None:
    chosen = _value(valves, "DEVICE_DIR") or env.get("OWC_DEVICE_DIR", "").strip()
    if chosen.lower() == DEVICE_OFF:
        return None
    if chosen:
        if not Path(chosen).is_absolute():
            raise SettingsError(f"the DEVICE_DIR valve must be an absolute path (or {DEVICE_OFF!r}), not {chosen!r}")
        return Path(chosen)
    from owc import device

    try:
        return device.default_state_dir(hosted=True, data_dir=data_dir or open_webui_data_dir(), environ=env)
    except ValueError:
        raise SettingsError(
            "Open WebUI's DATA_DIR is unknown: set the Pipe's DEVICE_DIR valve (a folder for owc's device identity)"
        ) from None


def _tls(valves: Any, env: Mapping[str, str]) -> tuple[Path | None, str | None]:
    from owc.gateway.admission import parse_pin

    ca = _value(valves, "GATEWAY_CA_FILE") or env.get("OWC_GATEWAY_CA_FILE", "").strip()
    if ca and not Path(ca).is_file():
        raise SettingsError(f"the GATEWAY_CA_FILE valve names {ca!r}, which is not a file on Open WebUI's host")
    try:
        pin = parse_pin(_value(valves, "GATEWAY_TLS_PIN") or env.get("OWC_GATEWAY_TLS_PIN", "").strip())
    except ValueError as exc:
        raise SettingsError(f"the GATEWAY_TLS_PIN valve: {exc}") from None
    return (Path(ca) if ca else None), pin


def settings_from(
    valves: Any,
    environ: Mapping[str, str] | None = None,
    *,
    database_url: str | None = None,
    data_dir: Path | None = None,
) -> HostSettings:
    """The runtime's settings: each from the Valves when set there, else from the environment. Raises
    ``SettingsError`` when no token can be found (naming where to put one, never a value), or a setting cannot
    work (naming the valve). ``data_dir``: Open WebUI's ``DATA_DIR`` (read from Open WebUI when None)."""
    env = os.environ if environ is None else environ
    if _value(valves, "GATEWAY_URL"):
        pasted, source = _value(valves, "GATEWAY_URL"), "the GATEWAY_URL valve"
    else:
        pasted, source = env.get("OWC_GATEWAY_URL", "").strip() or DEFAULT_GATEWAY_URL, "OWC_GATEWAY_URL"
    agent = _value(valves, "AGENT_ID") or env.get("OWC_AGENT_ID", "").strip() or DEFAULT_AGENT_ID
    token, token_source = _value(valves, "GATEWAY_TOKEN"), "GATEWAY_TOKEN"
    if not token:
        token, token_source = env.get("OWC_GATEWAY_TOKEN", "").strip(), "OWC_GATEWAY_TOKEN"
    if not token:
        path, token_source = _value(valves, "GATEWAY_TOKEN_FILE"), "GATEWAY_TOKEN_FILE"
        if not path:
            path, token_source = env.get("OWC_GATEWAY_TOKEN_FILE", "").strip(), "OWC_GATEWAY_TOKEN_FILE"
        if path:
            from owc.tokenfile import TokenFileError, read_token_file

            try:
                named = "the GATEWAY_TOKEN_FILE valve" if token_source == "GATEWAY_TOKEN_FILE" else token_source
                read = read_token_file(Path(path), setting=named)
            except TokenFileError as exc:
                raise SettingsError(f"the Gateway token file cannot be used: {exc}") from None
            for warning in read.warnings:
                log.warning("owui.token_file %s", warning)
            token = read.value
    if not token:
        raise SettingsError(
            "no Gateway token: set the Pipe's GATEWAY_TOKEN or GATEWAY_TOKEN_FILE valve, or OWC_GATEWAY_TOKEN /"
            " OWC_GATEWAY_TOKEN_FILE in Open WebUI's environment"
        )
    from owc.gateway.url import InvalidGatewayUrl, parse_gateway_url, url_credentials

    try:
        url = parse_gateway_url(pasted, source=source)  # what people paste: https://host, host:port, a bare host
    except InvalidGatewayUrl as exc:
        raise SettingsError(str(exc)) from None
    if url_credentials(url):
        raise SettingsError(f"the Gateway URL {redact_url(url)} holds a credential: put the token in GATEWAY_TOKEN")
    ca_file, pin = _tls(valves, env)
    return HostSettings(
        gateway_url=url,
        token=token,
        database_url=database_url if database_url is not None else open_webui_database_url(),
        agent_id=agent,
        device_dir=_device_dir(valves, env, data_dir),
        ca_file=ca_file,
        pin_sha256=pin,
        token_source=token_source,
        usage_line=getattr(valves, "USAGE_LINE", True) is not False,
        default_model=models.default_model_of(valves),
    )


@attrs.define
class _Started:
    """What this process's runtime was started with (kept here, not in a Function file: see the module doc)."""

    #: The settings the runtime works with now: those it started with, then each change applied (a valve saved).
    settings: HostSettings
    surface: Surface


#: The process's one runtime, with the host it runs in (``trio_host._HOST``): set by ``ensure_started``.
_STARTED: _Started | None = None


async def _main(*, task_status: trio.TaskStatus[Runtime] = trio.TASK_STATUS_IGNORED) -> None:
    """owc's Trio main inside Open WebUI: the store on Open WebUI's database, the runtime with the Open WebUI
    emitter; runs until the host closes."""
    started, host = _STARTED, trio_host.process_host()
    assert started is not None and host is not None, "owc's host main runs only from ensure_started"
    settings = started.settings
    emitter = OwuiEmitter(host, started.surface)
    config = RuntimeConfig(
        url=settings.gateway_url,
        token=settings.token,
        gateway=settings.gateway_config(),
        usage_line=settings.usage_line,
    )
    try:
        async with open_store(settings.database_url) as store:
            opened: Runtime | None = None
            try:
                async with open_runtime(config, store, emitter, OwuiAsker(host), OwuiFiles(host)) as runtime:
                    opened = runtime
                    runtime.agent_id = settings.agent_id
                    log.info("owui.runtime_started gateway=%s", redact_url(settings.gateway_url))
                    task_status.started(runtime)
                    await trio.sleep_forever()  # timer-ok: no clock; the runtime serves until the host closes
            finally:
                if opened is not None:
                    with trio.CancelScope(shield=True):  # Open WebUI is stopping: the next process takes over
                        await opened.release_held()
    finally:
        emitter.release_all()


async def ensure_started(settings: HostSettings, surface: Surface | None = None, *, app: Any = None) -> Runtime:
    """The process's runtime, started on first call (from the loop's asyncio side: the Event Function at
    startup, or a ``pipe()`` call). Later calls return it, with settings changed meanwhile (a valve saved)
    applied at once (``apply_changes``). Installs the shutdown sink on first start, and owc's patches of Open WebUI's
    ``app`` (``owc.owui.page``) once."""
    global _STARTED
    host = trio_host.process_host()
    previous: HostSettings | None = None
    if _STARTED is None or host is None or host.ended:
        _STARTED = _Started(settings=settings, surface=surface or OpenWebUISurface(app))
        if install_shutdown_sink():
            # Inside Open WebUI (not a test's stand-in): every owc line says its pid and worker, so with several
            # workers the operator can tell which one served a request (issue 31).
            from owc.logs import stamp_open_webui

            stamp_open_webui()
    elif _STARTED.settings != settings:
        previous, _STARTED.settings = _STARTED.settings, settings
    host = await trio_host.start(_main)
    runtime = host.started_value
    assert isinstance(runtime, Runtime)
    if previous is not None:
        await apply_changes(host, runtime, previous, settings)
    if app is not None:
        # A page served from now on carries the hook, and its Stop is recorded (owc.owui.page); once per process.
        from owc.owui import page

        page.install(app)
    return runtime


async def apply_changes(host: trio_host.TrioHost, runtime: Runtime, old: HostSettings, new: HostSettings) -> None:
    """A valve saved (issue 25, item 6): a changed connection setting closes the connection and opens the next with
    the new settings at once (``Runtime.reconfigure``); runs in flight are carried by the ledger, as across any
    reconnect. Open WebUI says "Valves updated successfully" when it saved them; from here they are in force. One
    log line naming the valves (never a value)."""
    if old.usage_line != new.usage_line:
        runtime.keeper.usage_line = new.usage_line  # read at each finalize: the next reply follows the valve
        log.info("owui.settings_applied changed=USAGE_LINE (from the next reply)")
    if old.agent_id != new.agent_id:
        runtime.agent_id = new.agent_id
    changed = connection_changes(old, new)
    if not changed:
        return
    log.info("owui.settings_applied changed=%s (reconnecting with them now)", ",".join(changed))
    await host.run_in_trio(_reconfigure, runtime, new)


async def _reconfigure(runtime: Runtime, settings: HostSettings) -> None:
    runtime.reconfigure(settings.gateway_url, settings.token, settings.gateway_config())


def current_runtime() -> tuple[trio_host.TrioHost, Runtime]:
    """The process's running host and runtime (after ``ensure_started``); raises ``HostError`` if owc is not
    running (closing, or never started)."""
    host = trio_host.current_host()
    runtime = host.started_value if host is not None else None
    if host is None or not isinstance(runtime, Runtime):
        raise trio_host.HostError("owc is not running")
    return host, runtime


def default_model_options() -> list[dict[str, str]]:
    """The DEFAULT_MODEL valve's select options (its Valves' ``get_model_options``, which Open WebUI 0.12.4 calls
    synchronously on its loop when an admin opens the valves: ``resolve_valves_schema_options``): the empty choice,
    the Gateway's models as this process's runtime last listed them (``Runtime.gateway_models``, refreshed by each
    model list), and the saved value (the settings owc last applied). owc not running: the empty choice and the
    saved value it last had, if any. Never raises (``models.default_model_options``)."""
    saved = _STARTED.settings.default_model if _STARTED is not None else ""
    try:
        _, runtime = current_runtime()
        known = list(runtime.gateway_models)
    except Exception:  # not running, closing: the saved value alone
        known = []
    return models.default_model_options(known, saved)


async def shutdown() -> None:
    """Close owc: its Gateway connection and every writer (a run still going is left to the next process), and its
    patches of Open WebUI's page and Stop route."""
    from owc.owui import page

    host = trio_host.process_host()
    try:
        if host is not None and not host.ended:
            await host.aclose()
    finally:
        page.uninstall()


class ShutdownSink:
    """An ``open_webui.events.EVENT_SINKS`` entry: closes owc at ``system.shutdown.started`` (awaited inside the
    lifespan, unlike an Event Function, which Open WebUI only schedules)."""

    async def handle_event(self, app: Any, event: Any, request: Any = None) -> None:
        name = getattr(event, "event", None) or (event.get("event") if isinstance(event, Mapping) else None)
        if name == "system.shutdown.started":
            log.info("owui.shutdown (Open WebUI is stopping)")
            await shutdown()


def install_shutdown_sink() -> bool:
    """Append the shutdown sink to Open WebUI's event sinks once. False when Open WebUI is not importable."""
    try:
        from open_webui import events
    except ImportError:
        return False
    sinks = getattr(events, "EVENT_SINKS", None)
    if not isinstance(sinks, list):
        log.warning("owui.no_event_sinks (owc will not close cleanly on shutdown)")
        return False
    if not any(isinstance(sink, ShutdownSink) for sink in sinks):
        sinks.append(ShutdownSink())
    return True

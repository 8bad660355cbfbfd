"""The ``owc`` command.

* ``owc demo``: the simulator, owc and an embedded SQLite database with Open WebUI's schema; plays a built-in
  scenario and prints each chat's message tree and what the tabs were told.
* ``owc scenario run FILE --db URL``: plays a scenario file through owc into a database; exit 0 when every run
  settled and every ended run's message is finished.
* ``owc run --gateway URL --token-file F --db URL``: owc as a standalone bridge to a real Gateway.
* ``owc sim``: the Gateway simulator, standalone (optionally playing a scenario file).
* ``owc owui repair-variants --db URL [--apply]``: the old Pipe's variant groups in one line (owc/store/repair.py).

Every failure the user can fix ends in one line on stderr and an exit code of its own (``EPILOG``), never a
traceback: a traceback is left for owc's own bugs.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from owc import __version__
from owc.emit import NoTasks

if TYPE_CHECKING:
    from owc.gateway import GatewayConfig

EXIT_OK = 0
#: A scenario or the demo found an ended run's message unfinished, or a run that showed something without one.
EXIT_INVARIANTS = 1
#: Bad arguments, a scenario file that cannot be read or parsed, a scenario error found while playing.
EXIT_USAGE = 2
#: The token file, the database URL, the Gateway URL, an address to listen on.
EXIT_CONFIG = 3
#: The Gateway refused the connection: a wrong token, missing scopes, a protocol mismatch.
EXIT_REFUSED = 4
#: ``owc owui repair-variants``: the database stayed locked past the busy wait (another writer held it).
EXIT_BUSY = 5
#: ``owc owui status``: a check does not hold (its ``NO`` line says which).
EXIT_UNHEALTHY = 6

#: ``owc run``'s token when ``--token-file`` is not given.
TOKEN_ENV = "OWC_GATEWAY_TOKEN"
#: ``owc owui install``'s admin password when ``--admin-password-file`` is not given.
OWUI_PASSWORD_ENV = "OWC_OWUI_ADMIN_PASSWORD"

EPILOG = f"""\
exit codes:
  {EXIT_OK}      done (owc run and owc sim: stopped by Ctrl-C or SIGTERM)
  {EXIT_INVARIANTS}      invariants violated: the scenario or demo left an ended run's message unfinished, or
         a run that showed something has no message
  {EXIT_USAGE}      usage or scenario error: bad arguments, a scenario file that cannot be read or parsed, a
         scenario error found while playing
  {EXIT_CONFIG}      configuration error: the token file (missing, unreadable, empty), the database URL, the
         Gateway URL (not ws:// or wss://, or holding a credential), an address to listen on
  {EXIT_REFUSED}      the Gateway refused the connection: a wrong token, missing scopes, a protocol mismatch
  {EXIT_BUSY}      owc owui repair-variants: the database stayed locked past the busy wait; nothing more was
         written (run the same command again)
  {EXIT_UNHEALTHY}      owc owui status: a check does not hold (its NO line says which)
  128+N  owc demo / owc scenario run stopped by signal N before the end (130: Ctrl-C)

environment:
  {TOKEN_ENV}  the Gateway's shared token for owc run when --token-file is not given
"""


class CliError(Exception):
    """A failure the user can fix: ``main`` prints ``owc: <message>`` on stderr and exits with ``code``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _gateway_arguments(command: argparse.ArgumentParser) -> None:
    """How to reach and sign in to a Gateway: shared by ``owc run`` and ``owc doctor``, so what ``doctor``
    checks is exactly what ``run`` will do."""
    command.add_argument(
        "--gateway",
        required=True,
        help="the OpenClaw Gateway: ws:// or wss:// URL, or what you would paste (https://host, host:port, a bare"
        " host: port 18789); no token in it (see --token-file)",
    )
    command.add_argument(
        "--token-file",
        type=Path,
        help=f"file holding the Gateway's shared token (mode 0600); default: the {TOKEN_ENV} environment variable",
    )
    device = command.add_mutually_exclusive_group()
    device.add_argument(
        "--device-dir",
        type=Path,
        default=None,
        help="folder of owc's device identity (`owc device show`), which a Gateway on another host pairs;"
        " default: ~/.local/state/owc ($XDG_STATE_HOME/owc)",
    )
    device.add_argument(
        "--no-device",
        action="store_true",
        help="sign in with the shared token alone (enough only on the Gateway's own loopback)",
    )
    command.add_argument("--ca-file", type=Path, default=None, help="wss://: a CA file to trust besides the system's")
    command.add_argument(
        "--tls-pin",
        default=None,
        metavar="SHA256",
        help="wss://: accept only the Gateway certificate with this SHA-256 fingerprint (its generated certificate"
        " names no host: pin it)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="owc",
        description="owc: the Trio runtime that puts OpenClaw agent runs into Open WebUI chats.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"owc {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser("demo", help="play a built-in scenario through owc into an embedded SQLite database")
    demo.add_argument(
        "--db", default="owc-demo.db", help="SQLite file to create (replaced if present; default owc-demo.db)"
    )

    scenario = sub.add_parser("scenario", help="scenario files (docs/scenarios.md)")
    scenario_sub = scenario.add_subparsers(dest="scenario_command", metavar="ACTION", required=True)
    play = scenario_sub.add_parser("run", help="play a scenario through owc into a database")
    play.add_argument("file", type=Path)
    play.add_argument(
        "--db", required=True, help="sqlite:///path or postgresql+psycopg://... (tables are created if absent)"
    )
    play.add_argument("-q", "--quiet", action="store_true", help="print only the result")

    run = sub.add_parser(
        "run",
        help="run owc against a real Gateway until interrupted",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _gateway_arguments(run)
    run.add_argument("--db", required=True, help="Open WebUI's database URL")
    run.add_argument("--instance", default=None, help="a name for this deploy (client.instanceId)")
    run.add_argument(
        "--no-usage-line",
        dest="usage_line",
        action="store_false",
        help="no status line with the context used and the rate limits after each reply",
    )

    doctor = sub.add_parser(
        "doctor",
        help="connect to a Gateway once and say what works: reachable, authenticated, paired, scopes, protocol",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _gateway_arguments(doctor)

    dev = sub.add_parser("device", help="owc's device identity, for a Gateway on another host")
    dev_sub = dev.add_subparsers(dest="device_command", metavar="ACTION", required=True)
    for name, text in (
        ("show", "the device's id and public key (made now if there is none): what the Gateway's pairing lists"),
        ("export", "print the identity (its private key and device token: a secret) for a rebuilt container"),
        ("import", "store an identity `owc device export` printed (read from --file, or standard input)"),
    ):
        action = dev_sub.add_parser(name, help=text)
        action.add_argument(
            "--dir", type=Path, default=None, help="the identity's folder (default: ~/.local/state/owc)"
        )
        if name == "import":
            action.add_argument("--file", type=Path, default=None, help="the exported text (default: stdin)")
            action.add_argument("--replace", action="store_true", help="replace a different identity stored there")

    sim = sub.add_parser("sim", help="run the OpenClaw Gateway simulator on loopback")
    sim.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    sim.add_argument("--port", type=int, default=18789, help="port (0 picks a free one; default 18789)")
    token = sim.add_mutually_exclusive_group()
    token.add_argument("--token-file", type=Path, help="file holding the shared token clients must send")
    token.add_argument(
        "--token", help="the shared token (prefer --token-file: command lines are visible to other users)"
    )
    sim.add_argument(
        "--scenario", type=Path, help="a scenario file (JSON lines, docs/scenarios.md) to play once started"
    )
    sim.add_argument("--exit-after-scenario", action="store_true", help="stop once the scenario has played")
    sim.add_argument(
        "--cli-runtime", action="store_true", help="model a CLI-backend runtime (cli-assistant:<runId> ids)"
    )
    owui = sub.add_parser("owui", help="owc inside Open WebUI")
    owui_sub = owui.add_subparsers(dest="owui_command", metavar="ACTION", required=True)
    inst = owui_sub.add_parser(
        "install",
        help="create or update owc's Functions in a running Open WebUI (keeping their valves), activate them",
    )
    inst.add_argument("--url", required=True, help="Open WebUI's address, e.g. http://localhost:8080")
    inst.add_argument("--admin-email", required=True, help="an Open WebUI admin's email")
    inst.add_argument(
        "--admin-password-file",
        type=Path,
        help=f"file holding the admin's password (else ${OWUI_PASSWORD_ENV}, else a prompt)",
    )
    inst.add_argument("--gateway-url", help="set the Pipe's GATEWAY_URL valve (ws:// or wss://)")
    inst.add_argument("--agent", help="set the Pipe's AGENT_ID valve")
    inst.add_argument(
        "--gateway-token-file", help="set the Pipe's GATEWAY_TOKEN_FILE valve (a path on Open WebUI's host)"
    )
    _owui_migration_parsers(owui_sub)
    rep = owui_sub.add_parser(
        "repair-variants",
        help="put the old Pipe's 1/2 · 2/2 proactive variant groups in one line: on a copy first (a diff of every"
        " chat), then with --apply chat by chat under the row lock, each chat backed up",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rep.add_argument("--db", required=True, help="Open WebUI's database URL (sqlite:///path or postgresql://...)")
    rep.add_argument("--apply", action="store_true", help="after the copy run, repair the database itself")
    rep.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder (made, mode 0700) for the copy, the diff and the backups; default ./owc-repair-<UTC time>",
    )
    rep.add_argument(
        "--restore",
        action="store_true",
        help="instead: put back every chat backed up in --out (an earlier --apply's folder) exactly",
    )
    rep.add_argument(
        "--busy-timeout", type=int, default=5000, metavar="MS", help="wait for a locked chat (default 5000 ms)"
    )
    return parser


def _owui_connection(p: argparse.ArgumentParser) -> None:
    """The options every ``owc owui`` command that talks to a running Open WebUI takes (``install``'s)."""
    p.add_argument("--url", required=True, help="Open WebUI's address, e.g. http://localhost:8080")
    p.add_argument("--admin-email", required=True, help="an Open WebUI admin's email")
    p.add_argument(
        "--admin-password-file",
        type=Path,
        help=f"file holding the admin's password (else ${OWUI_PASSWORD_ENV}, else a prompt)",
    )


def _owui_migration_parsers(owui_sub: Any) -> None:
    """``owc owui migrate`` / ``rollback`` / ``status`` (issue 30, owc/owui/migrate.py)."""
    backup_help = "folder of the migration backups (default DATA_DIR/owc/owui-backups, else ~/.local/state/owc/...)"
    mig = owui_sub.add_parser(
        "migrate",
        help="replace the old Pipe (openclaw_gateway) by owc in place: backup, valves, its device identity",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _owui_connection(mig)
    mig.add_argument("--dry-run", action="store_true", help="print what it would do; change nothing")
    mig.add_argument("--backup-dir", type=Path, help=backup_help)
    mig.add_argument(
        "--device-dir",
        type=Path,
        help="owc's device folder as Open WebUI sees it (default DATA_DIR/owc when run in Open WebUI's environment;"
        " given, it also goes into the DEVICE_DIR valve)",
    )
    mig.add_argument(
        "--old-state-dir", type=Path, help="where the old Pipe's STATE_DIR is readable here (default: its valve)"
    )
    mig.add_argument(
        "--replace-device", action="store_true", help="put the old device there even if owc has another one"
    )
    rb = owui_sub.add_parser(
        "rollback",
        help="restore the Functions and valves a migration backed up, exactly",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _owui_connection(rb)
    rb.add_argument("--backup-dir", type=Path, help=backup_help + "; the newest backup in it is restored")
    rb.add_argument("--backup", type=Path, help="restore this backup folder instead")
    st = owui_sub.add_parser(
        "status",
        help="owc's Functions, models, Gateway, token, device: one line per check; exit 0 only when all hold",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _owui_connection(st)


def _read_token(path: Path) -> str:
    """The token in ``path``; its warnings (group/world readable, a symbolic link) go to stderr, one line
    each. A missing, unreadable or empty file is a configuration error."""
    from owc.tokenfile import TokenFileError, read_token_file

    try:
        token = read_token_file(path)
    except TokenFileError as exc:
        raise CliError(EXIT_CONFIG, str(exc)) from None
    for warning in token.warnings:
        print(f"owc: warning: {warning}", file=sys.stderr, flush=True)
    return token.value


def _sim_token(args: argparse.Namespace) -> tuple[str, str]:
    """The token and where it came from. A generated token is written to a new 0600 file (``owc.tokenfile``:
    exclusive, never through a symbolic link), never printed."""
    from owc.tokenfile import TokenFileError, write_new_token_file

    if args.token is not None:
        return args.token, "--token"
    if args.token_file is not None:
        return _read_token(args.token_file), str(args.token_file)
    path = Path("owc-sim.token").absolute()  # not resolve(): that would follow a planted symbolic link
    token = secrets.token_urlsafe(24)
    try:
        write_new_token_file(path, token)
    except TokenFileError as exc:
        raise CliError(EXIT_CONFIG, str(exc)) from None
    return token, str(path)


def _read_scenario(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(EXIT_USAGE, f"{path}: {getattr(exc, 'strerror', None) or exc}") from None


async def _run_sim(args: argparse.Namespace) -> int:
    from owc.sim import open_simulator
    from owc.sim.scenario import ScenarioError, parse_scenario, play_file

    token, source = _sim_token(args)
    scenario = None
    if args.scenario is not None:
        scenario = _read_scenario(args.scenario)
        try:
            parse_scenario(scenario)  # fail before listening
        except ScenarioError as exc:
            raise CliError(EXIT_USAGE, f"{args.scenario}: {exc}") from None
    async with AsyncExitStack() as stack:
        try:
            sim = await stack.enter_async_context(
                open_simulator(token=token, host=args.host, port=args.port, cli_runtime=args.cli_runtime)
            )
        except* OSError as group:
            reason = _leaves(group)[0]
            raise CliError(
                EXIT_CONFIG, f"cannot listen on {args.host}:{args.port}: {getattr(reason, 'strerror', None) or reason}"
            ) from None
        print(f"owc sim listening on {sim.url} (boot {sim.boot_id}); token from {source}", flush=True)
        if scenario is not None:
            try:
                await play_file(sim, scenario)
            except* ScenarioError as group:
                raise CliError(EXIT_USAGE, f"{args.scenario}: scenario failed: {_leaves(group)[0]}") from None
            print("scenario played", flush=True)
            if args.exit_after_scenario:
                return EXIT_OK
        await trio.sleep_forever()  # timer-ok: no deadline; the simulator serves until Ctrl-C
    return EXIT_OK


def _tree_lines(messages: dict, names: dict[str, str], cut: set[str]) -> list[str]:
    """The chat's message tree, one line a message: the scenario's run name, done or not, cards, text."""
    from owc.render import count_cards

    children: dict[str | None, list[str]] = {}
    for mid, m in messages.items():
        children.setdefault(m.get("parentId"), []).append(mid)
    lines: list[str] = []

    def walk(parent: str | None, depth: int) -> None:
        for mid in sorted(children.get(parent, []), key=lambda i: messages[i].get("timestamp") or 0):
            m = messages[mid]
            text = (m.get("content") or "").replace("\n", " / ")
            cards = count_cards(m.get("output") or [])
            run = (m.get("meta") or {}).get("openclaw_run")
            who = f"run {names.get(mid, run)!r}" if run else "user turn" if m.get("role") == "user" else m.get("role")
            if m.get("role") != "assistant":
                flags = ""
            elif m.get("done"):
                flags = " done"
            elif run in cut:
                flags = " NOT DONE (cut without a terminal: the Gateway's recovery run continues it)"
            else:
                flags = " NOT DONE"
            extra = f" [{cards} tool card{'s' if cards != 1 else ''}]" if cards else ""
            error = m.get("error") if isinstance(m.get("error"), dict) else None
            if error and error.get("content"):
                extra += f" [error: {str(error['content'])[:60]}]"
            lines.append(f"{'  ' * depth}- {who}{flags}{extra}: {text[:90]}")
            walk(mid, depth + 1)

    walk(None, 1)
    return lines


def _told(events: list) -> str:
    """What the tabs were told about one message, in words."""
    kinds = [e.type if e.type != "response:completion" else e.event["data"].get("type", e.type) for e in events]
    parts = []
    if "chat:messages" in kinds:
        parts.append("view moved to it")
    deltas = kinds.count("response.output_text.delta")
    cards = sum(
        1
        for e in events
        if e.type == "response:completion"
        and e.event["data"].get("type") == "response.output_item.added"
        and e.event["data"]["item"].get("type") == "function_call"
    )
    if deltas or cards:
        parts.append(f"{deltas} text update{'s' if deltas != 1 else ''}, {cards} card{'s' if cards != 1 else ''} live")
    snapshots = sum(1 for e in events if e.type == "chat:completion" and not e.event["data"].get("done"))
    if snapshots:
        parts.append(f"{snapshots} snapshot{'s' if snapshots != 1 else ''}")
    if any(e.type == "chat:completion" and e.event["data"].get("done") for e in events):
        parts.append("finished")
    if "chat:message:error" in kinds:
        parts.append("told it could not be saved")
    return "; ".join(parts) or "nothing"


def _print_played(played, *, tabs: bool) -> None:
    from owc import ids
    from owc.sim.play import message_names

    player = played.player
    names = message_names(player)
    cut = {run.run_id for run in player.runs.values() if run.run.terminal is None}
    for name, messages in played.chats.items():
        spec = player.chats[name]
        print(f"\nchat {name!r} ({spec.chat_id}), key {spec.session_key}")
        for line in _tree_lines(messages, names, cut):
            print(line)
        if tabs:
            by_message: dict[str, list] = {}
            for e in played.emitter.events:
                if e.chat_id == spec.chat_id:
                    by_message.setdefault(e.message_id, []).append(e)
            for mid, events in by_message.items():
                print(f"    the tabs, about run {names.get(mid, mid[:8])!r}: {_told(events)}")
    quiet = []
    shown = {mid for messages in played.chats.values() for mid in messages}
    for op_name, run in player.runs.items():
        ref = ids.parse_session_key(run.run.key)
        mid = ids.message_id(run.run.key, run.run_id)
        if ref is None:
            quiet.append(f"run {op_name!r}: its session {run.run.key} is not an Open WebUI chat")
        elif mid is None:
            quiet.append(f"run {op_name!r}: an Open WebUI action's own run")
        elif mid not in shown and not any(name == op_name for _, name in played.missing):
            why = "a heartbeat that only acknowledged" if run.run.heartbeat else "it showed nothing (a silent reply)"
            quiet.append(f"run {op_name!r}: {why}")
    if quiet:
        print("\nruns with no message, as designed:")
        for line in quiet:
            print(f"  - {line}")


async def _run_demo(args: argparse.Namespace) -> int:
    from importlib.resources import files

    from owc.sim.play import play_scenario

    path = Path(args.db)
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    text = files("owc").joinpath("demo.jsonl").read_text()
    await trio.to_thread.run_sync(_check_database, f"sqlite:///{path}")
    print(f"owc demo: Gateway simulator on 127.0.0.1 -> owc -> {path} (Open WebUI's schema)")
    played = await play_scenario(text, f"sqlite:///{path}", progress=lambda line: print(f"  {line}", flush=True))
    _print_played(played, tabs=True)
    for chat, run in played.unfinished:
        print(f"NOT FINISHED in chat {chat!r}: the message of run {run!r}, which has ended")
    verdict = (
        "every ended run's message is finished"
        if not played.unfinished
        else f"{len(played.unfinished)} ended runs' messages not finished"
    )
    print(f"\n{played.claims} messages claimed, {played.finalized} finalized; {verdict}")
    return EXIT_OK if not played.unfinished else EXIT_INVARIANTS


async def _run_scenario(args: argparse.Namespace) -> int:
    from owc.sim.play import play_scenario
    from owc.sim.scenario import ScenarioError

    text = _read_scenario(args.file)
    await trio.to_thread.run_sync(_check_database, args.db)
    try:
        played = await play_scenario(
            text, args.db, progress=None if args.quiet else (lambda line: print(f"  {line}", flush=True))
        )
    except* ScenarioError as group:  # found while parsing, or while playing (inside the player's nurseries)
        raise CliError(EXIT_USAGE, f"{args.file}: {_leaves(group)[0]}") from None
    if not args.quiet:
        _print_played(played, tabs=False)
    for chat, run in played.unfinished:
        print(f"NOT FINISHED in chat {chat}: the message of run {run}, which has ended", file=sys.stderr)
    for chat, run in played.missing:
        print(f"MISSING in chat {chat}: run {run} showed something and has no message", file=sys.stderr)
    for failure in played.failures:
        print(f"EXPECTED {failure}", file=sys.stderr)
    print(
        f"{args.file}: {played.claims} claimed, {played.finalized} finalized, {len(played.unfinished)} unfinished,"
        f" {len(played.missing)} missing, {len(played.failures)} expectations failed"
    )
    return EXIT_OK if not played.unfinished and not played.missing and not played.failures else EXIT_INVARIANTS


class _LogEmitter(NoTasks):
    """``owc run`` outside Open WebUI (no tabs): it logs what it would tell them."""

    def __init__(self) -> None:
        self.log = logging.getLogger("owc.emit")

    async def emit(self, chat_id: str, message_id: str, user_id: str, event: dict) -> None:
        self.log.info("emit chat=%s message=%s type=%s", chat_id, message_id, event.get("type"))

    async def save_stream(self, chat_id: str, message_id: str, output: list) -> None:
        pass

    async def clear_stream(self, chat_id: str, message_id: str) -> None:
        pass


def _check_database(url: str) -> None:
    """Connect to the database once before anything else starts: a URL owc cannot use (unsupported, malformed,
    unreachable, a file that cannot be opened) is a configuration error, reported in one line (redacted: a
    database URL may hold a password). Tables are left to ``open_store``: two processes starting at once may
    race to create them, which is no configuration error."""
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    from owc.store import make_engine

    try:
        engine = make_engine(url)
    except (ValueError, SQLAlchemyError, ImportError) as exc:
        raise _database_error(url, exc) from None
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        raise _database_error(url, exc) from None
    finally:
        engine.dispose()


@contextmanager
def _database_errors(url: str) -> Iterator[None]:
    """A database error that escapes ``owc run`` (creating the tables at start: a missing privilege, a
    read-only file) is the database's configuration; a writer's own errors never escape (they are its run's)."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        yield
    except SQLAlchemyError as exc:
        raise _database_error(url, exc) from None
    except BaseExceptionGroup as group:
        matched, rest = group.split(SQLAlchemyError)
        if matched is None:
            raise
        if rest is not None:
            raise
        raise _database_error(url, _leaves(matched)[0]) from None


def _database_error(url: str, exc: BaseException) -> CliError:
    from owc.gateway.url import redact_url

    return CliError(EXIT_CONFIG, f"database {redact_url(url)}: {_first_line(getattr(exc, 'orig', None) or exc)}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def _gateway_token(args: argparse.Namespace) -> tuple[str, str]:
    """``owc run``'s token and where it came from: ``--token-file``, else ``$OWC_GATEWAY_TOKEN``."""
    if args.token_file is not None:
        return _read_token(args.token_file), str(args.token_file)
    value = os.environ.get(TOKEN_ENV, "").strip()
    if not value:
        raise CliError(EXIT_CONFIG, f"no Gateway token: pass --token-file FILE (mode 0600) or set {TOKEN_ENV}")
    return value, f"${TOKEN_ENV}"


def _parse_gateway(text: str, flag: str) -> tuple[str, str]:
    """The Gateway URL from what was pasted (``https://host``, ``host:port``, a bare host: ``parse_gateway_url``),
    and the form of it that may be shown. One that cannot work, or that holds a credential (userinfo, a ``token=``
    parameter), is a configuration error: a token in a URL ends up in shell history, process lists and proxy
    logs; it belongs in the token file."""
    from owc.gateway.url import InvalidGatewayUrl, parse_gateway_url, redact_url, url_credentials

    try:
        url = parse_gateway_url(text, source=flag)
    except InvalidGatewayUrl as exc:
        raise CliError(EXIT_CONFIG, str(exc)) from None
    found = url_credentials(url)
    if found:
        raise CliError(
            EXIT_CONFIG,
            f"{flag} {redact_url(url)} holds a credential ({', '.join(found)}): remove it from the URL and put"
            f" the token in a file passed with --token-file (mode 0600), or in {TOKEN_ENV}",
        )
    return url, redact_url(url)


def _gateway_url(args: argparse.Namespace) -> tuple[str, str]:
    return _parse_gateway(args.gateway, "--gateway")


def _gateway_config(
    args: argparse.Namespace, *, instance_id: str | None = None, token_source: str | None = None
) -> GatewayConfig:
    """``--device-dir`` / ``--no-device`` / ``--ca-file`` / ``--tls-pin`` as the connection's settings: a device by
    default (a Gateway on another host pairs it; on the Gateway's loopback it is let in without pairing).
    ``token_source``: where the token came from, named in a refusal's line (``owc.protocol.refusals``)."""
    from owc import device
    from owc.gateway import GatewayConfig
    from owc.protocol import refusals

    names = refusals.cli_names(token_source) if token_source is not None else refusals.CLI

    folder = None if args.no_device else (args.device_dir or device.default_state_dir(hosted=False, data_dir=None))
    if args.ca_file is not None and not args.ca_file.is_file():
        raise CliError(EXIT_CONFIG, f"--ca-file {args.ca_file}: no such file")
    try:
        return GatewayConfig(
            instance_id=instance_id, device_dir=folder, ca_file=args.ca_file, pin_sha256=args.tls_pin, names=names
        )
    except ValueError as exc:
        raise CliError(EXIT_CONFIG, f"--tls-pin: {exc}") from None


async def _run_doctor(args: argparse.Namespace) -> int:
    """``owc doctor``: one connect, a report, exit 0 when owc can work against this Gateway (EXIT_REFUSED else)."""
    from owc.gateway.doctor import diagnose

    url, _ = _gateway_url(args)
    token, source = _gateway_token(args)
    report = await diagnose(url, token, _gateway_config(args, instance_id="owc-doctor", token_source=source))
    for line in report.lines():
        print(line)
    return EXIT_OK if report.ok else EXIT_REFUSED


async def _run_bridge(args: argparse.Namespace) -> int:
    """owc against a real Gateway until SIGINT / SIGTERM. The first signal stops it gracefully: runs that have
    ended finish their messages over the still-open connection (bounded by the transport's own timers and the
    database's busy wait), then owc closes; a second signal closes at once. A run still going is left to the
    next start (its reconcile finishes it). A refusal retrying cannot fix (a wrong token) ends it with
    ``EXIT_REFUSED`` (``main`` maps it)."""
    from owc.runtime import RuntimeConfig, open_runtime
    from owc.store import open_store

    url, shown = _gateway_url(args)
    token, source = _gateway_token(args)
    await trio.to_thread.run_sync(_check_database, args.db)
    config = RuntimeConfig(
        url=url,
        token=token,
        gateway=_gateway_config(args, instance_id=args.instance, token_source=source),
        usage_line=args.usage_line,
    )
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals, _database_errors(args.db):
        async with open_store(args.db, create=True) as store, open_runtime(config, store, _LogEmitter()) as runtime:
            print(f"owc running against {shown}; Ctrl-C stops it", flush=True)
            async for signum in signals:
                print(f"owc stopping ({signal.Signals(signum).name})", file=sys.stderr, flush=True)
                break
            async with trio.open_nursery() as nursery:

                async def second_signal() -> None:
                    async for signum in signals:
                        print(f"owc stopping now ({signal.Signals(signum).name})", file=sys.stderr, flush=True)
                        nursery.cancel_scope.cancel()
                        return

                nursery.start_soon(second_signal)
                await runtime.drain()
                nursery.cancel_scope.cancel()
    return EXIT_OK


async def _until_signal(runner, args: argparse.Namespace) -> int:
    """Run a command until it returns or SIGINT / SIGTERM arrives. The signal becomes a cancel of the whole
    tree (not a KeyboardInterrupt raised inside whichever task happens to run), so every writer's cleanup
    runs: a run that has ended is still finalized on the way out."""
    result = 0
    stopped_by: int | None = None
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:  # outlives the watcher task
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                nonlocal stopped_by
                async for signum in signals:
                    print(f"owc stopping ({signal.Signals(signum).name})", file=sys.stderr, flush=True)
                    stopped_by = signum
                    nursery.cancel_scope.cancel()
                    return

            nursery.start_soon(watch)
            result = await runner(args)
            nursery.cancel_scope.cancel()
    # A command cut short by a signal did not finish: say so the shell's way (128 + the signal's number),
    # except ``owc run`` and ``owc sim``, whose normal end is a signal.
    if stopped_by is not None and args.command in ("demo", "scenario"):
        return 128 + stopped_by
    return result


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _as_cli_error(exc: BaseException, args: argparse.Namespace) -> CliError | None:
    """The exit code and line for a failure the user can fix; None for anything else (a bug: its traceback
    is shown)."""
    from owc.gateway import MissingScopes, Refused
    from owc.gateway.url import InvalidGatewayUrl
    from owc.sim.scenario import ScenarioError

    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, InvalidGatewayUrl):
        return CliError(EXIT_CONFIG, str(exc))
    if isinstance(exc, (Refused, MissingScopes)):
        return CliError(EXIT_REFUSED, exc.refusal.line)  # the same table as the Pipe's reply (issue 25, item 4)
    if isinstance(exc, ScenarioError):
        return CliError(EXIT_USAGE, str(exc))
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    try:
        return _dispatch(parser, args)
    except KeyboardInterrupt:  # before Trio's signal receivers were installed, or after they were gone
        print("owc: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    except Exception as exc:  # an ExceptionGroup too: the nurseries' way to report one failure
        errors = [_as_cli_error(leaf, args) for leaf in _leaves(exc)]
        if not errors or any(e is None for e in errors):
            raise  # a bug: its traceback is what its reader needs
        for message in dict.fromkeys(f"owc: {e.message}" for e in errors if e is not None):
            print(message, file=sys.stderr)
        return min(e.code for e in errors if e is not None)


def _run_owui_install(args: argparse.Namespace) -> int:
    """``owc owui install``: blocking HTTP to Open WebUI's admin API (owc/owui/install.py), ending with its smoke
    check (said, not an exit code: ``owc owui status`` judges)."""
    from owc.owui.install import InstallError, install, smoke

    valves = {}
    if args.gateway_url:
        valves["GATEWAY_URL"] = _parse_gateway(args.gateway_url, "--gateway-url")[0]
    if args.agent:
        valves["AGENT_ID"] = args.agent
    if args.gateway_token_file:
        valves["GATEWAY_TOKEN_FILE"] = args.gateway_token_file
    api = _owui_api(args)
    try:
        smoke(api, install(api, valves=valves))
    except InstallError as exc:
        raise CliError(EXIT_CONFIG, f"owui install: {exc}") from None
    return EXIT_OK


def _owui_api(args: argparse.Namespace) -> Any:
    """Signed in to Open WebUI as ``install`` signs in (the password from a file, the environment or a prompt)."""
    import getpass

    from owc.owui.install import Api, InstallError

    if args.admin_password_file is not None:
        try:
            password = args.admin_password_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise CliError(EXIT_CONFIG, f"cannot read {args.admin_password_file}: {exc.strerror}") from None
    elif os.environ.get(OWUI_PASSWORD_ENV):
        password = os.environ[OWUI_PASSWORD_ENV]
    elif sys.stdin.isatty():
        password = getpass.getpass(f"Open WebUI password for {args.admin_email}: ")
    else:
        raise CliError(EXIT_CONFIG, f"no admin password: pass --admin-password-file FILE or set {OWUI_PASSWORD_ENV}")
    api = Api(args.url)
    try:
        api.sign_in(args.admin_email, password)
    except InstallError as exc:
        raise CliError(EXIT_CONFIG, f"owui {args.owui_command}: {exc}") from None
    return api


def _run_owui_migration(args: argparse.Namespace) -> int:
    """``owc owui migrate`` / ``rollback`` / ``status`` (owc/owui/migrate.py)."""
    from owc.owui import migrate
    from owc.owui.install import InstallError

    api = _owui_api(args)
    try:
        if args.owui_command == "status":
            return EXIT_OK if migrate.status(api) else EXIT_UNHEALTHY
        root = args.backup_dir if args.backup_dir is not None else migrate.default_backup_root()
        if args.owui_command == "rollback":
            migrate.rollback(api, backup=args.backup if args.backup is not None else migrate.latest_backup(root))
            return EXIT_OK
        given = args.device_dir is not None
        migrate.migrate(
            api,
            backup_root=root,
            device_dir=args.device_dir.absolute() if given else migrate.default_device_dir(),
            device_dir_valve=given,
            old_state_dir=args.old_state_dir,
            replace_device=args.replace_device,
            dry_run=args.dry_run,
        )
    except InstallError as exc:
        raise CliError(EXIT_CONFIG, f"owui {args.owui_command}: {exc}") from None
    return EXIT_OK


def _run_device(args: argparse.Namespace) -> int:
    """``owc device show|export|import`` (owc/device.py): never prints the key or the token, except ``export``,
    whose output is the secret by design (said on stderr)."""
    from owc import device

    folder = args.dir if args.dir is not None else device.default_state_dir(hosted=False, data_dir=None)
    try:
        if args.device_command == "show":
            print(json.dumps(device.public_summary(device.load_or_create(folder)), indent=1))
        elif args.device_command == "export":
            print("owc: the next line is this device's private key and token: keep it like a password", file=sys.stderr)
            print(device.export_identity(folder))
        else:
            text = args.file.read_text(encoding="utf-8") if args.file is not None else sys.stdin.read()
            identity = device.import_identity(folder, text.strip(), replace=args.replace)
            print(json.dumps(device.public_summary(identity), indent=1))
    except (device.DeviceIdentityError, OSError) as exc:
        raise CliError(EXIT_CONFIG, str(exc)) from None
    return EXIT_OK


def _run_repair_variants(args: argparse.Namespace) -> int:
    """``owc owui repair-variants`` (owc/store/repair.py): the copy run and its diff, then ``--apply``; or
    ``--restore``. Exit 1 when a chat was skipped (each named on stderr), 5 when the database stayed locked."""
    import time

    from owc.store import repair

    if args.restore and args.out is None:
        raise CliError(EXIT_USAGE, "--restore needs --out FOLDER (the folder of the --apply to undo)")
    if args.restore and args.apply:
        raise CliError(EXIT_USAGE, "--restore and --apply do not go together")
    folder = args.out or Path(f"owc-repair-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}").absolute()
    try:
        if args.restore:
            results = repair.restore(args.db, folder, busy_timeout_ms=args.busy_timeout)
            for r in results:
                print(f"chat {r.chat_id}: {r.status}{': ' + r.detail if r.detail else ''}")
            left = [r for r in results if r.status != "restored"]
            for r in left:
                print(f"owc: chat {r.chat_id} not restored: {r.detail}", file=sys.stderr)
            return EXIT_INVARIANTS if left else EXIT_OK
        report = repair.run(args.db, folder, apply=args.apply, busy_timeout_ms=args.busy_timeout, progress=print)
    except repair.DatabaseLocked as exc:
        raise CliError(EXIT_BUSY, str(exc)) from None
    except repair.RepairError as exc:
        raise CliError(EXIT_CONFIG, str(exc)) from None
    would = [c for c in report.chats if c.status == "copy"]
    groups = sum(len(c.plan.groups) for c in would if hasattr(c.plan, "groups"))
    kept = sum(len(c.plan.kept) for c in report.chats)
    print(
        f"{len(would)} chat(s) with {groups} old variant group(s) repaired on the copy; {kept} group(s) kept"
        f" (a person's own variants); diff: {report.diff}"
    )
    if args.apply:
        done = [c for c in report.applied if c.status == "applied"]
        print(f"applied: {len(done)} chat(s) repaired; backups in {folder / 'backups'} (one 0600 file a chat)")
    for c in report.refused:
        print(f"owc: chat {c.chat_id} ({c.title!r}) skipped: {c.detail}", file=sys.stderr)
    if report.stopped is not None:
        raise CliError(EXIT_BUSY, report.stopped)
    return EXIT_INVARIANTS if report.refused else EXIT_OK


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.command == "owui" and args.owui_command == "repair-variants":
        return _run_repair_variants(args)
    if args.command == "owui" and args.owui_command in ("migrate", "rollback", "status"):
        return _run_owui_migration(args)
    if args.command == "owui":
        return _run_owui_install(args)
    if args.command == "device":
        return _run_device(args)
    if args.command == "doctor":
        return trio.run(_run_doctor, args)
    runners = {"sim": _run_sim, "demo": _run_demo, "scenario": _run_scenario}
    if args.command == "run":
        if not args.verbose:
            logging.getLogger("owc").setLevel(logging.INFO)
        return trio.run(_run_bridge, args)  # it listens for its signals itself (a graceful first stop)
    if args.command in runners:
        if args.command in ("demo", "scenario") and not args.verbose:
            # The scenarios provoke faults on purpose (a dropped-event gap logs a warning): the printed
            # result says what happened; -v shows the logs.
            logging.getLogger("owc").setLevel(logging.ERROR)
        return trio.run(_until_signal, runners[args.command], args)
    parser.error(f"unknown command {args.command}")
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())

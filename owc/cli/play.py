"""``owc demo`` and ``owc scenario run``: a scenario played through owc into a database, and what came of it
printed: each chat's message tree and what the tabs were told."""

from __future__ import annotations

import argparse
import sqlite3
import sys
from functools import partial
from pathlib import Path

import trio

from owc.cli.codes import EXIT_CONFIG, EXIT_INVARIANTS, EXIT_OK, EXIT_USAGE, CliError, leaves
from owc.cli.inputs import check_database, read_scenario


def add_parsers(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser("demo", help="play a built-in scenario through owc into an embedded SQLite database")
    demo.add_argument(
        "--db",
        default="owc-demo.db",
        help="SQLite file to create (default owc-demo.db); one an earlier owc demo made is replaced, any other file"
        " is refused",
    )

    scenario = sub.add_parser("scenario", help="scenario files (docs/scenarios.md)")
    scenario_sub = scenario.add_subparsers(dest="scenario_command", metavar="ACTION", required=True)
    play = scenario_sub.add_parser("run", help="play a scenario through owc into a database")
    play.add_argument("file", type=Path)
    play.add_argument(
        "--db", required=True, help="sqlite:///path or postgresql+psycopg://... (tables are created if absent)"
    )
    play.add_argument("-q", "--quiet", action="store_true", help="print only the result")


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


#: The table that marks a SQLite file as one ``owc demo`` made (and may replace): a file without it is not owc's.
DEMO_MARKER = "owc_demo"


def is_demo_database(path: Path) -> bool:
    """Whether ``path`` is a SQLite database ``owc demo`` made (it holds the ``owc_demo`` table), read without
    writing: anything else at that path (a text file, another application's database, a symbolic link) is not."""
    if path.is_symlink() or not path.is_file():
        return False
    try:
        conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (DEMO_MARKER,))
        return found.fetchone() is not None
    except sqlite3.Error:  # not a database at all ("file is not a database")
        return False
    finally:
        conn.close()


def mark_demo_database(path: Path) -> None:
    """The marker ``is_demo_database`` looks for, with a word for whoever opens the file."""
    conn = sqlite3.connect(path)
    try:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {DEMO_MARKER} (note TEXT NOT NULL)")
        conn.execute(
            f"INSERT INTO {DEMO_MARKER} (note) VALUES (?)",
            ("made by owc demo, which replaces this file each time it runs with the same --db",),
        )
        conn.commit()
    finally:
        conn.close()


async def run_demo(args: argparse.Namespace) -> int:
    from importlib.resources import files

    from owc.sim.play import play_scenario

    path = Path(args.db)
    if (path.exists() or path.is_symlink()) and not await trio.to_thread.run_sync(is_demo_database, path):
        raise CliError(
            EXIT_CONFIG,
            f"owc demo --db {path}: the file exists and is not a database owc demo made (no {DEMO_MARKER} table):"
            " owc demo replaces its file, so it leaves this one alone; pass another path, or remove the file",
        )
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    text = files("owc").joinpath("demo.jsonl").read_text()
    await trio.to_thread.run_sync(partial(check_database, f"sqlite:///{path}", create=True))
    await trio.to_thread.run_sync(mark_demo_database, path)
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


async def run_scenario(args: argparse.Namespace) -> int:
    from owc.sim.play import play_scenario
    from owc.sim.scenario import ScenarioError

    text = read_scenario(args.file)
    await trio.to_thread.run_sync(partial(check_database, args.db, create=True))
    try:
        played = await play_scenario(
            text, args.db, progress=None if args.quiet else (lambda line: print(f"  {line}", flush=True))
        )
    except* ScenarioError as group:  # found while parsing, or while playing (inside the player's nurseries)
        raise CliError(EXIT_USAGE, f"{args.file}: {leaves(group)[0]}") from None
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

"""``owc sim``: the Gateway simulator on its own, optionally playing a scenario file."""

from __future__ import annotations

import argparse
import secrets
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path

import trio

from owc.cli.codes import EXIT_CONFIG, EXIT_OK, EXIT_USAGE, CliError, leaves
from owc.cli.inputs import check_database, database_errors, port_number, read_scenario, read_token

#: ``owc sim``'s token file when neither ``--token`` nor ``--token-file`` is given (in the current folder).
DEFAULT_TOKEN_FILE = "owc-sim.token"


def add_parsers(sub: argparse._SubParsersAction) -> None:
    sim = sub.add_parser("sim", help="run the OpenClaw Gateway simulator on loopback")
    sim.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    sim.add_argument("--port", type=port_number, default=18789, help="port (0 picks a free one; default 18789)")
    token = sim.add_mutually_exclusive_group()
    token.add_argument(
        "--token-file",
        type=Path,
        help=f"file holding the shared token clients must send; default: ./{DEFAULT_TOKEN_FILE}, reused when it is"
        " there, else made with a new token (mode 0600)",
    )
    token.add_argument(
        "--token", help="the shared token (prefer --token-file: command lines are visible to other users)"
    )
    sim.add_argument(
        "--scenario", type=Path, help="a scenario file (JSON lines, docs/scenarios.md) to play once started"
    )
    sim.add_argument(
        "--db",
        default=None,
        help="with --scenario: Open WebUI's database the scenario's chats are made in (as Open WebUI makes them),"
        " so that an `owc run --db` on the same database claims the runs and writes their messages",
    )
    sim.add_argument(
        "--create-db", action="store_true", help="with --db: make Open WebUI's chat tables in a new or empty database"
    )
    sim.add_argument("--exit-after-scenario", action="store_true", help="stop once the scenario has played")
    sim.add_argument(
        "--cli-runtime", action="store_true", help="model a CLI-backend runtime (cli-assistant:<runId> ids)"
    )


def _sim_token(args: argparse.Namespace) -> tuple[str, str]:
    """The token and where it came from. Without ``--token`` / ``--token-file``: ``./owc-sim.token``, reused when it
    is there (an ``owc run`` started against an earlier simulator may be reading it: replacing it would lock that
    one out), else a generated token written to a new 0600 file (``owc.tokenfile``: exclusive, never through a
    symbolic link), never printed. A symbolic link there is refused, neither followed nor replaced."""
    from owc.tokenfile import TokenFileError, write_new_token_file

    if args.token is not None:
        return args.token, "--token"
    if args.token_file is not None:
        return read_token(args.token_file), str(args.token_file)
    path = Path(DEFAULT_TOKEN_FILE).absolute()  # not resolve(): that would follow a planted symbolic link
    if path.is_symlink():
        raise CliError(
            EXIT_CONFIG,
            f"token file {path} is a symbolic link: owc sim neither follows nor replaces it; remove it, or pass"
            " --token-file FILE",
        )
    if path.exists():
        return read_token(path), f"{path} (reused: it was there already; remove it for a new token)"
    token = secrets.token_urlsafe(24)
    try:
        write_new_token_file(path, token)
    except TokenFileError as exc:
        raise CliError(EXIT_CONFIG, str(exc)) from None
    return token, f"{path} (new)"


async def run_sim(args: argparse.Namespace) -> int:
    from owc.sim import open_simulator
    from owc.sim.scenario import ScenarioError, parse_scenario, play_file

    token, source = _sim_token(args)
    scenario = None
    if args.scenario is not None:
        scenario = read_scenario(args.scenario)
        try:
            parse_scenario(scenario)  # fail before listening
        except ScenarioError as exc:
            raise CliError(EXIT_USAGE, f"{args.scenario}: {exc}") from None
    if args.db is None and args.create_db:
        raise CliError(EXIT_USAGE, "--create-db goes with --db (the database the scenario's chats are made in)")
    if args.db is not None:
        if scenario is None:
            raise CliError(EXIT_USAGE, "--db goes with --scenario: the scenario's chats are what is made there")
        await trio.to_thread.run_sync(partial(check_database, args.db, create=args.create_db))
    async with AsyncExitStack() as stack:
        host = None
        if args.db is not None:
            from owc.sim.chats import DatabaseChats
            from owc.store import open_store

            stack.enter_context(database_errors(args.db))  # creating the tables: the database's configuration
            store = await stack.enter_async_context(open_store(args.db, create=args.create_db))
            host = DatabaseChats(store)
        try:
            sim = await stack.enter_async_context(
                open_simulator(token=token, host=args.host, port=args.port, cli_runtime=args.cli_runtime)
            )
        except* OSError as group:
            reason = leaves(group)[0]
            raise CliError(
                EXIT_CONFIG, f"cannot listen on {args.host}:{args.port}: {getattr(reason, 'strerror', None) or reason}"
            ) from None
        print(f"owc sim listening on {sim.url} (boot {sim.boot_id}); token from {source}", flush=True)
        if scenario is not None:
            try:
                await play_file(sim, scenario, host)
            except* ScenarioError as group:
                raise CliError(EXIT_USAGE, f"{args.scenario}: scenario failed: {leaves(group)[0]}") from None
            print("scenario played", flush=True)
            if args.exit_after_scenario:
                return EXIT_OK
        await trio.sleep_forever()  # timer-ok: no deadline; the simulator serves until Ctrl-C
    return EXIT_OK

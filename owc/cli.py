"""The ``owc`` command. Subcommands arrive with the issues that build what they run.

* ``owc sim``: the Gateway simulator, standalone (optionally playing a scenario file).
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import sys
from collections.abc import Sequence
from pathlib import Path

import trio

from owc import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="owc",
        description="owc: the Trio runtime that puts OpenClaw agent runs into Open WebUI chats.",
    )
    parser.add_argument("--version", action="version", version=f"owc {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    sim = sub.add_parser("sim", help="run the OpenClaw Gateway simulator on loopback")
    sim.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    sim.add_argument("--port", type=int, default=18789, help="port (0 picks a free one; default 18789)")
    token = sim.add_mutually_exclusive_group()
    token.add_argument("--token-file", type=Path, help="file holding the shared token clients must send")
    token.add_argument("--token", help="the shared token (prefer --token-file: command lines are visible to other users)")
    sim.add_argument("--scenario", type=Path, help="a scenario file (JSON lines, docs/scenarios.md) to play once started")
    sim.add_argument("--exit-after-scenario", action="store_true", help="stop once the scenario has played")
    sim.add_argument("--cli-runtime", action="store_true", help="model a CLI-backend runtime (cli-assistant:<runId> ids)")
    return parser


def _sim_token(args: argparse.Namespace) -> tuple[str, str]:
    """The token and where it came from. A generated token is written to a 0600 file, never printed."""
    if args.token is not None:
        return args.token, "--token"
    if args.token_file is not None:
        return args.token_file.read_text().strip(), str(args.token_file)
    path = Path("owc-sim.token").resolve()
    token = secrets.token_urlsafe(24)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    return token, str(path)


async def _run_sim(args: argparse.Namespace) -> int:
    from owc.sim import open_simulator
    from owc.sim.scenario import ScenarioError, parse_scenario, play_file

    token, source = _sim_token(args)
    scenario = None
    if args.scenario is not None:
        scenario = args.scenario.read_text()
        try:
            parse_scenario(scenario)  # fail before listening
        except ScenarioError as exc:
            print(f"{args.scenario}: {exc}", file=sys.stderr)
            return 2
    async with open_simulator(token=token, host=args.host, port=args.port, cli_runtime=args.cli_runtime) as sim:
        print(f"owc sim listening on {sim.url} (boot {sim.boot_id}); token from {source}", flush=True)
        if scenario is not None:
            try:
                await play_file(sim, scenario)
            except ScenarioError as exc:
                print(f"scenario failed: {exc}", file=sys.stderr, flush=True)
                return 1
            print("scenario played", flush=True)
            if args.exit_after_scenario:
                return 0
        await trio.sleep_forever()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "sim":
        try:
            return trio.run(_run_sim, args)
        except KeyboardInterrupt:
            return 0
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())

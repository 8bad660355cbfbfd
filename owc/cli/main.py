"""``owc``'s entry point: the parser each command module adds to, the logging set-up, the signals, and the one
place a failure becomes a line and an exit code.

Every failure the user can fix ends in one line on stderr and an exit code of its own (``EPILOG``), never a
traceback: a traceback is left for owc's own bugs.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence

import trio

from owc import __version__
from owc.cli import bridge, device, owui, play, sim
from owc.cli.codes import EPILOG, EXIT_CONFIG, EXIT_OK, EXIT_REFUSED, EXIT_USAGE, CliError, leaves
from owc.cli.signals import until_signal


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

    play.add_parsers(sub)
    bridge.add_parsers(sub)
    device.add_parsers(sub)
    sim.add_parsers(sub)
    owui.add_parsers(sub)
    return parser


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
        errors = [_as_cli_error(leaf, args) for leaf in leaves(exc)]
        if not errors or any(e is None for e in errors):
            raise  # a bug: its traceback is what its reader needs
        for message in dict.fromkeys(f"owc: {e.message}" for e in errors if e is not None):
            print(message, file=sys.stderr)
        return min(e.code for e in errors if e is not None)


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.command == "owui":
        return owui.run(args)
    if args.command == "device":
        return device.run(args)
    if args.command == "doctor":
        return trio.run(bridge.run_doctor, args)
    if args.command == "run":
        if not args.verbose:
            logging.getLogger("owc").setLevel(logging.INFO)
        return trio.run(bridge.run_bridge, args)  # it listens for its signals itself (a graceful first stop)
    runners = {"sim": sim.run_sim, "demo": play.run_demo, "scenario": play.run_scenario}
    if args.command in runners:
        if args.command in ("demo", "scenario") and not args.verbose:
            # The scenarios provoke faults on purpose (a dropped-event gap logs a warning): the printed
            # result says what happened; -v shows the logs.
            logging.getLogger("owc").setLevel(logging.ERROR)
        return trio.run(until_signal, runners[args.command], args)
    parser.error(f"unknown command {args.command}")
    return EXIT_USAGE

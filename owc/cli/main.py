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

from owc import __version__, logs
from owc.cli import bridge, device, owui, play, sim, status
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
    _log_arguments(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    play.add_parsers(sub)
    bridge.add_parsers(sub)
    status.add_run_arguments(sub.choices["run"])
    device.add_parsers(sub)
    sim.add_parsers(sub)
    owui.add_parsers(sub)
    status.add_parsers(sub)
    _log_arguments_everywhere(sub)
    return parser


def _log_arguments(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    """``-v`` / ``-q`` / ``--log-level`` / ``--log-format``, on the top parser (with their defaults) and on every
    subcommand's (defaults suppressed, so an option given before the subcommand is not undone by its absence
    after it). An option a subcommand already has for itself (``owc scenario run -q``: print only the result) stays
    that subcommand's."""

    def default(value: object) -> object:
        return value if top else argparse.SUPPRESS

    taken = parser._option_string_actions
    options: list[tuple[tuple[str, ...], dict[str, object]]] = [
        (("-v", "--verbose"), {"action": "store_true", "default": default(False), "help": "log everything at DEBUG"}),
        (
            ("-q", "--quiet"),
            {
                "action": "store_true",
                "dest": "log_quiet",
                "default": default(False),
                "help": "log errors only",
            },
        ),
        (
            ("--log-level",),
            {
                "metavar": "LEVEL",
                "default": default(None),
                "help": "owc's own log level: DEBUG, INFO (owc run's default: one line per run step), WARNING, ERROR",
            },
        ),
        (
            ("--log-format",),
            {
                "choices": logs.FORMATS,
                "default": default("text"),
                "help": "text (default) or json: one JSON object per line (time, level, logger, message, pid, worker,"
                " fields)",
            },
        ),
    ]
    for flags, kwargs in options:
        free = tuple(flag for flag in flags if flag not in taken)
        if free:
            parser.add_argument(*free, **kwargs)  # type: ignore[arg-type]


def _log_arguments_everywhere(sub: argparse._SubParsersAction) -> None:
    for command in sub.choices.values():
        _log_arguments(command)
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                _log_arguments_everywhere(action)


#: The ``owc`` loggers' level by command when no option says otherwise: ``owc run`` logs its steps (INFO); the
#: scenarios provoke faults on purpose (a dropped-event gap logs a warning), and their printed result says what
#: happened, so they log errors only; every other command warnings.
_COMMAND_LEVELS = {"run": logging.INFO, "demo": logging.ERROR, "scenario": logging.ERROR}


def _set_up_logging(args: argparse.Namespace) -> None:
    """The process's logging from the options (``owc.logs``): ``--log-level`` sets owc's loggers (other libraries
    stay at WARNING unless it is stricter); ``-v``: everything at DEBUG; ``-q``: errors only. Raises ``CliError``
    (``EXIT_USAGE``) for a level that is not one."""
    owc_level: int | None = _COMMAND_LEVELS.get(args.command or "")
    root = logging.WARNING
    if args.log_quiet:
        owc_level = root = logging.ERROR
    if args.verbose:
        owc_level = root = logging.DEBUG
    if args.log_level is not None:
        try:
            owc_level = logs.level_of(args.log_level)
        except ValueError as exc:
            raise CliError(EXIT_USAGE, str(exc)) from None
        root = max(logging.WARNING, owc_level)
    args.worker = _worker(args)
    logs.configure(root, args.log_format, worker=args.worker, owc_level=owc_level)


def _worker(args: argparse.Namespace) -> str:
    """The worker name in every line: ``owc run``'s ``--instance`` if given, else the command's name."""
    instance = getattr(args, "instance", None)
    return str(instance) if args.command == "run" and instance else str(args.command or "owc")


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
    try:
        _set_up_logging(args)
    except CliError as exc:
        print(f"owc: {exc.message}", file=sys.stderr)
        return exc.code
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
        return trio.run(bridge.run_bridge, args)  # it listens for its signals itself (a graceful first stop)
    if args.command == "status":
        return status.run_status(args)
    runners = {"sim": sim.run_sim, "demo": play.run_demo, "scenario": play.run_scenario}
    if args.command in runners:
        return trio.run(until_signal, runners[args.command], args)
    parser.error(f"unknown command {args.command}")
    return EXIT_USAGE

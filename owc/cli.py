"""The ``owc`` command. Subcommands arrive with the issues that build what they run (demo, sim, run, scenario)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from owc import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="owc",
        description="owc: the Trio runtime that puts OpenClaw agent runs into Open WebUI chats.",
    )
    parser.add_argument("--version", action="version", version=f"owc {__version__}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

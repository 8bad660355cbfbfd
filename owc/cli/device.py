"""``owc device show|export|import``: owc's device identity, for a Gateway on another host (owc/device.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from owc.cli.codes import EXIT_CONFIG, EXIT_OK, CliError


def add_parsers(sub: argparse._SubParsersAction) -> None:
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


def run(args: argparse.Namespace) -> int:
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

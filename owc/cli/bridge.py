"""``owc run`` (owc as a standalone bridge to a real Gateway) and ``owc doctor`` (one connect, a report): they share
how to reach and sign in to a Gateway, so what ``doctor`` checks is exactly what ``run`` will do."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from owc.cli.codes import EPILOG, EXIT_CONFIG, EXIT_OK, EXIT_REFUSED, TOKEN_ENV, CliError
from owc.cli.inputs import check_database, database_errors, parse_gateway, read_token
from owc.cli.signals import STOP_SIGNALS, LateSignals
from owc.cli.status import open_status_endpoint
from owc.emit import NoTasks

if TYPE_CHECKING:
    from owc.gateway import GatewayConfig


def gateway_arguments(command: argparse.ArgumentParser) -> None:
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


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """``owc run`` and ``owc doctor``."""
    run = sub.add_parser(
        "run",
        help="run owc against a real Gateway until interrupted",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gateway_arguments(run)
    run.add_argument(
        "--db",
        required=True,
        help="Open WebUI's database: sqlite:////path/to/webui.db (Open WebUI's DATA_DIR/webui.db) or"
        " postgresql://... (its DATABASE_URL); one without Open WebUI's chat tables is refused",
    )
    run.add_argument(
        "--create-db",
        action="store_true",
        help="make Open WebUI's chat tables in a new SQLite file or an empty database (owc without Open WebUI:"
        " tests, a demo); never in a database that holds other tables",
    )
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
    gateway_arguments(doctor)


class _LogEmitter(NoTasks):
    """``owc run`` outside Open WebUI (no tabs): it logs what it would tell them."""

    def __init__(self) -> None:
        self.log = logging.getLogger("owc.emit")

    async def emit(self, chat_id: str, message_id: str, user_id: str, event: dict) -> None:
        self.log.debug("emit chat=%s message=%s type=%s", chat_id, message_id, event.get("type"))

    async def save_stream(self, chat_id: str, message_id: str, output: list) -> None:
        pass

    async def clear_stream(self, chat_id: str, message_id: str) -> None:
        pass


def _gateway_token(args: argparse.Namespace) -> tuple[str, str]:
    """``owc run``'s token and where it came from: ``--token-file``, else ``$OWC_GATEWAY_TOKEN``."""
    if args.token_file is not None:
        return read_token(args.token_file), str(args.token_file)
    value = os.environ.get(TOKEN_ENV, "").strip()
    if not value:
        raise CliError(EXIT_CONFIG, f"no Gateway token: pass --token-file FILE (mode 0600) or set {TOKEN_ENV}")
    return value, f"${TOKEN_ENV}"


def _gateway_url(args: argparse.Namespace) -> tuple[str, str]:
    return parse_gateway(args.gateway, "--gateway")


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
        config = GatewayConfig(
            instance_id=instance_id, device_dir=folder, ca_file=args.ca_file, pin_sha256=args.tls_pin, names=names
        )
    except ValueError as exc:
        raise CliError(EXIT_CONFIG, f"--tls-pin: {exc}") from None
    url, shown = _gateway_url(args)
    if not url.startswith("wss://"):  # a TLS setting on a connection without TLS would be silently ignored
        for flag, value in (("--tls-pin", args.tls_pin), ("--ca-file", args.ca_file)):
            if value is not None:
                raise CliError(
                    EXIT_CONFIG,
                    f"{flag} applies to wss:// only, and --gateway {shown} is ws:// (no TLS, so nothing"
                    f" to check): use the Gateway's wss:// URL, or drop {flag}",
                )
    return config


def stopping_line(signal_name: str, ended: int) -> str:
    """What ``owc run`` says at the first signal: what the graceful stop waits for, and how to cut it short (the
    wait is bounded by the transport's timers and the database's busy wait, which can be a minute)."""
    if ended == 0:
        return f"owc stopping ({signal_name}): closing the Gateway connection (Ctrl-C again to stop now)"
    messages = "1 ended run's message" if ended == 1 else f"{ended} ended runs' messages"
    return (
        f"owc stopping ({signal_name}): finishing {messages} (Ctrl-C again to stop now; the next start finishes"
        " what is left)"
    )


def _ended_unsettled(runtime) -> int:
    """The runs ``Runtime.drain`` waits for: ended, their message not settled, a writer still at work."""
    return sum(1 for run in runtime.ledger.unsettled() if run.writer_live and run.life.ended)


async def check_device_folder(config: GatewayConfig) -> None:
    """The device folder, checked before anything connects: its identity made or loaded and a file written there
    (the device token is stored at pairing). One that cannot be used is a configuration error naming the three
    fixes; left to the connect, it failed at every reconnect."""
    from owc import device

    folder = config.device_dir
    if folder is None:
        return
    try:
        await trio.to_thread.run_sync(device.check_folder, folder)
    except device.DeviceIdentityError as exc:
        uid = f" (owc runs as uid {os.geteuid()})" if hasattr(os, "geteuid") else ""
        raise CliError(
            EXIT_CONFIG,
            f"device folder {folder} cannot hold owc's device identity ({exc}): pass --device-dir with a folder owc"
            f" can write, fix this one's permissions{uid}, or pass --no-device (the token alone: only on the"
            " Gateway's own loopback)",
        ) from None


async def run_doctor(args: argparse.Namespace) -> int:
    """``owc doctor``: one connect, a report, exit 0 when owc can work against this Gateway (EXIT_REFUSED else)."""
    from owc.gateway.doctor import diagnose

    url, _ = _gateway_url(args)
    token, source = _gateway_token(args)
    config = _gateway_config(args, instance_id="owc-doctor", token_source=source)
    await check_device_folder(config)
    report = await diagnose(url, token, config)
    for line in report.lines():
        print(line)
    return EXIT_OK if report.ok else EXIT_REFUSED


async def run_bridge(args: argparse.Namespace) -> int:
    """owc against a real Gateway until SIGINT / SIGTERM. The first signal stops it gracefully: runs that have
    ended finish their messages over the still-open connection (bounded by the transport's own timers and the
    database's busy wait), then owc closes; a second signal closes at once. A run still going is left to the
    next start (its reconcile finishes it). A refusal retrying cannot fix (a wrong token) ends it with
    ``EXIT_REFUSED`` (``main`` maps it)."""
    from owc.runtime import RuntimeConfig, open_runtime
    from owc.store import open_store

    url, shown = _gateway_url(args)
    token, source = _gateway_token(args)
    await trio.to_thread.run_sync(partial(check_database, args.db, create=args.create_db))
    config = RuntimeConfig(
        url=url,
        token=token,
        gateway=_gateway_config(args, instance_id=args.instance, token_source=source),
        usage_line=args.usage_line,
    )
    await check_device_folder(config.gateway)
    with LateSignals() as late, trio.open_signal_receiver(*STOP_SIGNALS) as signals, database_errors(args.db):
        async with (
            open_store(args.db, create=args.create_db) as store,
            open_runtime(config, store, _LogEmitter()) as runtime,
            open_status_endpoint(args, runtime),
        ):
            print(f"owc running against {shown}; Ctrl-C stops it", flush=True)
            async for signum in signals:
                late.stopping = True
                print(
                    stopping_line(signal.Signals(signum).name, _ended_unsettled(runtime)), file=sys.stderr, flush=True
                )
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

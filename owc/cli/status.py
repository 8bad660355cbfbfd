"""``owc status`` and ``owc run``'s status endpoint (issue 31): the operator's view of a running ``owc run``.

``owc run`` serves its runtime's snapshot (``Runtime.snapshot``, ``owc.render.operator``) on a loopback HTTP endpoint,
``--status-listen HOST:PORT`` (default ``127.0.0.1:18790``; ``off``: none): ``/status`` (JSON) and ``/metrics``
(Prometheus text), ``owc.ops.http``. ``owc status [--url URL]`` reads ``/status`` and prints its lines: exit 0 when
owc is connected to its Gateway, ``EXIT_UNHEALTHY`` when it is not (the line says why), ``EXIT_CONFIG`` when the
endpoint cannot be reached (the line names the fix).

An address given with ``--status-listen`` that cannot be bound is one line and ``EXIT_CONFIG``. The default one
taken (a second ``owc run`` on the host) is one warning line, and that ``owc run`` goes on without an endpoint:
refusing to run would make the status page the reason a bridge is down.
"""

from __future__ import annotations

import argparse
import json
import logging
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from owc.cli.codes import EPILOG, EXIT_CONFIG, EXIT_OK, EXIT_UNHEALTHY, CliError

log = logging.getLogger("owc.ops")

DEFAULT_URL = "http://127.0.0.1:18790"
#: How long ``owc status`` waits for the endpoint (a loopback answer takes milliseconds).
FETCH_TIMEOUT = 10.0


def add_run_arguments(run: argparse.ArgumentParser) -> None:
    """``owc run --status-listen``."""
    run.add_argument(
        "--status-listen",
        default=None,
        metavar="HOST:PORT",
        help="serve the status (GET /status: JSON) and metrics (GET /metrics: Prometheus text) here, for `owc"
        " status` and a scraper; 'off': not at all (default: 127.0.0.1:18790; if that is taken, owc runs without)",
    )


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """``owc status``."""
    status = sub.add_parser(
        "status",
        help="ask a running `owc run` how it is: connected or why not, the Gateway, the device, runs, errors",
        description="Reads the status endpoint of a running `owc run` (its --status-listen) and prints its figures."
        f" Exit {EXIT_OK}: connected to the Gateway; {EXIT_UNHEALTHY}: not connected (the gateway line says why);"
        f" {EXIT_CONFIG}: the endpoint cannot be reached.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    status.add_argument(
        "--url",
        default=DEFAULT_URL,
        help=f"the endpoint of `owc run --status-listen` (default {DEFAULT_URL})",
    )
    status.add_argument("--json", action="store_true", help="print the JSON as served, not the lines")


def _status_url(base: str) -> str:
    base = base.strip().rstrip("/")
    if "://" not in base:
        base = f"http://{base}"
    return base if base.endswith("/status") else f"{base}/status"


def fetch(url: str) -> dict[str, Any]:
    """``/status``'s body. Raises ``CliError`` (``EXIT_CONFIG``) when it cannot be read, naming the fix."""
    target = _status_url(url)
    fix = "is `owc run` running with its status endpoint there? (`--status-listen`; `owc status --url` names another)"
    if not target.startswith(("http://", "https://")):
        raise CliError(EXIT_CONFIG, f"--url {url!r}: an http:// address of `owc run --status-listen`")
    try:
        with urllib.request.urlopen(target, timeout=FETCH_TIMEOUT) as answer:
            raw = answer.read(4 * 1024 * 1024)
    except urllib.error.HTTPError as exc:
        raise CliError(EXIT_CONFIG, f"{target} answered {exc.code}, not owc's status: {fix}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CliError(EXIT_CONFIG, f"cannot reach {target} ({reason}): {fix}") from None
    try:
        body = json.loads(raw)
        if not isinstance(body, dict):
            raise ValueError("not an object")
    except ValueError:
        raise CliError(EXIT_CONFIG, f"{target} did not answer owc's status JSON: {fix}") from None
    return body


def run_status(args: argparse.Namespace) -> int:
    """``owc status``: the lines, and 0 when connected, ``EXIT_UNHEALTHY`` when not."""
    from owc.render import operator

    body = fetch(args.url)
    try:
        snap = operator.from_json(body)
    except (KeyError, TypeError, ValueError):
        raise CliError(
            EXIT_CONFIG, f"{_status_url(args.url)} answered JSON that is not owc's status (another owc version?)"
        ) from None
    if args.json:
        print(json.dumps(body, indent=2))
    else:
        for line in operator.lines(snap):
            print(line)
    return EXIT_OK if snap.connected else EXIT_UNHEALTHY


@asynccontextmanager
async def open_status_endpoint(args: argparse.Namespace, runtime: Any) -> AsyncIterator[str | None]:
    """``owc run``'s endpoint for the block (``owc/cli/bridge.py`` enters it once the runtime is open); yields its
    URL, or None when off. Names the runtime's worker as the log lines do (``--instance``, else ``run``)."""
    from owc.ops.http import DEFAULT_LISTEN, ListenError, parse_listen, serve_status

    runtime.worker = getattr(args, "worker", None) or runtime.worker
    given = getattr(args, "status_listen", None)
    try:
        listen = parse_listen(given if given is not None else DEFAULT_LISTEN)
    except ListenError as exc:
        raise CliError(EXIT_CONFIG, str(exc)) from None
    if listen is None:
        yield None
        return
    async with trio.open_nursery() as nursery:
        try:
            bound = await nursery.start(serve_status, listen, runtime.snapshot)
        except OSError as exc:
            why = exc.strerror or str(exc)
            if given is not None:
                raise CliError(
                    EXIT_CONFIG,
                    f"--status-listen {given}: cannot listen there ({why}); pick a free port, or 'off'",
                ) from None
            log.warning(
                "ops.status_not_listening address=%s (%s): running without a status endpoint; --status-listen picks"
                " another address",
                DEFAULT_LISTEN,
                why,
            )
            yield None
            return
        print(f"owc status on {bound.url}/status and {bound.url}/metrics", flush=True)
        try:
            yield bound.url
        finally:
            nursery.cancel_scope.cancel()

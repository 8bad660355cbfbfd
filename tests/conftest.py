"""Shared test fixtures.

The real Gateway frames live in the workplace's ``shared/reference`` next to the checkout (``../shared``), or
wherever ``OWC_SHARED`` points. Without them the real-data tests skip on a developer's machine and fail in
CI, where a skip would hide that nothing was checked.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The shared token the tests' Gateways accept. Every secret a test uses is registered in ``SECRETS``, and
#: ``token_never_logged`` fails the run if any of them reached a log record.
TOKEN = "owc-test-s3cr3t-token-0123456789"
SECRETS: set[str] = {TOKEN}


class _Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info:
            text += logging.Formatter().formatException(record.exc_info)
        self.texts.append(f"{record.name}: {text}")


@pytest.fixture(scope="session", autouse=True)
def token_never_logged(request):
    """Capture every log record of the whole suite (owc at DEBUG) and check no secret is in any of them."""
    recorder = _Recorder()
    root = logging.getLogger()
    owc_logger = logging.getLogger("owc")
    old_level = owc_logger.level
    root.addHandler(recorder)
    owc_logger.setLevel(logging.DEBUG)
    try:
        yield recorder
    finally:
        root.removeHandler(recorder)
        owc_logger.setLevel(old_level)
    leaks = [t for t in recorder.texts if any(secret in t for secret in SECRETS)]
    if request.session.testscollected >= 50:  # a whole-suite run logs plenty; a single test may log nothing
        assert recorder.texts, "no log record was captured: the check would prove nothing"
    assert not leaks, f"{len(leaks)} log records hold a secret, e.g. {leaks[0][:200]!r}"


def shared_dir() -> Path | None:
    env = os.environ.get("OWC_SHARED")
    candidate = Path(env) if env else ROOT.parent / "shared"
    return candidate if (candidate / "reference").is_dir() else None


def frames_dir() -> Path:
    shared = shared_dir()
    if shared is None:
        if os.environ.get("CI"):
            pytest.fail("../shared/reference is missing in CI: the real-frame tests cannot run")
        pytest.skip("../shared/reference not found (set OWC_SHARED)")
    return shared / "reference" / "openclaw" / "frames"


def load_log(name: str) -> list[dict[str, Any]]:
    """One frame log: ``{t, conn, dir, frame}`` lines (some logs also hold summary lines without ``frame``)."""
    with open(frames_dir() / name, "rb") as fh:
        return [orjson.loads(line) for line in fh if line.strip()]


FRAME_LOGS = [
    "frames.jsonl",
    "frames_abort.jsonl",
    "frames_auth.jsonl",
    "frames_delivery.jsonl",
    "frames_lifecycle.jsonl",
    "frames_recipe_check.jsonl",
    "frames_stop.jsonl",
    "frames_tool.jsonl",
    "frames_tool_abort.jsonl",
]


@pytest.fixture(scope="session")
def real_gateway():
    """The real OpenClaw Gateway, offline on loopback, for the ``realgateway`` tier (one per test session)."""
    from realgw.gateway import RealGatewayUnavailable, ensure_installed, start

    try:
        install = ensure_installed()
    except (RealGatewayUnavailable, OSError) as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the real Gateway could not be installed in CI: {exc}")
        pytest.skip(f"real Gateway unavailable: {exc}")
    gateway = start(install)
    SECRETS.add(gateway.token)
    try:
        yield gateway
    finally:
        gateway.stop()


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "postgres_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)


@pytest.fixture(scope="session")
def postgres_url():
    """A real PostgreSQL server for the session (``tests/pgserver.py``); skipped without one, except in CI."""
    import pgserver

    try:
        server = pgserver.start_postgres()
    except pgserver.PostgresUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is not installed in CI: {exc}")
        pytest.skip(str(exc))
    try:
        yield server.url
    finally:
        server.stop()

"""Shared test fixtures.

The real Gateway frames live in the workplace's ``shared/reference`` next to the checkout (``../shared``), or
wherever ``OWC_SHARED`` points. Without them the real-data tests skip on a developer's machine and fail in
CI, where a skip would hide that nothing was checked.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest

ROOT = Path(__file__).resolve().parents[1]


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
    try:
        yield gateway
    finally:
        gateway.stop()

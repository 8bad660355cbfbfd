"""Tier W, issue 31: ``owc owui install --config FILE`` against the REAL Open WebUI 0.12.4 server, as a deploy job
runs it (a subprocess, no terminal, the admin's password and the Gateway's token in files), with owc's simulator as
the Gateway (on loopback: owc is let in as the Gateway's local backend, so its hello comes during the first apply).

A fresh Open WebUI: the first apply creates the four Functions, sets the Pipe's valves as configured (the token
read from its file, never printed), activates them and attaches the Filter and the Action to every model the Pipe
lists once owc is connected; applied again, it says "nothing changed" and writes nothing (each Function's
``updated_at`` and the model rows as they were); a dry run then plans nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_owui_w import TOKEN, subscribed, wait_until

from conftest import secret
from owui.simthread import simulator_thread

pytestmark = [pytest.mark.owuiserver, pytest.mark.timeout(1200)]

FUNCTION_IDS = ("openclaw", "openclaw_startup", "openclaw_thinking", "openclaw_status")


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[Any, Any]]:
    """The simulator on loopback (no remote address: owc needs no pairing, so the first apply sees its hello)."""
    secret(TOKEN)
    with simulator_thread(TOKEN) as pair:
        yield pair


def _config(tmp: Path, base_url: str, gateway_url: str) -> Path:
    from owui.server import ADMIN_EMAIL, ADMIN_PASSWORD

    (tmp / "admin-password").write_text(ADMIN_PASSWORD + "\n")
    token = tmp / "gateway-token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    path = tmp / "owc.toml"
    path.write_text(
        f"""\
[openwebui]
url = "{base_url}"
admin_email = "{ADMIN_EMAIL}"
admin_password_file = "admin-password"
wait = 60
connect_wait = 60

[pipe.valves]
GATEWAY_URL = "{gateway_url}"
GATEWAY_TOKEN = {{ file = "gateway-token" }}
AGENT_ID = "main"
MAX_MODELS = 7
USAGE_LINE = false

[thinking]
global = false
[thinking.valves]
priority = 2

[status]
global = false
"""
    )
    return path


def _install(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OWC_OWUI_", "OWC_VALVE_", "OWC_FUNCTION_"))}
    return subprocess.run(
        [sys.executable, "-m", "owc", "owui", "install", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _rows(admin: Any) -> dict[str, Any]:
    """Each Function's row as Open WebUI lists it (``updated_at`` moves on any write) and its valves."""
    out = {}
    for fid in FUNCTION_IDS:
        record = admin.get_function(fid)
        out[fid] = {
            "updated_at": record["updated_at"],
            "is_active": record["is_active"],
            "is_global": record["is_global"],
            "content": record["content"],
            "valves": admin.get(f"/api/v1/functions/id/{fid}/valves"),
        }
    return out


def test_the_config_applied_to_a_fresh_open_webui_then_again_changes_nothing(gateway, server_venv, tmp_path) -> None:
    from owui.server import ADMIN_PASSWORD, running_server

    simulator, token = gateway
    with running_server(tmp_path) as server:
        config = _config(tmp_path, server.base_url, simulator.url)
        first = _install("--config", str(config))
        assert first.returncode == 0, first.stderr
        said = first.stdout
        assert TOKEN not in said + first.stderr and ADMIN_PASSWORD not in said + first.stderr
        for fid in FUNCTION_IDS:
            assert f"activated {fid}" in said
        assert "created openclaw (OpenClaw)" in said
        assert "openclaw valve GATEWAY_TOKEN set (a secret: its value is not shown)" in said
        assert "openclaw valve MAX_MODELS set to 7" in said and "openclaw_thinking valve priority set to 2" in said
        assert "smoke: owc connected to" in said and "smoke check passed" in said, said
        assert subscribed(simulator, token) >= 1

        admin = server.admin()
        rows = _rows(admin)
        assert rows["openclaw"]["valves"] == {
            "GATEWAY_URL": simulator.url,
            "GATEWAY_TOKEN": TOKEN,
            "AGENT_ID": "main",
            "MAX_MODELS": 7,
            "USAGE_LINE": False,
        }
        assert rows["openclaw_thinking"]["valves"] == {"priority": 2}
        assert all(r["is_active"] and not r["is_global"] for r in rows.values())
        listed = [m["id"] for m in admin.models() if m["id"].startswith("openclaw.")]
        assert "openclaw.main" in listed and len(listed) > 1, listed  # the Gateway's models: listed after the hello
        for model_id in listed:
            assert f"attached openclaw_thinking to {model_id}" in said
        model_rows = {m: admin.get(f"/api/v1/models/model?id={m}") for m in listed}

        # updated_at is in whole seconds: a write in the same second would not move it; wait for the next one.
        newest = max(r["updated_at"] for r in rows.values())
        wait_until(lambda: int(time.time()) > newest, "the clock past the first apply's second")
        second = _install("--config", str(config))
        assert second.returncode == 0, second.stderr
        lines = second.stdout.splitlines()
        assert "nothing changed" in lines, second.stdout
        assert not any(line.startswith(("created", "updated", "activated", "attached", "openclaw")) for line in lines)
        assert _rows(admin) == rows  # updated_at included: no Function was written
        assert {m: admin.get(f"/api/v1/models/model?id={m}") for m in listed} == model_rows

        dry = _install("--config", str(config), "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert dry.stdout.splitlines() == ["dry run: nothing would change"]

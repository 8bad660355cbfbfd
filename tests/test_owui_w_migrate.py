"""Tier W, issue 30: the move from the old asyncio Pipe, as a person and an admin see it. The real Open WebUI 0.12.4
server started with owc's environment but holding only the old Functions (stand-ins of our own: the old code is not
available), the simulator as the Gateway, headless Chromium as the person.

The old Functions are installed as the old installer wrote them (``tests/old_pipe_fixture.py``'s rows and valves):
the Pipe ``openclaw_gateway`` (a manifold listing ``opus``, ``chatgpt``, ``sonnet``, ``glm``, answering a fixed text),
the status Action ``openclaw_status_action`` and the thinking Filter ``openclaw_thinking``. A chat made with the old
model id ``openclaw_gateway.opus`` gets the stand-in's reply; ``owc owui migrate`` puts owc in its place (the old
device identity reused: the device the simulator pairs is the old one); ``owc owui status`` exits 0; a message in
the same old chat is answered by owc through the simulator; ``owc owui rollback`` restores the old Functions exactly
and the next message in that chat is the stand-in's again. The story runs on Open WebUI's default SQLite and on
PostgreSQL (its ``DATABASE_URL``, a database of its own in the session's cluster: ``tests/pgserver.py``), every
assertion shared; on PostgreSQL the old Functions' rows, read from the ``function`` table, are the same after the
rollback as before the migration. Screenshots go to ``$OWC_SCREENSHOTS`` (else the test's tmp dir)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from old_pipe_fixture import device_identity, functions
from test_owui_w import (
    TOKEN,
    WAIT_S,
    assistant_messages,
    open_page,
    owc_env,
    simulated_gateway,
    subscribed,
    unfinished_replies,
    wait_connected,
    wait_until,
)

from owc.owui.pipe import OWC_PIPE_MARK
from owc.sim.script import End, Text, fake_model_responder

from owui.simthread import call

pytestmark = [pytest.mark.owuiserver, pytest.mark.timeout(1800)]

MS = WAIT_S * 1000
OLD_MODEL = "openclaw_gateway.opus"
OLD_SAID = "old pipe here"
OWC_WORDS = "AFTER_MIGRATE are you still there?"
OWC_SAID = "owc answers the old chat now."
OLD_FUNCTIONS = ("openclaw_gateway", "openclaw_status_action", "openclaw_thinking")
#: The old presets' models (the old Pipe's defaults), which the Gateway of an old deployment has configured.
OLD_CATALOG = (("openai", "gpt-5.5"), ("anthropic", "claude-opus-4-8"))


def responder(key: str, words: str) -> Any:
    """The agent: a fixed answer to the person's message after the migration, the fake model for anything else."""
    if "AFTER_MIGRATE" not in words:
        return fake_model_responder(key, words)
    return [Text(OWC_SAID), End()]


def _field(name: str, value: Any) -> str:
    kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "str"
    default = repr(type(value)()) if kind != "bool" else "False"
    return f"        {name}: {kind} = {default}\n"


def stand_in_code(kind: str, title: str, valves: dict[str, Any]) -> str:
    """A stand-in for one old Function: the old frontmatter, a ``Valves`` class declaring the old valves (Open WebUI
    keeps only declared ones), and for the Pipe a manifold of the old presets answering ``OLD_SAID``."""
    head = (
        f'"""\ntitle: {title}\nauthor: openclaw-openwebui-integration\nversion: 0.7.0\nlicense: MIT\n'
        f'description: stand-in for the old {kind.lower()} (tests/test_owui_w_migrate.py)\n"""\n'
        "from pydantic import BaseModel\n\n\n"
        f"class {kind}:\n    class Valves(BaseModel):\n"
    )
    body = "".join(_field(name, value) for name, value in valves.items()) or "        pass\n"
    init = "\n    def __init__(self):\n        self.valves = self.Valves()\n"
    if kind == "Pipe":
        tail = (
            "        self.type = 'manifold'\n\n"
            "    def pipes(self):\n"
            "        return [{'id': p, 'name': p.capitalize()} for p in ('chatgpt', 'opus', 'sonnet', 'glm')]\n\n"
            f"    def pipe(self, body):\n        return {OLD_SAID!r}\n"
        )
    elif kind == "Action":
        tail = "\n    async def action(self, body, **kwargs):\n        return None\n"
    else:
        tail = "\n    def inlet(self, body, **kwargs):\n        return body\n"
    return head + body + init + tail


def old_rows(sim_url: str, state_dir: Path) -> list[dict[str, Any]]:
    """The old Functions' rows (``old_pipe_fixture.functions``), aimed at the simulator: ``GATEWAY_URL`` as the old
    installer wrote it (``host:port``, the old Pipe added ``ws://``), the token, a state folder that holds nothing
    (so the ``DEVICE_IDENTITY`` valve is the identity)."""
    rows = functions(device_identity())
    host_port = sim_url.split("://", 1)[-1].split("/", 1)[0]
    for row in rows:
        valves = row["valves"]
        if "GATEWAY_URL" in valves:
            valves.update(GATEWAY_URL=host_port, GATEWAY_TOKEN=TOKEN, STATE_DIR=str(state_dir))
        kind = row["type"].capitalize()
        row["content"] = stand_in_code(kind, row["name"], valves)
    return rows


def install_old(admin: Any, rows: list[dict[str, Any]]) -> None:
    """What the old installer did, through Open WebUI's admin API: create, valves, active, global."""
    for row in rows:
        fid = row["id"]
        admin.create_function(fid, row["name"], row["content"], description=row["meta"]["description"])
        admin.post(f"/api/v1/functions/id/{fid}/valves/update", row["valves"])
        if row["is_active"]:
            admin.toggle_function(fid)
        if row["is_global"]:
            admin.post(f"/api/v1/functions/id/{fid}/toggle/global")
    admin.models()


def function_state(admin: Any, fid: str) -> dict[str, Any] | None:
    record = admin.get_function(fid)
    if record is None:
        return None
    valves = admin.get(f"/api/v1/functions/id/{fid}/valves") or {}
    return {
        "content": record["content"], "is_active": record["is_active"], "is_global": record["is_global"],
        "valves": valves,
    }  # fmt: skip


def owc_cli(deployment: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    from owui.server import ADMIN_EMAIL, ADMIN_PASSWORD

    command, *rest = args
    done = subprocess.run(
        [sys.executable, "-m", "owc", "owui", command, "--url", deployment["server"].base_url,
         "--admin-email", ADMIN_EMAIL, *rest],
        env={**os.environ, "OWC_OWUI_ADMIN_PASSWORD": ADMIN_PASSWORD},
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert ADMIN_PASSWORD not in done.stdout + done.stderr
    assert TOKEN not in done.stdout + done.stderr
    return done


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database(request) -> str | None:
    """Where Open WebUI keeps its data: ``None`` (its default SQLite file) or a PostgreSQL database of this module's
    own (``postgresql+psycopg://``, for SQLAlchemy; Open WebUI is given the ``postgresql://`` form)."""
    if request.param == "sqlite":
        return None
    from conftest import _postgres_database

    return _postgres_database("owc_w_migrate")


def function_rows(database: str) -> dict[str, dict[str, Any]]:
    """The old Functions' rows as Open WebUI's ``function`` table holds them (SQLAlchemy Core, literal SQL)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(database)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT id, content, valves, is_active, is_global FROM function")).all()
    finally:
        engine.dispose()
    return {
        r.id: {"content": r.content, "valves": r.valves, "is_active": r.is_active, "is_global": r.is_global}
        for r in rows
        if r.id in OLD_FUNCTIONS
    }


@pytest.fixture(scope="module")
def gateway(database) -> Iterator[tuple[Any, Any]]:
    """A simulator of its own for each database (its paired devices start empty each time)."""

    def prepare(simulator: Any) -> None:
        simulator.responder = responder
        base = simulator.rpc.models[0]
        for provider, model_id in OLD_CATALOG:
            simulator.rpc.models.append({**base, "id": model_id, "name": model_id, "provider": provider, "tags": []})

    with simulated_gateway(prepare) as pair:
        yield pair


@pytest.fixture(scope="module")
def deployment(database, gateway, server_venv, browser_install, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """Open WebUI with owc's environment (the operator set it before migrating) and only the old Functions."""
    from owui.server import running_server

    simulator, token = gateway
    tmp = tmp_path_factory.mktemp(f"owui-w-migrate-{'postgresql' if database else 'sqlite'}")
    database_url = database.replace("postgresql+psycopg://", "postgresql://") if database else None
    with running_server(tmp, database_url=database_url, env_extra=owc_env(simulator.url)) as server:
        admin = server.admin()
        rows = old_rows(simulator.url, tmp / "old-state-absent")
        install_old(admin, rows)
        yield {
            "server": server, "admin": admin, "sim": simulator, "token": token, "tmp": tmp, "rows": rows,
            "device_dir": server.workdir / "data" / "owc", "backups": tmp / "backups", "database": database,
        }  # fmt: skip
        wait_until(lambda: not unfinished_replies(admin), "every reply finished")


@pytest.fixture
def browser(deployment, tmp_path) -> Iterator[Any]:
    from owui.browser import running_browser

    with running_browser(tmp_path) as b:
        yield b


def _replies_saying(admin: Any, chat_id: str, text: str) -> list[dict[str, Any]]:
    return [
        m for m in assistant_messages(admin, chat_id).values() if m.get("done") is True and text in m.get("content", "")
    ]


def test_an_old_chat_is_answered_by_owc_after_migrate_and_by_the_old_pipe_after_rollback(deployment, browser) -> None:
    admin, simulator, token = deployment["admin"], deployment["sim"], deployment["token"]
    rows = {r["id"]: r for r in deployment["rows"]}
    identity = json.loads(rows["openclaw_gateway"]["valves"]["DEVICE_IDENTITY"])

    # The old Functions, as the old installer left them.
    installed = {fid: function_state(admin, fid) for fid in OLD_FUNCTIONS}
    for fid, state in installed.items():
        assert state is not None, fid
        row = rows[fid]
        assert (state["is_active"], state["is_global"], state["valves"]) == (
            row["is_active"], row["is_global"], row["valves"],
        ), fid  # fmt: skip
    assert OLD_MODEL in {m["id"] for m in admin.models()}
    database = deployment["database"]
    stored = function_rows(database) if database else None
    if stored is not None:
        assert set(stored) == set(OLD_FUNCTIONS) and all(stored[f]["content"] == rows[f]["content"] for f in stored)

    # 1. A chat made with the old model id: the old Pipe answers.
    page = open_page(browser, deployment)
    chat_id = page.new_chat_with(OLD_MODEL, "Hello, old friend.", timeout_ms=MS)
    page.wait_for_assistant_text(OLD_SAID, timeout_ms=MS)
    wait_until(lambda: _replies_saying(admin, chat_id, OLD_SAID), "the old Pipe's reply stored")
    page.screenshot("w-migrate-1-old-pipe")

    # 2. owc owui migrate: owc connects as the old Pipe's device (approved here as the Gateway's owner would, had it
    #    not been paired before: the simulator is new), so the device paired is the old identity.
    before = subscribed(simulator, token)
    from owui.server import ADMIN_EMAIL, ADMIN_PASSWORD

    proc = subprocess.Popen(
        [sys.executable, "-m", "owc", "owui", "migrate", "--url", deployment["server"].base_url,
         "--admin-email", ADMIN_EMAIL, "--backup-dir", str(deployment["backups"]),
         "--device-dir", str(deployment["device_dir"])],
        env={**os.environ, "OWC_OWUI_ADMIN_PASSWORD": ADMIN_PASSWORD},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_connected(simulator, token, before + 1)
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out + err
    assert ADMIN_PASSWORD not in out + err and TOKEN not in out + err
    assert "found the old Functions: openclaw_gateway (active, global), openclaw_status_action (active, global)" in out
    assert f"device {identity['id']} written to" in out
    assert out.strip().splitlines()[-1].startswith("migrated: openclaw_gateway runs owc")
    paired = call(token, lambda: [d.device_id for d in simulator.devices.paired()])
    assert identity["id"] in paired, paired

    # The Functions after the migration.
    pipe = function_state(admin, "openclaw_gateway")
    assert pipe is not None and OWC_PIPE_MARK in pipe["content"] and pipe["is_active"]
    host_port = rows["openclaw_gateway"]["valves"]["GATEWAY_URL"]
    assert pipe["valves"]["GATEWAY_URL"] == f"ws://{host_port}"
    assert pipe["valves"]["GATEWAY_TOKEN"] == TOKEN
    assert pipe["valves"]["AGENT_ID"] == "main"
    assert pipe["valves"]["MODEL_WHITELIST"] == rows["openclaw_gateway"]["valves"]["CONFIGURED_MODELS"]
    assert pipe["valves"]["DEFAULT_MODEL"] == "openai/gpt-5.5"
    assert "DEVICE_IDENTITY" not in pipe["valves"] and "ENABLE_FILE_SERVER" not in pipe["valves"]
    action = function_state(admin, "openclaw_status_action")
    assert action is not None and action["content"] == rows["openclaw_status_action"]["content"]
    assert action["is_active"] is False
    thinking = function_state(admin, "openclaw_thinking")
    assert thinking is not None and thinking["content"] != rows["openclaw_thinking"]["content"]
    assert thinking["is_active"] is True
    for fid in ("openclaw_startup", "openclaw_status"):
        added = function_state(admin, fid)
        assert added is not None and added["is_active"], fid
    backups = list(deployment["backups"].glob("migrate-*"))
    assert len(backups) == 1 and all(p.stat().st_mode & 0o077 == 0 for p in backups[0].iterdir())

    # owc owui status after the migration: every check holds.
    status = owc_cli(deployment, "status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert status.stdout.strip().splitlines()[-1] == "status: all checks hold"

    # 3. The same old chat, a new message: owc answers through the Gateway, under the old model id.
    assert OLD_MODEL in {m["id"] for m in admin.models()}
    page = open_page(browser, deployment, chat_id)
    page.send_message(OWC_WORDS)
    page.wait_for_assistant_text(OWC_SAID, timeout_ms=MS)
    (owc_reply,) = wait_until(lambda: _replies_saying(admin, chat_id, OWC_SAID), "owc's reply stored")
    assert owc_reply.get("model") == OLD_MODEL
    page.screenshot("w-migrate-2-owc")

    # 4. owc owui rollback: the old Functions exactly as they were, owc's additions gone.
    rolled = owc_cli(deployment, "rollback", "--backup-dir", str(deployment["backups"]))
    assert rolled.returncode == 0, rolled.stdout + rolled.stderr
    assert "rolled back: openclaw_gateway runs the old Pipe again" in rolled.stdout
    for fid in OLD_FUNCTIONS:
        assert function_state(admin, fid) == installed[fid], fid
    for fid in ("openclaw_startup", "openclaw_status"):
        assert function_state(admin, fid) is None, fid
    if stored is not None:  # PostgreSQL holds the old rows as they were: code, valves, active, global
        assert function_rows(database) == stored

    # 5. The same chat again: the old Pipe answers; owc's reply and the first one stay as they were.
    page = open_page(browser, deployment, chat_id)
    page.send_message("And now, old friend?")
    wait_until(lambda: len(_replies_saying(admin, chat_id, OLD_SAID)) == 2, "the old Pipe's second reply stored")
    page = open_page(browser, deployment, chat_id)  # a reload: what the chat holds, as a person sees it
    page.wait_for_assistant_text(OWC_SAID, timeout_ms=MS)
    texts = page.assistant_texts()
    assert [t for t in texts if t] == [OLD_SAID, OWC_SAID, OLD_SAID], texts
    page.screenshot("w-migrate-3-rolled-back")

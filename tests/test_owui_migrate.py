"""``owc owui migrate`` / ``rollback`` / ``status`` (``owc/owui/migrate.py``, issue 30) against the stand-in for Open
WebUI 0.12.4's admin routes of ``tests/test_owui_install.py``, holding the old system's Functions as its installers
wrote them (inventory G1, G3, G4, section 2): the Pipe ``openclaw_gateway`` (active, global, its valves with the
``DEVICE_IDENTITY`` JSON), the status Action ``openclaw_status_action`` (active, global, five mirrored valves), the
thinking Filter ``openclaw_thinking`` (active, not global), and a model row an admin made for an old preset.

The stand-in adds what these commands touch beyond the install: ``DELETE .../delete``, ``toggle/global``, the model
row delete, the valves as 0.12.4 saves them (``None`` values dropped), and owc's ``/api/owc/health``.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import stat
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from test_owui_install import FakeOpenWebUI, _api, _error

from owc import device
from owc.owui import migrate as mig
from owc.owui.install import function_source

TOKEN = "old-gateway-token-5b1e0c9d7a"
OWUI_KEY = "sk-old-owui-api-key-77"
FILTER_VALVES = {"priority": 0, "override_advanced_params": True}
HEALTH = {
    "running": True,
    "connected": True,
    "gateway": "ws://localhost:18789",
    "boot_id": "boot-1234",
    "device_id": None,
    "paired": "yes (its device token is stored)",
    "pairing": None,
    "refusal": None,
    "pid": 1,
}


def old_identity() -> tuple[dict[str, str], Ed25519PrivateKey]:
    """An identity in the old Pipe's shape (inventory A2): id = SHA-256 hex of the raw public key, ``publicKey``
    base64url without padding, ``privateKey`` PKCS8 PEM."""
    key = Ed25519PrivateKey.generate()
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    ident = {
        "id": hashlib.sha256(raw).hexdigest(),
        "publicKey": base64.urlsafe_b64encode(raw).decode().rstrip("="),
        "privateKey": pem.decode(),
    }
    return ident, key


def _old_code(kind: str) -> str:
    title = {"Pipe": "OpenClaw Gateway", "Action": "OpenClaw Status", "Filter": "OpenClaw Thinking"}[kind]
    return f'"""\ntitle: {title}\nversion: 0.7.0\n"""\nclass {kind}:\n    class Valves:\n        pass\n'


class OldOpenWebUI(FakeOpenWebUI):
    """The install's stand-in with the old Functions in it, and the routes rollback and status use."""

    def __init__(self, identity: dict[str, str], *, state_dir: str = "/nonexistent/openclaw-bridge") -> None:
        super().__init__()
        self.health: dict[str, Any] | None = dict(HEALTH)
        #: Each health request's query (``wait_s=...`` when the caller asked the route to hold its answer).
        self.health_asked: list[str] = []
        pipe_valves = {
            "GATEWAY_URL": "https://gw.example.net:18789/ws",
            "GATEWAY_TOKEN": TOKEN,
            "AGENT_ID": "main",
            "DEVICE_IDENTITY": json.dumps(identity),
            "STATE_DIR": state_dir,
            "OWUI_BASE_URL": "http://127.0.0.1:8080",
            "OWUI_API_KEY": OWUI_KEY,
            "CHATGPT_MODEL": "openai/gpt-5.5",
            "OPUS_MODEL": "anthropic/claude-opus-4-8",
            "ENABLE_FILE_SERVER": True,
            "USE_OWUI_FILES": True,
            "SEND_STOP_ON_CANCEL": True,
            "CONFIGURED_MODELS": "openai/gpt-5.5,anthropic/claude-opus-4-8",
            "DEFAULT_MODEL": "openai/gpt-5.5",
            "MAX_MODELS": 12,
        }
        mirrored = {
            k: pipe_valves[k] for k in ("GATEWAY_URL", "GATEWAY_TOKEN", "DEVICE_IDENTITY", "STATE_DIR", "AGENT_ID")
        }
        for fid, name, kind, valves, active, is_global in (
            ("openclaw_gateway", "OpenClaw Gateway", "Pipe", pipe_valves, True, True),
            ("openclaw_status_action", "OpenClaw Status", "Action", mirrored, True, True),
            ("openclaw_thinking", "OpenClaw Thinking", "Filter", FILTER_VALVES, True, False),
        ):  # fmt: skip
            self.functions[fid] = {
                "id": fid,
                "name": name,
                "type": kind.lower(),
                "content": _old_code(kind),
                "meta": {"description": f"old {kind}", "manifest": {"title": name}},
                "is_active": active,
                "is_global": is_global,
                "valves": valves,
            }
        # An admin's row for an old preset: the old Filter ticked, a system prompt of their own.
        self.models["openclaw_gateway.opus"] = {
            "id": "openclaw_gateway.opus",
            "base_model_id": None,
            "name": "Opus",
            "meta": {"filterIds": ["openclaw_thinking"], "description": "mine"},
            "params": {"system": "Be brief."},
            "is_active": True,
        }

    def _answer(self, method: str, path: str, body: Any, auth: str | None) -> Any:
        if auth == "Bearer jwt":
            if path.partition("?")[0] == "/api/owc/health":
                self.health_asked.append(path.partition("?")[2])
                return self.health if self.health is not None else _error(404, "Not Found")
            if path == "/api/models":
                return {"data": [{"id": i, "name": i} for i in self._listed()]}
            if path.startswith("/api/v1/models/model?id="):  # the id as a query value, %-encoded
                return self.models.get(urllib.parse.unquote(path.split("=", 1)[1]))
            if path == "/api/v1/models/model/delete":
                return self.models.pop(body["id"], None) is not None
            parts = path.removeprefix("/api/v1/functions/id/").split("/")
            if path.startswith("/api/v1/functions/id/") and parts[0] in self.functions:
                function = self.functions[parts[0]]
                if parts[1:] == ["delete"] and method == "DELETE":
                    del self.functions[parts[0]]
                    return True
                if parts[1:] == ["toggle", "global"]:
                    function["is_global"] = not function["is_global"]
                    return function
                if parts[1:] == ["valves", "update"]:  # Valves(**form).model_dump(exclude_unset=True)
                    function["valves"] = {k: v for k, v in body.items() if v is not None}
                    return function["valves"]
        answer = super()._answer(method, path, body, auth)
        if path == "/api/v1/functions/create" and isinstance(answer, dict):  # as 0.12.4 stores a new one
            answer.setdefault("is_global", False)
            answer["type"] = next(
                k.lower() for k in ("Pipe", "Event", "Filter", "Action") if f"class {k}" in body["content"]
            )
        return answer

    def _listed(self) -> list[str]:
        out = []
        for fid, f in self.functions.items():
            if not (f["is_active"] and "class Pipe" in f["content"]):
                continue
            if mig.is_owc_pipe(f) and fid == "openclaw_gateway":  # owc under the old id lists the old ids
                out += [f"{fid}.{s}" for s in ("default", "openai/gpt-5.5", "chatgpt", "opus", "sonnet", "glm")]
            elif mig.is_owc_pipe(f):
                out.append(f"{fid}.main")
            else:
                out += [f"{fid}.{s}" for s in ("default", "chatgpt", "opus", "sonnet", "glm")]
        return out

    def state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        return copy.deepcopy(self.functions), copy.deepcopy(self.models)


@pytest.fixture
def old() -> tuple[OldOpenWebUI, dict[str, str], Ed25519PrivateKey]:
    ident, key = old_identity()
    return OldOpenWebUI(ident), ident, key


def _run(fake: OldOpenWebUI, tmp_path: Path, **kw: Any) -> tuple[mig.Outcome, str]:
    lines: list[str] = []
    kw.setdefault("device_dir", tmp_path / "owc-device")
    outcome = mig.migrate(_api(fake), backup_root=tmp_path / "backups", report=lines.append, smoke_wait_s=0.0, **kw)
    return outcome, "\n".join(lines)


def test_a_dry_run_says_each_step_and_changes_nothing(old, tmp_path) -> None:
    fake, ident, _ = old
    before = fake.state()
    outcome, out = _run(fake, tmp_path, dry_run=True)
    assert outcome == mig.Outcome(changed=False)
    assert fake.state() == before
    assert [c for c in fake.calls if c[0] != "GET" and c[1] != "/api/v1/auths/signin"] == []
    assert not (tmp_path / "backups").exists() and not (tmp_path / "owc-device").exists()
    assert "found the old Functions: openclaw_gateway (active, global), openclaw_status_action (active, global)" in out
    assert f"would convert the old Pipe's device {ident['id']} from the DEVICE_IDENTITY valve" in out
    assert "would put owc's Pipe into openclaw_gateway in place" in out
    assert "would deactivate the old status Action openclaw_status_action" in out
    assert "not carried (owc has no such setting; kept in the backup): ENABLE_FILE_SERVER, OWUI_API_KEY" in out
    assert out.splitlines()[-1].startswith("dry run: nothing changed")
    assert TOKEN not in out and OWUI_KEY not in out and "PRIVATE KEY" not in out


def test_migrate_puts_owc_in_place_carries_valves_and_the_device_and_backs_up(old, tmp_path) -> None:
    fake, ident, key = old
    original = fake.state()
    outcome, out = _run(fake, tmp_path, device_dir_valve=True)
    assert outcome.changed and outcome.smoke_ok
    pipe = fake.functions["openclaw_gateway"]
    assert pipe["content"] == function_source("openclaw_pipe.py") and pipe["is_active"]
    assert pipe["valves"] == {
        "GATEWAY_URL": "ws://gw.example.net:18789",  # as the old Pipe dialled it: scheme and path dropped, ws://
        "GATEWAY_TOKEN": TOKEN,
        "AGENT_ID": "main",
        "MODEL_WHITELIST": "openai/gpt-5.5,anthropic/claude-opus-4-8",
        "MAX_MODELS": 12,
        "DEFAULT_MODEL": "openai/gpt-5.5",
        "CHATGPT_MODEL": "openai/gpt-5.5",
        "OPUS_MODEL": "anthropic/claude-opus-4-8",
        "DEVICE_DIR": str(tmp_path / "owc-device"),
    }
    assert fake.functions["openclaw_thinking"]["content"] == function_source("openclaw_thinking.py")
    assert fake.functions["openclaw_status_action"]["is_active"] is False  # deactivated, not changed
    assert fake.functions["openclaw_status_action"]["content"] == original[0]["openclaw_status_action"]["content"]
    for fid in ("openclaw_startup", "openclaw_status"):
        assert fake.functions[fid]["is_active"] and not fake.functions[fid]["is_global"]
    assert "openclaw" not in fake.functions  # one Pipe: the old id
    # Every model of the Pipe gets the toggle and the button; the admin's row keeps its settings.
    for model_id in fake._listed():
        meta = fake.models[model_id]["meta"]
        assert "openclaw_thinking" in meta["filterIds"] and "openclaw_status" in meta["actionIds"]
    assert fake.models["openclaw_gateway.opus"]["params"] == {"system": "Be brief."}
    assert fake.models["openclaw_gateway.opus"]["meta"]["filterIds"] == ["openclaw_thinking"]
    # The same Ed25519 key, in owc's format: the Gateway's pairing carries over.
    identity = device.load(tmp_path / "owc-device")
    assert identity is not None and identity.device_id == ident["id"] and identity.public_key_b64 == ident["publicKey"]
    payload = "v3|probe"
    Ed25519PublicKey.from_public_bytes(device.b64url_decode(ident["publicKey"])).verify(
        device.b64url_decode(identity.sign(payload)), payload.encode()
    )
    assert key.sign(payload.encode()) == device.b64url_decode(identity.sign(payload))  # Ed25519 is deterministic
    # The backup: a folder 0700, files 0600, the old code and valves.
    folder = outcome.backup
    assert folder is not None and folder.parent == tmp_path / "backups"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for file in folder.iterdir():
        assert stat.S_IMODE(file.stat().st_mode) == 0o600, file
    assert (
        json.loads((folder / "openclaw_gateway-valves.json").read_text()) == original[0]["openclaw_gateway"]["valves"]
    )
    assert json.loads((folder / "openclaw_gateway.json").read_text())["content"] == _old_code("Pipe")
    assert "smoke: owc connected to ws://localhost:18789, Gateway boot boot-1234" in out
    assert out.splitlines()[-1].startswith("migrated: openclaw_gateway runs owc, 6 model(s) listed; backup ")
    assert TOKEN not in out and OWUI_KEY not in out and "PRIVATE KEY" not in out


def test_a_second_migrate_changes_nothing(old, tmp_path) -> None:
    fake, _, _ = old
    _run(fake, tmp_path)
    after = fake.state()
    calls = len(fake.calls)
    outcome, out = _run(fake, tmp_path)
    assert outcome == mig.Outcome(changed=False)
    assert fake.state() == after
    assert all(method == "GET" or path == "/api/v1/auths/signin" for method, path in fake.calls[calls:])
    assert "openclaw_gateway already runs owc: nothing to migrate" in out
    assert len(list((tmp_path / "backups").iterdir())) == 1


def test_rollback_restores_functions_valves_flags_and_model_rows_exactly(old, tmp_path) -> None:
    fake, _, _ = old
    original = fake.state()
    outcome, _ = _run(fake, tmp_path)
    assert fake.state() != original
    lines: list[str] = []
    mig.rollback(_api(fake), backup=mig.latest_backup(tmp_path / "backups"), report=lines.append)
    assert fake.state() == original
    out = "\n".join(lines)
    assert "removed openclaw_startup (it was not there before the migration)" in out
    assert "restored openclaw_status_action: its code, valves and flags (active, global)" in out
    assert "restored openclaw_gateway.opus's settings" in out
    assert "owc still runs inside this Open WebUI process until Open WebUI restarts" in out  # health says running
    assert out.splitlines()[-1].startswith("rolled back: openclaw_gateway runs the old Pipe again")
    # And a migration after the rollback works again, with a backup of its own.
    outcome2, _ = _run(fake, tmp_path)
    assert outcome2.changed and outcome2.backup != outcome.backup


def test_status_holds_only_when_every_check_does(old, tmp_path) -> None:
    fake, ident, _ = old
    lines: list[str] = []
    assert mig.status(_api(fake), report=lines.append) is False
    assert "NO  Pipe openclaw_gateway: not owc's (the old Pipe? owc owui migrate)" in lines
    _run(fake, tmp_path)
    fake.health = {**HEALTH, "device_id": ident["id"]}
    lines = []
    assert mig.status(_api(fake), report=lines.append) is True
    assert lines == [
        "ok  Pipe openclaw_gateway: active",
        "ok  startup Event openclaw_startup: active",
        "ok  thinking Filter openclaw_thinking: active",
        "ok  status Action openclaw_status: active",
        "ok  models: 6 listed under openclaw_gateway (openclaw_gateway.default, ...)",
        "ok  Gateway URL: ws://gw.example.net:18789",
        "ok  token: set in GATEWAY_TOKEN",
        "ok  Gateway ws://localhost:18789: reachable, owc connected (boot boot-1234)",
        f"ok  device: {ident['id']}, paired: yes (its device token is stored)",
        "status: all checks hold",
    ]
    fake.health = {**HEALTH, "connected": False, "pairing": "openclaw devices approve req-1", "paired": "waiting"}
    lines = []
    assert mig.status(_api(fake), report=lines.append) is False
    assert "NO  Gateway ws://localhost:18789: openclaw devices approve req-1" in lines
    fake.health = None  # owc not running there: said, never guessed
    lines = []
    assert mig.status(_api(fake), report=lines.append) is False
    assert lines[-3].startswith("NO  owc in Open WebUI: not reachable")
    assert lines[-1] == "status: 2 check(s) do not hold"
    assert TOKEN not in "\n".join(lines)


def test_the_identity_comes_from_the_state_folder_first_with_its_device_token(tmp_path) -> None:
    in_valve, _ = old_identity()
    in_file, _ = old_identity()
    state = tmp_path / "openclaw-bridge"
    state.mkdir()
    # The old code's PEM pasted with raw newlines inside the JSON string (its _parse_device_identity repaired it).
    (state / "identity.json").write_text(
        f'{{"id": "{in_file["id"]}", "publicKey": "{in_file["publicKey"]}", "privateKey": "{in_file["privateKey"]}"}}'
    )
    (state / "device-token.json").write_text(
        json.dumps({"deviceToken": "old-device-token-9f8e7d6c", "deviceId": in_file["id"]})
    )
    fake = OldOpenWebUI(in_valve, state_dir=str(state))
    _, out = _run(fake, tmp_path)
    identity = device.load(tmp_path / "owc-device")
    assert (
        identity is not None
        and identity.device_id == in_file["id"]
        and identity.device_token == "old-device-token-9f8e7d6c"
    )
    assert f"from {state / 'identity.json'} (and its device token)" in out
    assert "old-device-token-9f8e7d6c" not in out


def test_a_damaged_identity_or_another_device_stops_before_anything_changes(tmp_path) -> None:
    ident, _ = old_identity()
    other, _ = old_identity()
    fake = OldOpenWebUI({**ident, "id": other["id"]})
    before = fake.state()
    with pytest.raises(mig.MigrateError, match="the DEVICE_IDENTITY valve: its id is not its key's"):
        _run(fake, tmp_path)
    assert fake.state() == before and not (tmp_path / "backups").exists()
    fake = OldOpenWebUI(ident)
    before = fake.state()
    device.save(tmp_path / "owc-device", device.DeviceIdentity.generate())
    with pytest.raises(mig.MigrateError, match=r"holds another device .*--replace-device"):
        _run(fake, tmp_path)
    assert fake.state() == before
    outcome, _ = _run(fake, tmp_path, replace_device=True)
    assert outcome.changed and device.load(tmp_path / "owc-device").device_id == ident["id"]


def test_without_an_old_pipe_or_a_device_folder_it_says_what_to_do(old, tmp_path, monkeypatch) -> None:
    fake, _, _ = old
    monkeypatch.delenv("DATA_DIR", raising=False)
    with pytest.raises(mig.MigrateError, match="device folder inside Open WebUI is unknown here"):
        _run(fake, tmp_path, device_dir=None)
    del fake.functions["openclaw_gateway"]
    with pytest.raises(mig.MigrateError, match="no Function openclaw_gateway"):
        _run(fake, tmp_path)


@pytest.mark.parametrize(
    ("given", "dialled"),
    [
        ("", "ws://localhost:18789"),
        ("localhost:18789", "ws://localhost:18789"),
        ("gw.lan", "ws://gw.lan:18789"),
        ("wss://gw.lan/path?q=1", "ws://gw.lan:18789"),  # the old Pipe stripped the scheme: always ws://
        ("http://10.0.0.5:9000", "ws://10.0.0.5:9000"),
        ("[::1]:18790", "ws://[::1]:18790"),
        ("[fd00::2]", "ws://[fd00::2]:18789"),
    ],
)
def test_the_gateway_url_is_the_one_the_old_pipe_dialled(given: str, dialled: str) -> None:
    assert mig.old_gateway_url(given) == dialled


@pytest.mark.parametrize("bad", ["host:0", "host:99999", "host:port", "user:pw@host:1"])
def test_a_gateway_url_owc_cannot_read_is_one_line(bad: str) -> None:
    with pytest.raises(mig.MigrateError) as caught:
        mig.old_gateway_url(bad)
    assert "\n" not in str(caught.value) and "pw" not in str(caught.value).replace("port", "")


def test_owc_started_in_open_webui_reads_its_valves_from_the_old_id_only_when_that_holds_owcs_pipe() -> None:
    """The startup Event reads owc's Pipe valves from ``openclaw`` (an install), else from ``openclaw_gateway`` once
    the migration put owc's code there, never from the old Pipe itself."""
    import asyncio
    import types

    from owc.owui.pipe import pipe_valves

    rows = {"openclaw_gateway": types.SimpleNamespace(content=_old_code("Pipe"))}
    saved = {"openclaw": None, "openclaw_gateway": {"GATEWAY_URL": "ws://gw:1"}}

    class Functions:
        @staticmethod
        async def get_function_valves_by_id(fid: str) -> Any:
            return saved.get(fid)

        @staticmethod
        async def get_function_by_id(fid: str) -> Any:
            return rows.get(fid)

    assert asyncio.run(pipe_valves(Functions)) == {}
    rows["openclaw_gateway"] = types.SimpleNamespace(content=function_source("openclaw_pipe.py"))
    assert asyncio.run(pipe_valves(Functions)) == {"GATEWAY_URL": "ws://gw:1"}
    saved["openclaw"] = {"GATEWAY_URL": "ws://own:2"}
    assert asyncio.run(pipe_valves(Functions)) == {"GATEWAY_URL": "ws://own:2"}


def test_the_health_answer_without_owc_running_is_said_not_guessed() -> None:
    from owc.owui import health

    answer = health.snapshot()
    assert answer["running"] is False and answer["connected"] is False


def _bridge(fake: OldOpenWebUI) -> Any:
    """The stand-in behind a real HTTP server, for the command line (which builds its own urllib opener)."""
    from test_owui_install import _json

    def answer(handler: Any) -> tuple[int, dict[str, str], bytes]:
        method, path, auth, raw = handler.server.seen[-1]
        got = fake._answer(method, path, json.loads(raw) if raw else None, auth)
        if isinstance(got, Exception):
            return got.code, {"Content-Type": "application/json"}, b'{"detail": "no"}'
        return _json(got)

    return answer


def test_the_commands_exit_codes(old, tmp_path, monkeypatch, capsys) -> None:
    from test_owui_install import _server

    from owc.cli import EXIT_CONFIG, EXIT_OK, EXIT_UNHEALTHY, main

    fake, _, _ = old
    monkeypatch.setenv("OWC_OWUI_ADMIN_PASSWORD", "pw")
    with _server(_bridge(fake)) as server:
        base = ["owui", "{}", "--url", f"http://127.0.0.1:{server.server_address[1]}", "--admin-email"]
        base.append("admin@example.com")

        def run(command: str, *extra: str) -> int:
            return main([base[0], command, *base[2:], *extra])

        assert run("status") == EXIT_UNHEALTHY
        before = fake.state()
        assert (
            run("migrate", "--dry-run", "--backup-dir", str(tmp_path / "b"), "--device-dir", str(tmp_path)) == EXIT_OK
        )
        assert fake.state() == before
        assert run("rollback", "--backup-dir", str(tmp_path / "none")) == EXIT_CONFIG
    out, err = capsys.readouterr()
    assert "dry run: nothing changed" in out and "NO  Pipe openclaw_gateway" in out
    assert err.strip().splitlines() == [
        f"owc: owui rollback: no migration backup in {tmp_path / 'none'}: pass --backup-dir (the folder migrate named)"
    ]
    assert TOKEN not in out + err and "pw" not in err

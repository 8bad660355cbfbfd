"""``owc owui install --config FILE`` / the environment form (issue 31, configuration as code): the schema
(``owc/owui/install_config.py``), the plan (``owc/owui/install_plan.py``) and the apply (``owc/owui/install.py``)
against the stand-in for Open WebUI 0.12.4's admin API that the migrate tests use (``tests/test_owui_migrate.py``'s
``OldOpenWebUI`` without the old Functions: ``toggle/global``, valves saved as 0.12.4 saves them, owc's health
route), plus ``/ready`` and ``updated_at`` on every Function write, as 0.12.4 stamps them. The command line runs
through a real HTTP server on 127.0.0.1 (``_server`` / ``_bridge``); the real server is
``tests/test_owui_w_config.py``'s."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import trio
from test_owui_install import _api, _error, _server
from test_owui_migrate import HEALTH, OldOpenWebUI, _bridge

from owc.owui import install_config as cfg
from owc.owui.install import HEALTH_WAIT_MAX_S, TIMEOUT_S, apply, function_source

TOKEN = "gw-token-9c1f3e77aa"
NEW_TOKEN = "gw-token-rotated-41d0"
PASSWORD = "pw"
FUNCTION_IDS = ("openclaw", "openclaw_startup", "openclaw_thinking", "openclaw_status")


class ConfigOpenWebUI(OldOpenWebUI):
    """Open WebUI 0.12.4 as the installer meets it: empty (no old Functions), ``/ready`` answering, every write
    to a Function stamping its ``updated_at`` (a counter: what changed is what moved)."""

    def __init__(self) -> None:
        super().__init__({})
        self.functions.clear()
        self.models.clear()
        self.ready = True
        self.clock = 1000

    def _answer(self, method: str, path: str, body: Any, auth: str | None) -> Any:
        if path == "/ready":
            return {"status": True} if self.ready else _error(503, "Startup not complete")
        answer = super()._answer(method, path, body, auth)
        if method == "POST" and path.startswith("/api/v1/functions/"):
            fid = body["id"] if path.endswith("/create") else path.split("/")[5]
            if fid in self.functions and not isinstance(answer, Exception):
                self.clock += 1
                self.functions[fid]["updated_at"] = self.clock
        return answer

    def writes(self) -> list[tuple[str, str]]:
        return [c for c in self.calls if c[0] != "GET"]


def _toml(tmp_path: Path, text: str, *, token: str = TOKEN) -> Path:
    (tmp_path / "admin-password").write_text(PASSWORD + "\n")
    (tmp_path / "gateway-token").write_text(token + "\n")
    path = tmp_path / "owc.toml"
    path.write_text(text)
    return path


FULL = """\
[openwebui]
url = "http://owui:8080"
admin_email = "admin@example.com"
admin_password_file = "admin-password"   # relative: to this file's folder
connect_wait = 0

[pipe]
active = true
[pipe.valves]
GATEWAY_URL = "ws://gateway:18789"
AGENT_ID = "ops"
GATEWAY_TOKEN = { file = "gateway-token" }
MAX_MODELS = 12
USAGE_LINE = false

[startup]
active = true

[thinking]
active = true
global = false
[thinking.valves]
priority = 3

[status]
active = true
global = false
"""


def _apply(fake: ConfigOpenWebUI, spec: cfg.InstallSpec, *, dry_run: bool = False) -> list[str]:
    lines: list[str] = []
    apply(_api(fake), spec, dry_run=dry_run, report=lines.append, sleep=lambda s: None)
    return lines


def test_a_fresh_apply_creates_configures_activates_and_says_each_change(tmp_path) -> None:
    fake = ConfigOpenWebUI()
    lines = _apply(fake, cfg.load_toml(_toml(tmp_path, FULL)))
    assert set(fake.functions) == set(FUNCTION_IDS)
    assert all(f["is_active"] and not f["is_global"] for f in fake.functions.values())
    assert fake.functions["openclaw"]["content"] == function_source("openclaw_pipe.py")
    assert fake.functions["openclaw"]["valves"] == {
        "GATEWAY_URL": "ws://gateway:18789",
        "AGENT_ID": "ops",
        "GATEWAY_TOKEN": TOKEN,
        "MAX_MODELS": 12,
        "USAGE_LINE": False,
    }
    assert fake.functions["openclaw_thinking"]["valves"] == {"priority": 3}
    assert fake.models["openclaw.main"]["meta"] == {
        "filterIds": ["openclaw_thinking"],
        "actionIds": ["openclaw_status"],
    }
    assert lines == [
        "created openclaw (OpenClaw)",
        "openclaw valve GATEWAY_URL set to 'ws://gateway:18789'",
        "openclaw valve AGENT_ID set to 'ops'",
        "openclaw valve GATEWAY_TOKEN set (a secret: its value is not shown)",
        "openclaw valve MAX_MODELS set to 12",
        "openclaw valve USAGE_LINE set to False",
        "activated openclaw",
        "created openclaw_startup (OpenClaw startup)",
        "activated openclaw_startup",
        "created openclaw_thinking (OpenClaw thinking)",
        "openclaw_thinking valve priority set to 3",
        "activated openclaw_thinking",
        "created openclaw_status (OpenClaw status)",
        "activated openclaw_status",
        "attached openclaw_thinking to openclaw.main",
        "attached openclaw_status to openclaw.main",
        "models: openclaw.main",
        "16 change(s) made",
        "smoke: owc connected to ws://localhost:18789, Gateway boot boot-1234",
        "smoke: 1 OpenClaw model(s) listed",
        "smoke check passed",
    ]
    # The Pipe's valves were written before it was enabled (enabling starts owc with the saved valves).
    order = [c for c in fake.writes() if "/openclaw/" in c[1]]
    assert order == [
        ("POST", "/api/v1/functions/id/openclaw/valves/update"),
        ("POST", "/api/v1/functions/id/openclaw/toggle"),
    ]
    assert TOKEN not in "\n".join(lines)


def test_applied_twice_the_second_says_nothing_changed_and_writes_nothing(tmp_path) -> None:
    fake = ConfigOpenWebUI()
    spec = cfg.load_toml(_toml(tmp_path, FULL))
    _apply(fake, spec)
    before, calls = copy.deepcopy(fake.functions), len(fake.calls)
    lines = _apply(fake, spec)
    assert fake.functions == before  # the same rows, updated_at included
    assert [c for c in fake.calls[calls:] if c[0] != "GET"] == [("POST", "/api/v1/auths/signin")]
    assert lines == [
        "models: openclaw.main",
        "nothing changed",
        "smoke: owc connected to ws://localhost:18789, Gateway boot boot-1234",
        "smoke: 1 OpenClaw model(s) listed",
        "smoke check passed",
    ]


def test_a_changed_valve_and_flag_are_said_a_secret_without_its_value(tmp_path) -> None:
    fake = ConfigOpenWebUI()
    _apply(fake, cfg.load_toml(_toml(tmp_path, FULL)))
    changed = FULL.replace('AGENT_ID = "ops"', 'AGENT_ID = "main"').replace(
        "[status]\nactive = true\nglobal = false", "[status]\nactive = true\nglobal = true"
    )
    fake.functions["openclaw"]["content"] += "\n# an older owc\n"
    lines = _apply(fake, cfg.load_toml(_toml(tmp_path, changed, token=NEW_TOKEN)))
    assert lines[:5] == [
        "updated openclaw (OpenClaw): code",
        "openclaw valve AGENT_ID changed from 'ops' to 'main'",
        "openclaw valve GATEWAY_TOKEN changed (a secret: its value is not shown)",
        "made openclaw_status global",
        "models: openclaw.main",
    ]
    assert lines[5] == "4 change(s) made"
    assert fake.functions["openclaw"]["valves"]["GATEWAY_TOKEN"] == NEW_TOKEN
    assert fake.functions["openclaw"]["valves"]["AGENT_ID"] == "main"
    assert fake.functions["openclaw_status"]["is_global"] is True
    assert NEW_TOKEN not in "\n".join(lines) and TOKEN not in "\n".join(lines)


def test_a_valve_the_configuration_does_not_name_is_kept_and_a_flag_turns_a_function_off(tmp_path) -> None:
    fake = ConfigOpenWebUI()
    _apply(fake, cfg.load_toml(_toml(tmp_path, FULL)))
    fake.functions["openclaw"]["valves"]["MODEL_WHITELIST"] = "an admin's"
    off = FULL.replace("[startup]\nactive = true", "[startup]\nactive = false")
    lines = _apply(fake, cfg.load_toml(_toml(tmp_path, off)))
    assert lines[0] == "deactivated openclaw_startup"
    assert fake.functions["openclaw"]["valves"]["MODEL_WHITELIST"] == "an admin's"
    assert fake.functions["openclaw_startup"]["is_active"] is False


def test_a_dry_run_prints_the_plan_and_writes_nothing(tmp_path) -> None:
    fake = ConfigOpenWebUI()
    spec = cfg.load_toml(_toml(tmp_path, FULL))
    lines = _apply(fake, spec, dry_run=True)
    assert fake.functions == {} and fake.writes() == [("POST", "/api/v1/auths/signin")]
    assert lines[0] == "would: created openclaw (OpenClaw)"
    assert "would: openclaw valve GATEWAY_TOKEN set (a secret: its value is not shown)" in lines
    assert lines[-2:] == [
        "would: attach openclaw_thinking and openclaw_status to the Pipe's models once Open WebUI lists them",
        "dry run: 14 change(s) planned, nothing written",
    ]
    _apply(fake, spec)
    assert _apply(fake, spec, dry_run=True) == ["dry run: nothing would change"]


def test_the_environment_form_is_the_same_install(tmp_path) -> None:
    (tmp_path / "pw").write_text(PASSWORD)
    (tmp_path / "token").write_text(TOKEN)
    env = {
        "OWC_OWUI_URL": "http://owui:8080",
        "OWC_OWUI_ADMIN_EMAIL": "admin@example.com",
        "OWC_OWUI_ADMIN_PASSWORD_FILE": str(tmp_path / "pw"),
        "OWC_OWUI_CONNECT_WAIT": "0",
        "OWC_OWUI_CACHE": "/somewhere",  # another tool's variable: not owc's to judge
        "OWC_VALVE_GATEWAY_URL": "ws://gateway:18789",
        "OWC_VALVE_AGENT_ID": "ops",
        "OWC_VALVE_FILE_GATEWAY_TOKEN": str(tmp_path / "token"),
        "OWC_VALVE_MAX_MODELS": "12",
        "OWC_VALVE_USAGE_LINE": "false",
        "OWC_FUNCTION_THINKING_GLOBAL": "false",
        "OWC_FUNCTION_STATUS_GLOBAL": "false",
        "OWC_FUNCTION_THINKING_VALVE_PRIORITY": "3",
    }
    from_env = cfg.from_environ(env)
    from_file = cfg.load_toml(_toml(tmp_path, FULL))
    assert from_env == from_file
    assert from_env.connection.admin_password == PASSWORD and TOKEN not in repr(from_env)
    fake = ConfigOpenWebUI()
    _apply(fake, from_env)
    assert fake.functions["openclaw"]["valves"]["GATEWAY_TOKEN"] == TOKEN
    assert _apply(fake, from_file)[1] == "nothing changed"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            "[pipe.valves]\nGATEWAY_URLL = 'ws://x'\n",
            "unknown key 'pipe.valves.GATEWAY_URLL' (the OpenClaw Function's valves:",
        ),
        ("[pipe.valves]\nMAX_MODELS = '12'\n", "pipe.valves.MAX_MODELS must be an integer, not a string"),
        ("[pipe.valves]\nUSAGE_LINE = 1\n", "pipe.valves.USAGE_LINE must be a boolean, not an integer"),
        (
            "[pipe.valves]\nGATEWAY_TOKEN = 'abc'\n",
            'pipe.valves.GATEWAY_TOKEN is a secret: give it as { file = "/path" }',
        ),
        ("[thinking]\nglobl = true\n", "unknown key 'thinking.globl' (known: active, valves, global)"),
        ("[startup]\nglobal = true\n", "unknown key 'startup.global' (known: active, valves)"),
        ("[pipe]\nactive = 'yes'\n", "pipe.active must be a boolean, not a string"),
        ("[pipes]\n", "unknown key 'pipes' (the tables are: openwebui, pipe, startup, status, thinking)"),
        ("[openwebui]\nwait = -1\n", "openwebui.wait must be between 0 and 3600 seconds"),
    ],
)
def test_a_schema_error_is_one_line_naming_the_key_and_the_usage_exit_code(
    tmp_path, monkeypatch, capsys, text, line
) -> None:
    from owc.cli import EXIT_USAGE, main

    base = (
        '[openwebui]\nurl = "http://owui:8080"\nadmin_email = "admin@example.com"\n'
        'admin_password_file = "admin-password"\n'
    )
    if text.startswith("[openwebui]"):
        text = base.replace("[openwebui]\n", text)
    else:
        text = base + text
    path = _toml(tmp_path, text)
    assert main(["owui", "install", "--config", str(path)]) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == ""
    (said,) = err.strip().splitlines()
    assert said.startswith(f"owc: owui install: {line}"), said
    assert "abc" not in said  # a secret given by mistake is not repeated


@pytest.mark.parametrize(
    ("env", "line", "code"),
    [
        ({}, "owc: owui install: no Open WebUI address: pass --config FILE or --url URL, or set OWC_OWUI_URL", 2),
        (
            {"OWC_OWUI_URL": "http://o"},
            "owc: owui install: no admin email: set OWC_OWUI_ADMIN_EMAIL (or pass --admin-email)",
            2,
        ),
        (
            {"OWC_OWUI_URL": "http://o", "OWC_OWUI_ADMIN_EMAIL": "a@b"},
            "owc: owui install: no admin password: set OWC_OWUI_ADMIN_PASSWORD_FILE (a file holding it), or"
            " OWC_OWUI_ADMIN_PASSWORD_FILE",
            3,
        ),
        (
            {
                "OWC_OWUI_URL": "http://o",
                "OWC_OWUI_ADMIN_EMAIL": "a@b",
                "OWC_OWUI_ADMIN_PASSWORD": "pw",
                "OWC_VALVE_GATEWAY_TOKEN": "sekrit",
            },
            "owc: owui install: OWC_VALVE_GATEWAY_TOKEN: GATEWAY_TOKEN is a secret valve: put it in a file and set"
            " OWC_VALVE_FILE_GATEWAY_TOKEN to the file's path",
            2,
        ),
        (
            {
                "OWC_OWUI_URL": "http://o",
                "OWC_OWUI_ADMIN_EMAIL": "a@b",
                "OWC_OWUI_ADMIN_PASSWORD": "pw",
                "OWC_VALVE_AGENT": "x",
            },
            "owc: owui install: unknown variable OWC_VALVE_AGENT (the OpenClaw Function has no valve AGENT)",
            2,
        ),
        (
            {
                "OWC_OWUI_URL": "http://o",
                "OWC_OWUI_ADMIN_EMAIL": "a@b",
                "OWC_OWUI_ADMIN_PASSWORD": "pw",
                "OWC_FUNCTION_STARTUP_GLOBAL": "1",
            },
            "owc: owui install: unknown variable OWC_FUNCTION_STARTUP_GLOBAL"
            " (see owc owui install --help for the names)",
            2,
        ),
        (
            {
                "OWC_OWUI_URL": "http://o",
                "OWC_OWUI_ADMIN_EMAIL": "a@b",
                "OWC_OWUI_ADMIN_PASSWORD": "pw",
                "OWC_VALVE_MAX_MODELS": "many",
            },
            "owc: owui install: OWC_VALVE_MAX_MODELS must be an integer",
            2,
        ),
        (
            {
                "OWC_OWUI_URL": "http://o",
                "OWC_OWUI_ADMIN_EMAIL": "a@b",
                "OWC_OWUI_ADMIN_PASSWORD": "pw",
                "OWC_VALVE_FILE_GATEWAY_TOKEN": "/nonexistent/t",
            },
            "owc: owui install: pipe.valves.GATEWAY_TOKEN: cannot read /nonexistent/t: no such file",
            3,
        ),
    ],
)
def test_the_environment_form_never_prompts_a_missing_or_wrong_value_is_one_line(
    monkeypatch, capsys, env, line, code
) -> None:
    from owc.cli import main

    for name in [n for n in __import__("os").environ if n.startswith(("OWC_OWUI_", "OWC_VALVE_", "OWC_FUNCTION_"))]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)  # a terminal: still no prompt in this form
    monkeypatch.setattr("getpass.getpass", lambda *a: pytest.fail("prompted"))
    assert main(["owui", "install"]) == code
    out, err = capsys.readouterr()
    assert err.strip().splitlines() == [line] and out == ""
    assert "sekrit" not in err


def test_the_command_line_applies_the_file_twice_and_the_dry_run(tmp_path, capsys) -> None:
    from owc.cli import EXIT_OK, main

    fake = ConfigOpenWebUI()
    with _server(_bridge(fake)) as server:
        text = FULL.replace("http://owui:8080", f"http://127.0.0.1:{server.server_address[1]}")
        path = _toml(tmp_path, text)
        assert main(["owui", "install", "--config", str(path), "--dry-run"]) == EXIT_OK
        assert fake.functions == {}
        assert main(["owui", "install", "--config", str(path)]) == EXIT_OK
        first = copy.deepcopy(fake.functions)
        assert main(["owui", "install", "--config", str(path)]) == EXIT_OK
        assert fake.functions == first
    out, err = capsys.readouterr()
    assert err == ""
    assert out.count("nothing changed") == 1 and "dry run: 14 change(s) planned, nothing written" in out
    assert "16 change(s) made" in out and TOKEN not in out


def test_open_webui_not_answering_within_the_wait_is_its_own_exit_code(tmp_path, capsys) -> None:
    from owc.cli import main
    from owc.cli.codes import EXIT_UNREACHABLE
    from owc.owui.install import OpenWebUIUnreachable, wait_for_open_webui

    fake = ConfigOpenWebUI()
    fake.ready = False
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    lines: list[str] = []
    api = _api(fake)
    with pytest.raises(OpenWebUIUnreachable) as info:
        wait_for_open_webui(api, 5.0, report=lines.append, sleep=sleep, clock=lambda: now[0])
    assert (
        str(info.value) == "Open WebUI at http://owui:8080 did not answer within 5 s:"
        ' GET /ready: HTTP 503 {"detail": "Startup not complete"}'
    )
    assert lines == ["waiting up to 5 s for Open WebUI at http://owui:8080 to answer"] and sum(slept) == 5.0
    fake.ready = True
    wait_for_open_webui(api, 5.0, report=lines.append, sleep=sleep, clock=lambda: now[0])
    # The command line: a port nothing listens on, no wait.
    with _server(lambda h: (200, {}, b"{}")) as server:
        port = server.server_address[1]
    path = _toml(tmp_path, FULL.replace("http://owui:8080", f"http://127.0.0.1:{port}"))
    assert main(["owui", "install", "--config", str(path)]) == EXIT_UNREACHABLE
    (said,) = capsys.readouterr().err.strip().splitlines()
    assert said.startswith(f"owc: owui install: Open WebUI at http://127.0.0.1:{port} did not answer: GET /ready:")


# --- issue 31 item: the models line when owc has not had the Gateway's hello yet ---------------------------------


def test_the_models_are_listed_after_owcs_hello_or_the_line_says_they_follow(tmp_path) -> None:
    """Open WebUI lists only the Pipe's base entry until owc is connected: the install waits for the hello (the
    health route's ``connected``) before listing; past the wait it says the Gateway's models follow."""
    fake = ConfigOpenWebUI()
    spec = cfg.load_toml(_toml(tmp_path, FULL.replace("connect_wait = 0", "connect_wait = 3")))
    fake.health = {**HEALTH, "connected": False, "boot_id": None}
    answered: list[int] = []

    real = fake._answer

    def answer(method: str, path: str, body: Any, auth: str | None) -> Any:
        if path.startswith("/api/owc/health?wait_s="):
            answered.append(1)
            if len(answered) == 3:  # the hello arrives while the install waits
                fake.health = dict(HEALTH)
        return real(method, path, body, auth)

    fake._answer = answer  # type: ignore[method-assign]
    lines: list[str] = []
    apply(_api(fake), spec, report=lines.append, sleep=lambda s: None, clock=lambda: 0.0)
    assert len(answered) == 3 and "models: openclaw.main" in lines
    # Each request asks the route to hold its answer until owc's hello (the runtime's own event, not a poll).
    # Then once more, as it is: the agents owc listed, for their model rows' avatars.
    assert fake.health_asked == ["wait_s=3.0"] * 3 + [""]
    # Never connected within the wait: said, not left to guess.
    fake2 = ConfigOpenWebUI()
    fake2.health = {**HEALTH, "connected": False, "boot_id": None}
    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += s

    lines2: list[str] = []
    apply(_api(fake2), spec, report=lines2.append, sleep=sleep, clock=lambda: now[0])
    assert (
        "models: openclaw.main; owc is not connected to the Gateway yet, so the Gateway's models are not listed: they"
        " follow once it connects (run this install again then to attach the Filter and the Action to them)"
    ) in lines2
    assert now[0] == 3.0
    # This fake answers at once: asked again every ROUTE_RETRY_S for what is left of the wait, never in a tight loop.
    # The last, at the deadline, asks for the answer as it is.
    assert fake2.health_asked == [f"wait_s={3.0 - 0.5 * n:.1f}" for n in range(6)] + ["", ""]


# --- the rough edge: every flag a line of owc owui install names exists -------------------------------------------


def _flags_of(command: str) -> set[str]:
    """The options ``owc owui <command>`` takes (its own and those every command has)."""
    from owc.cli import build_parser

    parser = build_parser()
    owui = parser._subparsers._group_actions[0].choices["owui"]  # type: ignore[union-attr]
    sub = owui._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
    return {flag for action in sub._actions for flag in action.option_strings}


def test_every_flag_owc_owui_install_names_is_one_it_has(tmp_path, monkeypatch, capsys) -> None:
    """Issue 31: ``owc owui install`` named ``--token-file``, an option of ``owc run``. Every ``--flag`` in its
    help, its error lines and the lines its modules can say is one of its own options."""
    from owc.cli import main

    flags = _flags_of("install")
    texts = []
    for command in ("install", "migrate", "rollback", "status"):
        with pytest.raises(SystemExit):
            main(["owui", command, "--help"])
        helped = capsys.readouterr().out
        assert "--token-file" not in helped, command
        if command == "install":  # its own text: the exit codes every command shares name each command's flags
            from owc.cli.owui import OWUI_EPILOG

            texts.append(helped.replace(OWUI_EPILOG.strip(), ""))
            assert OWUI_EPILOG.strip() in helped
    for argv in (["--url", "http://o"], ["--admin-email", "a@b"], ["--config", str(tmp_path / "x"), "--url", "u"]):
        main(["owui", "install", *argv])
        texts.append(capsys.readouterr().err)
    root = Path(__file__).parent.parent / "owc"
    for module in ("owui/install.py", "owui/install_config.py", "owui/install_plan.py", "cli/owui.py"):
        source = (root / module).read_text()
        if module == "cli/owui.py":  # the install's part (migrate's own options are migrate's)
            source = (
                source[source.index("    inst = owui_sub.add_parser(") : source.index("    _owui_migration_parsers(")]
                + source[source.index("INSTALL_ENVIRONMENT =") : source.index("def _owui_api")]
            )
        texts.append(source)
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", "\n".join(texts)))
    assert named - flags == set(), f"flags owc owui install names but does not have: {named - flags}"
    assert "--token-file" not in named


def test_the_valve_schema_read_from_the_source_is_the_functions_own() -> None:
    """The valves ``install_config`` knows (names, types, secrecy) are those pydantic builds from the same
    classes: a valve added to a Function is known to the configuration without a second list."""
    pydantic = pytest.importorskip("pydantic")
    from owc.owui import status_action, thinking_filter

    ns: dict[str, Any] = {}
    exec(compile(function_source("openclaw_pipe.py"), "openclaw_pipe.py", "exec"), ns)
    for section, model in zip(
        cfg.SECTIONS, (ns["Pipe"].Valves, None, thinking_filter.Valves, status_action.Valves), strict=True
    ):
        schema = cfg.section_valves(section)
        if model is None:
            assert schema == {}
            continue
        assert set(schema) == set(model.model_fields)
        for name, field in model.model_fields.items():
            extra = field.json_schema_extra or {}
            assert schema[name].secret == (extra.get("input", {}).get("type") == "password"), name
            kind = {str: "str", int: "int", bool: "bool", float: "float"}.get(field.annotation, "str")
            assert schema[name].kind == kind, name
    assert {n for n, v in cfg.section_valves(cfg.SECTIONS[0]).items() if v.secret} == {"GATEWAY_TOKEN"}
    assert pydantic is not None


def test_the_command_line_form_keeps_its_lines_and_lists_the_models_after_the_hello(monkeypatch, capsys) -> None:
    """``--url --admin-email``: ``install``'s steps and lines as before (the W tier pins them), the models listed
    once owc is connected; ``--dry-run`` there is the plan."""
    from owc.cli import EXIT_OK, main

    fake = ConfigOpenWebUI()
    monkeypatch.setenv("OWC_OWUI_ADMIN_PASSWORD", PASSWORD)
    with _server(_bridge(fake)) as server:
        argv = ["owui", "install", "--url", f"http://127.0.0.1:{server.server_address[1]}"]
        argv += ["--admin-email", "admin@example.com", "--agent", "ops", "--connect-wait", "0"]
        assert main([*argv, "--dry-run"]) == EXIT_OK
        assert fake.functions == {}
        assert main(argv) == EXIT_OK
        assert main(argv) == EXIT_OK
    out = capsys.readouterr().out
    assert "would: openclaw valve AGENT_ID set to 'ops'" in out
    assert "created openclaw (OpenClaw)" in out and "activated openclaw_startup" in out
    assert "updated openclaw (OpenClaw) in place; its valves are kept" in out
    assert out.count("\nmodels: openclaw.main\n") == 2 and out.count("smoke check passed") == 2
    assert fake.functions["openclaw"]["valves"] == {"AGENT_ID": "ops"}


async def test_the_health_routes_wait_is_a_bounded_number_and_nothing_to_wait_for_without_owc() -> None:
    from owc.owui import health

    assert health.wait_param(None) == 0.0 and health.wait_param("3.5") == 3.5
    assert health.wait_param(f"{health.MAX_WAIT_S}") == health.MAX_WAIT_S
    for bad in ("-1", "25.1", "x", "nan", "inf", ""):
        assert health.wait_param(bad) is None, bad
    assert HEALTH_WAIT_MAX_S <= health.MAX_WAIT_S < TIMEOUT_S  # a held answer comes before the install gives up
    with trio.fail_after(1):  # timer-ok: owc not running in this process: the route answers at once
        await health.settled_within(health.MAX_WAIT_S)


def test_an_agents_model_row_gets_its_avatar_and_an_admins_image_is_kept(tmp_path) -> None:
    """Issue 31: each agent is its own model "with its own name and avatar". A ``pipes()`` entry carries only an id
    and a name, so the avatar goes on the model row the install makes for the Filter and the Action, from the agents
    owc last listed (the health route's ``agents``). An image an admin set on that row is kept; a second apply
    changes nothing."""
    from owc.sim.agents import TEA_PNG

    class WithAgents(ConfigOpenWebUI):
        def _listed(self) -> list[str]:
            listed = super()._listed()
            return [*listed, "openclaw.matcha", "openclaw.saffron"] if listed else listed

    fake = WithAgents()
    fake.health = {
        **HEALTH,
        "agents": [
            {"id": "main", "name": None, "emoji": None, "avatar_url": None},
            {"id": "matcha", "name": "Matcha", "emoji": "\U0001f375", "avatar_url": TEA_PNG},
            {"id": "saffron", "name": "Saffron", "emoji": None, "avatar_url": None},
        ],
    }
    spec = cfg.load_toml(_toml(tmp_path, FULL))
    lines = _apply(fake, spec)
    matcha = fake.models["openclaw.matcha"]["meta"]
    assert matcha["profile_image_url"] == TEA_PNG and matcha["description"] == "The OpenClaw agent Matcha (matcha)"
    assert "gave openclaw.matcha its agent's avatar" in lines
    saffron = fake.models["openclaw.saffron"]["meta"]
    assert "profile_image_url" not in saffron and "gave openclaw.saffron its agent's avatar" not in lines
    assert "profile_image_url" not in fake.models["openclaw.main"]["meta"]
    before = len(fake.writes())
    assert "nothing changed" in _apply(fake, spec)
    assert fake.writes()[before:] == [("POST", "/api/v1/auths/signin")]  # signed in, nothing written
    # An admin's own image on the row stays; Open WebUI's default image is not an admin's choice.
    fake.models["openclaw.matcha"]["meta"]["profile_image_url"] = "https://example.com/mine.png"
    fake.models["openclaw.saffron"]["meta"]["description"] = "my own words"
    fake.health["agents"][2]["avatar_url"] = "https://example.com/saffron.png"
    fake.models["openclaw.saffron"]["meta"]["profile_image_url"] = "/static/favicon.png"
    lines = _apply(fake, spec)
    assert fake.models["openclaw.matcha"]["meta"]["profile_image_url"] == "https://example.com/mine.png"
    assert fake.models["openclaw.saffron"]["meta"]["profile_image_url"] == "https://example.com/saffron.png"
    assert fake.models["openclaw.saffron"]["meta"]["description"] == "my own words"
    assert "gave openclaw.saffron its agent's avatar" in lines
    assert not [line for line in lines if "openclaw.matcha" in line and not line.startswith(("models:", "smoke:"))]

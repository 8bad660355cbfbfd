"""The README tells the truth about what an operator configures (issue 31): its ``--config`` example is a file
``owc owui install`` accepts, its valve table names every valve of owc's Functions and no other, every environment
variable owc reads is in its table, and every exit code has its row. A README that drifts from the code fails here."""

from __future__ import annotations

import re
from pathlib import Path

from owc.cli import codes
from owc.owui import install_config as cfg

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _section(title: str) -> str:
    start = README.index(f"\n### {title}\n")
    end = README.find("\n### ", start + 1)
    return README[start : end if end != -1 else len(README)]


def test_the_config_example_is_a_file_install_accepts(tmp_path: Path) -> None:
    (example,) = re.findall(r"```toml\n(.*?)```", _section("Configuration as code"), re.S)
    password, token = tmp_path / "password", tmp_path / "token"
    password.write_text("admin-secret\n")
    token.write_text("gateway-token-0123456789\n")
    text = example.replace("/run/secrets/owui-admin-password", str(password)).replace(
        "/run/secrets/openclaw-token", str(token)
    )
    assert text != example
    path = tmp_path / "owc.toml"
    path.write_text(text)
    spec = cfg.load_toml(path, environ={})
    assert spec.connection.url == "http://open-webui:8080" and spec.connection.wait_s == 120
    (pipe,) = [f for f in spec.functions if f.section.table == "pipe"]
    assert pipe.valves["GATEWAY_TOKEN"] == "gateway-token-0123456789"
    assert pipe.valves["AGENT_WHITELIST"] == "matcha, saffron" and pipe.valves["MAX_MODELS"] == 12


def test_the_valve_table_names_every_valve_and_no_other() -> None:
    rows = [line for line in _section("Valves").splitlines() if line.startswith("| ") and "---" not in line][1:]
    named = set()
    for row in rows:
        named |= set(re.findall(r"`([A-Za-z_]+)`", row.split("|")[2]))
    valves = {name for section in cfg.SECTIONS for name in cfg.section_valves(section)}
    user_valves = {"level"}  # the thinking Filter's UserValves: each person's own, not in the install's schema
    assert valves, "the Functions' valves were read"
    assert named == valves | user_valves
    secret = {name for section in cfg.SECTIONS for name, v in cfg.section_valves(section).items() if v.secret}
    assert secret == {"GATEWAY_TOKEN"} and "`GATEWAY_TOKEN` (secret)" in _section("Valves")


def test_every_environment_variable_owc_reads_is_in_the_table() -> None:
    table = _section("Environment variables")
    read = set()
    for path in (ROOT / "owc").rglob("*.py"):
        read |= set(re.findall(r"\"(OWC_[A-Z_]+)\"", path.read_text()))
    read = {name for name in read if not name.endswith("_")} | {"OWC_VALVE_*", "OWC_VALVE_FILE_*", "OWC_FUNCTION_*"}
    assert "OWC_GATEWAY_URL" in read and "OWC_OWUI_CONNECT_WAIT" in read
    missing = {name for name in read if f"`{name}`" not in table}
    assert not missing, missing


def test_every_exit_code_has_its_row() -> None:
    table = _section("Exit codes")
    values = {value for name, value in vars(codes).items() if name.startswith("EXIT_") and isinstance(value, int)}
    assert {0, 1, 2, 3, 4, 5, 6, 7} <= values
    for value in values:
        assert f"\n| {value} | " in table, value

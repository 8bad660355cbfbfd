"""The sans-I/O core imports no Trio and no I/O shell: dependencies point inward."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = [
    "owc.ids",
    "owc.protocol",
    "owc.protocol.websocket",
    "owc.protocol.machine",
    "owc.protocol.active",
    "owc.protocol.questions",
    "owc.protocol.media",
    "owc.protocol.tasks",
    "owc.render",
    "owc.render.seam",
    "owc.render.status",
    "owc.render.ask_card",
    "owc.render.files",
    "owc.render.status_view",
    "owc.render.subagents",
    "owc.rules.claim",
    "owc.rules.state_graph",
    "owc.rules.intent",
    "owc.rules.cut",
    "owc.rules.cut_graph",
    "owc.rules.lifecycle",
    "owc.rules.link",
    "owc.rules.owner",
    "owc.rules.reconcile",
    "owc.rules.questions",
    "owc.rules.media",
    "owc.rules.media_policy",
    "owc.rules.variants",
]
FORBIDDEN = [
    "trio",
    "trio_websocket",
    "anyio",
    "sqlalchemy",
    "owc.gateway",
    "owc.sim",
    "owc.store",
    "owc.runs",
    "owc.emit",
    "owc.owui",
]
#: Pure modules that live beside their shell (their package's __init__ imports the shell, so check the source).
PURE_FILES = [
    "owc/store/tree.py",
    "owc/gateway/backoff.py",
    "owc/sim/model.py",
    "owc/sim/script.py",
    "owc/sim/devices.py",
    "owc/gateway/url.py",
    "owc/owui/question_dialog.py",
]


def test_core_imports_no_trio_or_shells() -> None:
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in CORE)
        + f"bad = [m for m in {FORBIDDEN!r} if m in sys.modules]\n"
        + "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("path", PURE_FILES)
def test_pure_modules_import_no_io(path: str) -> None:
    tree = ast.parse((ROOT / path).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    bad = {
        m
        for m in imported
        for f in ("trio", "trio_websocket", "anyio", "sqlalchemy")
        if m == f or m.startswith(f + ".")
    }
    assert bad == set()

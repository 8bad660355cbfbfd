"""The sans-I/O core imports no Trio and no I/O shell: dependencies point inward."""

from __future__ import annotations

import subprocess
import sys

CORE = ["owc.ids", "owc.protocol"]
FORBIDDEN = ["trio", "trio_websocket", "anyio", "sqlalchemy", "owc.gateway", "owc.sim", "owc.store", "owc.runs"]


def test_core_imports_no_trio_or_shells() -> None:
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in CORE)
        + f"bad = [m for m in {FORBIDDEN!r} if m in sys.modules]\n"
        + "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""

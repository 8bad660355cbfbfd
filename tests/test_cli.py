from __future__ import annotations

import subprocess
import sys

from owc import __version__
from owc.cli import main


def test_help_exits_zero(capsys) -> None:
    assert main([]) == 0
    assert "owc" in capsys.readouterr().out


def test_console_script_runs() -> None:
    out = subprocess.run([sys.executable, "-m", "owc", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"owc {__version__}"

"""The no-timer rule, enforced (seed 000 section 5): nothing in owc waits on a clock to decide a run's fate.

Only the transport may keep time (RPC response bounds, tick liveness, reconnect backoff: ``owc/gateway``), and the
simulator models a Gateway that does (``owc/sim``). Anywhere else a sleep, a ``move_on_*`` / ``fail_*`` scope, a
deadline or a read of the clock fails this test unless its line says why it is not a timer that decides
anything: ``# timer-ok: <reason>``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = ("owc/gateway/", "owc/sim/")
TIMER_NAMES = frozenset(
    {
        "sleep", "sleep_forever", "sleep_until", "move_on_after", "move_on_at", "fail_after", "fail_at",
        "current_time", "current_effective_deadline", "deadline", "relative_deadline", "monotonic",
    }
)  # fmt: skip
MARK = "# timer-ok:"


def timers_in(source: str) -> list[tuple[int, str]]:
    """Lines of ``source`` that use a clock, with what they use; a line marked ``# timer-ok: why`` is allowed."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        name = None
        if isinstance(node, ast.Attribute) and node.attr in TIMER_NAMES:
            name = node.attr
        elif isinstance(node, ast.Name) and node.id in TIMER_NAMES:
            name = node.id
        elif isinstance(node, ast.ImportFrom) and any(a.name in TIMER_NAMES for a in node.names):
            name = next(a.name for a in node.names if a.name in TIMER_NAMES)
        elif isinstance(node, ast.keyword) and node.arg in ("deadline", "relative_deadline"):
            name = node.arg
        if name is None:
            continue
        line = lines[node.lineno - 1]
        reason = line.split(MARK, 1)[1].strip() if MARK in line else ""
        if not reason:
            found.append((node.lineno, name))
    return sorted(set(found))


def _product_files() -> list[Path]:
    return sorted(p for p in (ROOT / "owc").rglob("*.py") if not str(p.relative_to(ROOT)).startswith(ALLOWED))


def test_no_timer_outside_the_transport() -> None:
    offenders = []
    for path in _product_files():
        for line, name in timers_in(path.read_text()):
            offenders.append(f"{path.relative_to(ROOT)}:{line}: {name}")
    assert offenders == [], "timers outside owc/gateway and owc/sim (mark a non-deciding one '# timer-ok: why')"


def test_the_gate_covers_owc() -> None:
    files = {str(p.relative_to(ROOT)) for p in _product_files()}
    assert {"owc/runs/writer.py", "owc/runs/table.py", "owc/rules/lifecycle.py", "owc/runtime.py"} <= files


@pytest.mark.parametrize(
    "source",
    [
        "import trio\nasync def f():\n    await trio.sleep(1)\n",
        "import trio\nasync def f():\n    with trio.move_on_after(5):\n        pass\n",
        "from trio import fail_after\n",
        "import trio\ndef f():\n    return trio.current_time()\n",
        "import trio\ndef f(scope):\n    scope.deadline = 3\n",
        "import time\ndef f():\n    time.sleep(0.1)\n",
        "import asyncio\nasync def f():\n    await asyncio.sleep(1)\n",
        "import trio\ndef f():\n    return trio.CancelScope(deadline=5)\n",
        "import trio\nasync def f():\n    await trio.sleep(1)  # timer-ok:\n",  # a mark without a reason is no mark
    ],
)
def test_the_gate_catches_timers(source: str) -> None:
    assert timers_in(source)


def test_a_marked_line_with_a_reason_passes() -> None:
    assert (
        timers_in("import trio\nasync def f():\n    await trio.sleep_forever()  # timer-ok: serves until Ctrl-C\n")
        == []
    )

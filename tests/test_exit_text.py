"""ExitTextFixtureTest (issue 14): the owner rule resumes a run whose CLI child was killed from outside, which it
knows only by the exit error's text. That text is the real Gateway's; ``tests/realgw/exit_text.json`` holds the
exact source line that builds it (extracted from the installed OpenClaw dist, version recorded) and the row texts
measured when the child was killed. The unit test renders the line for 143, 137, 1 and SIGKILL as Node would and
checks the classifier; when the real Gateway's install is cached, the line is extracted again and must be the
same, so an OpenClaw upgrade that rewords it fails the suite instead of silently dropping resumes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from owc.rules.owner import Owner, Row, Seen, outside_kill, owner

from realgw.gateway import cache_dir

FIXTURE = json.loads((Path(__file__).parent / "realgw" / "exit_text.json").read_text())
_TEMPLATE = re.compile(r"new Error\(signal \? `(?P<signal>[^`]*)` : `(?P<code>[^`]*)`\)")


def render(code: int | None, signal: str | None) -> str:
    """What the source line makes of a child's exit (a JavaScript template literal, rendered as Node would)."""
    m = _TEMPLATE.search(FIXTURE["source"])
    assert m is not None, f"the fixture's line is not the shape this test renders: {FIXTURE['source']}"
    template = m["signal"] if signal else m["code"]
    return template.replace("${signal}", str(signal)).replace("${code}", str(code))


@pytest.mark.parametrize(
    ("code", "signal", "resumed"),
    [(143, None, True), (137, None, True), (None, "SIGKILL", True), (None, "SIGTERM", True), (1, None, False)],
)
def test_the_real_exit_texts_classify(code: int | None, signal: str | None, resumed: bool) -> None:
    text = render(code, signal)
    assert outside_kill(text) is resumed
    decision = owner("R", Row("failed", last_run_id="R", last_run_error=text), Seen(terminal=True))
    assert decision is (Owner.RESUME if resumed else Owner.ERROR)


def test_the_measured_rows_are_what_the_line_renders() -> None:
    rows = FIXTURE["rows_measured"]
    assert rows["child SIGTERM (a container stop)"] == render(143, None)
    assert rows["child SIGKILL"] == render(None, "SIGKILL")
    assert all(outside_kill(text) for text in rows.values())


def test_the_installed_gateway_still_builds_the_same_text() -> None:
    package = cache_dir() / "oc" / "node_modules" / FIXTURE["package"]
    if not (package / "package.json").exists():
        pytest.skip(f"the real Gateway is not installed in {cache_dir()} (the realgateway tier installs it)")
    version = json.loads((package / "package.json").read_text())["version"]
    needle = b"Claude Code process exited with"
    lines = sorted(
        {
            line.strip().decode("utf-8", "replace")
            for path in (package / "dist").rglob("*.mjs")
            if needle in (data := path.read_bytes())  # most files lack it: no decode, no split
            for line in data.splitlines()
            if needle in line
        }
    )
    assert lines == [FIXTURE["source"]], (
        f"OpenClaw {version} builds the CLI exit error differently from {FIXTURE['version']}: the owner rule's"
        f" outside-kill text (owc/rules/owner.py OUTSIDE_KILL) must be checked against it: {lines}"
    )

"""Long, mostly idle tests run in a pytest process of their own, beside the rest of the session.

One real-Gateway case waits out the Gateway's stop drain, a constant of OpenClaw 2026.9.6 (315 s without a
service manager): six minutes in which the test process only reads a slow stream. Marked ``background``, such a
test is started in a child ``pytest`` when collection is done and the rest of the session runs meanwhile; at its
own place in the order, the test waits for the child and passes, fails (with the child's report) or skips as the
child's test did. CI's wall time then holds the drain once, in parallel, instead of adding it.

A test run alone (the only item collected), or inside the child, runs in-process as usual. A module may define
``background_finished(nodeid, out_dir)``: called in the parent after its child passed, with the folder the child
was given as ``OWC_BACKGROUND_OUT`` (how a test hands back what it measured, e.g. a form another test compares).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

#: Set in the child's environment: its ``background`` tests run in-process.
CHILD_ENV = "OWC_BACKGROUND_CHILD"
#: The folder a child test may write its results to (``background_finished`` reads them).
OUT_ENV = "OWC_BACKGROUND_OUT"

_KEY = pytest.StashKey["_Child"]()


class _Child:
    """One background test's child process, its output file and its results folder."""

    def __init__(self, item: pytest.Item) -> None:
        self.out = Path(tempfile.mkdtemp(prefix="owc-background-"))
        self.log_path = self.out / "pytest.log"
        env = dict(os.environ, **{CHILD_ENV: "1", OUT_ENV: str(self.out)})
        root = Path(str(item.config.rootpath))
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pytest", item.nodeid, "-p", "no:cacheprovider", "-q", "-rA", "-s"],
                cwd=root,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def result(self) -> tuple[int, str]:
        code = self.proc.wait()
        return code, self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "background: a long, mostly idle test run in a pytest process of its own beside the session"
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    if os.environ.get(CHILD_ENV) or len(session.items) < 2 or session.config.option.collectonly:
        return
    for item in session.items:
        if item.get_closest_marker("background") is not None:
            item.stash[_KEY] = _Child(item)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    child = pyfuncitem.stash.get(_KEY, None)
    if child is None:
        return None
    code, text = child.result()
    summary = text.strip().splitlines()[-1] if text.strip() else ""
    if code == 0 and re.search(r"\b1 passed\b", summary):
        finished = getattr(pyfuncitem.module, "background_finished", None)
        if finished is not None:
            finished(pyfuncitem.nodeid, child.out)
        return True
    if code == 0 and re.search(r"\b1 skipped\b", summary):
        reason = re.findall(r"^SKIPPED \[\d+\] [^:]+:\d+: (.*)$", text, re.M)
        pytest.skip(f"in its background process: {reason[-1] if reason else summary}")
    tail = "\n".join(text.splitlines()[-200:])
    pytest.fail(f"the background process of {pyfuncitem.nodeid} exited {code}:\n{tail}", pytrace=False)


def pytest_sessionfinish(session: pytest.Session) -> None:
    for item in session.items:
        child = item.stash.get(_KEY, None)
        if child is not None:
            child.kill()  # a session stopped early (-x, Ctrl-C) leaves no child behind

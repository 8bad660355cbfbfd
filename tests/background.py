"""Long, mostly idle tests run in a pytest process of their own, beside the rest of the session.

One real-Gateway case waits out the Gateway's stop drain, a constant of OpenClaw 2026.9.6 (315 s without a
service manager): six minutes in which the test process only reads a slow stream. Marked ``background``, such a
test is started in a child ``pytest`` when collection is done and the rest of the session runs meanwhile; at its
own place in the order, the test waits for the child and passes, fails (with the child's report) or skips as the
child's test did. CI's wall time then holds the drain once, in parallel, instead of adding it.

Under pytest-xdist (the README's ``-n``), every worker collects every item but runs only its share: a worker starts
a background test's child when it runs the first item of that test's ``xdist_group`` (``tests/conftest.py`` puts a
tier in one group, so that worker is the one that will run the test), and the conftest orders a background test's
module last in its group, so the worker runs the group's other tests while the child waits out its drain.

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
_STARTED = pytest.StashKey[set[str]]()


class _Child:
    """One background test's child process, its output file and its results folder."""

    def __init__(self, item: pytest.Item) -> None:
        self.out = Path(tempfile.mkdtemp(prefix="owc-background-"))
        self.log_path = self.out / "pytest.log"
        env = dict(os.environ, **{CHILD_ENV: "1", OUT_ENV: str(self.out)})
        root = Path(str(item.config.rootpath))
        nodeid = item.nodeid
        group = _group(item)
        if group is not None:
            nodeid = nodeid.removesuffix(f"@{group}")  # xdist's loadgroup names the group in the node id
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pytest", nodeid, "-p", "no:cacheprovider", "-q", "-rA", "-s"],
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


def _group(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("xdist_group")
    return str(marker.args[0]) if marker is not None and marker.args else None


def _xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_collection_finish(session: pytest.Session) -> None:
    if os.environ.get(CHILD_ENV) or len(session.items) < 2 or session.config.option.collectonly:
        return
    if _xdist_worker(session.config):
        return  # started by the worker that runs the test's group (``pytest_runtest_protocol``)
    for item in session.items:
        if item.get_closest_marker("background") is not None:
            item.stash[_KEY] = _Child(item)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """An xdist worker's first item of a group starts the children of that group's background tests: the whole
    group runs in this worker (``--dist loadgroup``), so no other worker starts them."""
    config = item.config
    if os.environ.get(CHILD_ENV) or not _xdist_worker(config):
        return
    group = _group(item)
    started = config.stash.setdefault(_STARTED, set())
    if group is None or group in started:
        return
    started.add(group)
    for other in item.session.items:
        if other.get_closest_marker("background") is not None and _group(other) == group:
            other.stash[_KEY] = _Child(other)


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

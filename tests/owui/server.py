"""Tier W: the REAL Open WebUI 0.12.4 server (slim, no torch) on loopback, for tests that drive it end to end.

Three parts, each usable alone:

* :func:`ensure_server_venv` builds (once, cached, ``flock``-protected, like ``venv.py``) a venv holding the whole
  slim server: ``pip install --no-deps open-webui==0.12.4``, then the wheel's own ``requirements-slim.txt`` (the pin
  list upstream's slim Docker image uses: no torch / chromadb / onnxruntime), then this checkout (``pip install -e``,
  so a Function can ``import owc``) and ``python-socketio[client]``, both constrained to what the slim set
  installed so they can never move one of Open WebUI's own pins. ``venv.py``'s venv cannot serve: it holds only
  the DB layer, so this is a second, bigger venv (~780 MB) beside it.
* :class:`OwuiServer` / :func:`running_server` boot ``open-webui serve`` from that venv on a free loopback port,
  with every writable directory in the test's ``tmp_path``, wait for ``GET /health``, keep the output in a log file
  per boot (for failure reports), and stop it with SIGTERM (measured) then SIGKILL. ``restart()`` boots a new
  process on the same DATA_DIR / database and port.
* :class:`AdminClient` (stdlib ``urllib``: nothing to install in the test env) signs in and calls the handful of
  REST routes the tier needs; :class:`EventRecorder` (python-socketio's threaded client, installed into the test
  env on first use) records every ``'events'`` payload the server sends to the admin's rooms.

The owc package a server runs is always the one of THIS checkout: the venv is shared by every checkout on the
machine (CI clones into a fresh folder each run), so the editable install inside it may point at another one;
:func:`server_env` therefore puts this checkout's root first on ``PYTHONPATH``, which wins over the editable
finder. Every subprocess has a bounded timeout; failures raise :class:`ServerUnavailable` (build, boot) or
:class:`HttpError` (a REST call that did not answer 2xx).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tierlock
from owui.venv import (
    CHANGELOG_STUB,
    DROPPED_ENV_PREFIXES,
    OWUI_REQUIREMENT,
    OWUI_VERSION,
    PIP_OPTS,
    OwuiUnavailable,
    _base_python,
    _clean_env,
    _discard,
    _dist_version,
    _sweep,
    _venv_python,
    site_packages,
)

#: The checkout this file belongs to (``tests/owui/server.py`` -> the repo root), installed into the venv.
REPO_ROOT = Path(__file__).resolve().parents[2]
#: Installed after the slim set: the socket.io client side (``websocket-client``; python-socketio itself is a
#: slim pin) for code that runs inside the venv, e.g. a scenario driver living next to the server.
SERVER_EXTRAS = ["python-socketio[client]"]
MARKER = ".owc-owui-server-installed.json"

VENV_TIMEOUT_S = 180
PIP_TIMEOUT_S = 1200  # the slim set is ~176 distributions (56-100 s idle; minutes on a loaded 2-core box)
CHECK_TIMEOUT_S = 180
LOCK_TIMEOUT_S = VENV_TIMEOUT_S + 4 * PIP_TIMEOUT_S + CHECK_TIMEOUT_S + 60
LOCK_POLL_S = 1.0

BOOT_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
KILL_TIMEOUT_S = 10.0
HTTP_TIMEOUT_S = 30.0

#: Fixed test credentials: Open WebUI creates this admin at startup (``WEBUI_ADMIN_EMAIL/PASSWORD``,
#: ``main.py:400-404``) when the database has no user yet, so no signup step (and no signup race) is needed.
ADMIN_EMAIL = "admin@example.com"
ADMIN_PASSWORD = "owc-owui-admin-pass-0123"
ADMIN_NAME = "Admin"
#: Open WebUI refuses to start without a secret while auth is on (``env.py:788-796``); also signs the JWTs.
WEBUI_SECRET_KEY = "owc-owui-server-test-secret"


class ServerUnavailable(OwuiUnavailable):
    """The server venv could not be built, or the server did not boot / answer (the message holds a log tail).

    A subclass of ``venv.OwuiUnavailable`` so a fixture that already maps that to skip-or-fail covers this too.
    """


class HttpError(RuntimeError):
    """A REST call answered with a non-2xx status (or not at all: ``status`` is ``None``)."""

    def __init__(self, method: str, path: str, status: int | None, body: str) -> None:
        super().__init__(f"{method} {path} -> {status}: {body[:2000]}")
        self.method = method
        self.path = path
        self.status = status
        self.body = body


# ----------------------------------------------------------------------------------------------------------------
# The venv


def server_venv_dir() -> Path:
    return Path(
        os.environ.get("OWC_OWUI_SERVER_CACHE")
        or Path.home() / ".cache" / "owc" / f"owui-{OWUI_VERSION}" / "server-venv"
    )


def _owc_dependencies() -> list[str]:
    """owc's own ``[project].dependencies``: part of the spec, so a new dependency of owc rebuilds the venv."""
    with (REPO_ROOT / "pyproject.toml").open("rb") as fh:
        return list(tomllib.load(fh)["project"]["dependencies"])


def _spec() -> dict[str, Any]:
    """What a cached venv must have been built from to be reused. The checkout's path is deliberately not in it
    (see the module docstring: ``PYTHONPATH`` selects the checkout at serve time)."""
    return {
        "open_webui": OWUI_REQUIREMENT,
        "requirements": "requirements-slim.txt (from the wheel)",
        "owc_dependencies": _owc_dependencies(),
        "extras": SERVER_EXTRAS,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "changelog_stub": CHANGELOG_STUB,
    }


def _marker_ok(venv: Path) -> bool:
    """A complete build: the marker holds this spec, and the venv's python, ``open-webui`` script and open-webui
    0.12.4's METADATA are still there (file checks only: importing open_webui takes seconds)."""
    try:
        marker = json.loads((venv / MARKER).read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(marker, dict) or marker.get("spec") != _spec():
        return False
    if not _venv_python(venv).exists() or not (venv / "bin" / "open-webui").exists():
        return False
    return _dist_version(venv) == OWUI_VERSION


def _run(cmd: list[str], timeout: float, what: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` bounded, in a clean environment; a non-zero exit raises unless ``check`` is off."""
    try:
        out = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=_clean_env(),
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise ServerUnavailable(f"{what} timed out after {timeout} s: {cmd}") from exc
    except OSError as exc:
        raise ServerUnavailable(f"{what} could not start: {exc}") from exc
    if check and out.returncode != 0:
        raise ServerUnavailable(f"{what} failed (exit {out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
    return out


def _frozen_constraints(python: Path, dest: Path) -> Path:
    """Everything the venv holds now, as ``name==version`` constraints for the installs that follow (owc, the
    socket.io client): they may add distributions but never move one of Open WebUI's slim pins."""
    out = _run(
        [str(python), "-m", "pip", "freeze", "--exclude-editable", "--disable-pip-version-check"],
        CHECK_TIMEOUT_S,
        "pip freeze",
    )
    pins = [line.strip() for line in out.stdout.splitlines() if "==" in line and not line.startswith(("-", "#"))]
    dest.write_text("\n".join(pins) + "\n")
    return dest


def _pip_check(python: Path) -> None:
    """``pip check``, except for what the slim install leaves out on purpose: open-webui's METADATA lists its full
    dependency set (torch's consumers, chromadb, document loaders, ...), ~30 of which requirements-slim.txt omits.
    Any other complaint (a version conflict, something owc or the socket.io client needs) fails the build."""
    out = _run(
        [str(python), "-m", "pip", "check", "--disable-pip-version-check"], CHECK_TIMEOUT_S, "pip check", check=False
    )
    problems = [
        line
        for line in out.stdout.splitlines()
        if line.strip()
        and not line.startswith("No broken requirements")
        and not (line.startswith(f"open-webui {OWUI_VERSION} requires ") and line.endswith("which is not installed."))
    ]
    if problems or (out.returncode != 0 and not out.stdout.strip()):
        raise ServerUnavailable("pip check found conflicts:\n" + "\n".join(problems) + out.stderr[-2000:])


def _build(venv: Path) -> dict[str, float]:
    """Create the venv at ``venv`` (absent) and install everything; returns the step timings."""
    timings: dict[str, float] = {}
    python = _venv_python(venv)
    try:
        base = _base_python()
    except OwuiUnavailable as exc:
        raise ServerUnavailable(str(exc)) from exc

    def step(name: str, cmd: list[str], timeout: float, what: str) -> None:
        t = time.monotonic()
        _run(cmd, timeout, what)
        timings[name] = round(time.monotonic() - t, 2)

    step("venv_s", [base, "-m", "venv", str(venv)], VENV_TIMEOUT_S, "creating the server venv")
    pip = [str(python), "-m", "pip", "install", *PIP_OPTS]
    step(
        "pip_open_webui_s",
        [*pip, "--no-deps", OWUI_REQUIREMENT],
        PIP_TIMEOUT_S,
        f"pip install --no-deps {OWUI_REQUIREMENT}",
    )
    slim = site_packages(python) / "requirements-slim.txt"
    if not slim.exists():
        raise ServerUnavailable(f"the {OWUI_REQUIREMENT} wheel installed no {slim}")
    step("pip_slim_s", [*pip, "-r", str(slim)], PIP_TIMEOUT_S, "pip install -r requirements-slim.txt")
    constraints = _frozen_constraints(python, venv / "owc-server-constraints.txt")
    step(
        "pip_owc_s",
        [*pip, "-c", str(constraints), "-e", str(REPO_ROOT), *SERVER_EXTRAS],
        PIP_TIMEOUT_S,
        f"pip install -e {REPO_ROOT} {' '.join(SERVER_EXTRAS)}",
    )
    # venv.py's trick: env.py parses its 1.5 MB CHANGELOG.md on every import (~3.5 s of each boot) unless
    # BASE_DIR/CHANGELOG.md exists; the stub only empties the UI's "What's New" changelog list.
    (site_packages(python).parent / "CHANGELOG.md").write_text(CHANGELOG_STUB)
    t = time.monotonic()
    _pip_check(python)
    timings["pip_check_s"] = round(time.monotonic() - t, 2)
    check = "import open_webui, uvicorn, socketio, websocket, owc, trio; print(open_webui.__file__)"
    step("import_check_s", [str(python), "-c", check], CHECK_TIMEOUT_S, "import check")
    return timings


def ensure_server_venv() -> Path:
    """The server venv's directory, building it first unless a completed build for this spec is already there.

    As in ``venv.py``: the unlocked first check is safe because a complete venv is never modified in place (the
    marker is written last and atomically; a rebuild first renames the old venv away); the check and the build
    happen under an exclusive ``flock`` beside the venv, so concurrent test sessions build once.
    """
    venv = server_venv_dir().absolute()
    if _marker_ok(venv):
        return venv
    venv.parent.mkdir(parents=True, exist_ok=True)
    with tierlock.held(
        venv.parent / f"{venv.name}.lock", timeout=LOCK_TIMEOUT_S, poll=LOCK_POLL_S, fail=ServerUnavailable
    ):
        _sweep(venv)
        if _marker_ok(venv):  # built by whoever held the lock
            return venv
        t = time.monotonic()
        _discard(venv)
        timings = _build(venv)
        timings["total_s"] = round(time.monotonic() - t, 2)
        if _dist_version(venv) != OWUI_VERSION:
            raise ServerUnavailable(f"the build left no open-webui {OWUI_VERSION} METADATA in {venv}")
        tmp = venv / f"{MARKER}.tmp"
        tmp.write_text(
            json.dumps(
                {
                    "spec": _spec(),
                    "timings": timings,
                    "built_from": str(REPO_ROOT),
                    "installed_at": int(time.time()),
                },
                indent=2,
            )
        )
        tmp.replace(venv / MARKER)  # last, atomically: only now does the venv count as complete
    return venv


def server_install_info() -> dict[str, Any]:
    """The marker's content (spec, timings of the cold build), or ``{}`` when not built."""
    try:
        return json.loads((server_venv_dir() / MARKER).read_text())
    except (OSError, ValueError):
        return {}


# ----------------------------------------------------------------------------------------------------------------
# The server process

#: Inherited variables Open WebUI reads for its DB / Redis / auth / providers: dropped so a developer's shell
#: cannot change what the tier talks to (as ``venv.owui_env`` does).
_DROPPED_PREFIXES = (*DROPPED_ENV_PREFIXES, "UVICORN_", "PYTHON")
_DROPPED = ("DATA_DIR", "STATIC_DIR", "FRONTEND_BUILD_DIR", "CUSTOM_NAME", "VECTOR_DB", "CORS_ALLOW_ORIGIN", "PORT")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the kernel's pick; a race with another binder is possible but
    would show as a boot failure with "address already in use" in the log, not as a wrong server)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_env(
    workdir: Path,
    port: int,
    *,
    database_url: str | None = None,
    workers: int = 1,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """The environment ``open-webui serve`` runs with (reference: pipe-runtime-0.12.4.md section 11)."""
    env = {k: v for k, v in _clean_env().items() if not k.startswith(_DROPPED_PREFIXES) and k not in _DROPPED}
    for sub in ("data", "static", "home", "tmp"):
        (workdir / sub).mkdir(parents=True, exist_ok=True)
    env.update(
        USE_SLIM_DOCKER="true",  # env.py:45: no torch / chromadb / pydub / vector client imports
        WEBUI_SECRET_KEY=WEBUI_SECRET_KEY,
        DATA_DIR=str(workdir / "data"),  # webui.db (unless DATABASE_URL), uploads, cache
        STATIC_DIR=str(workdir / "static"),  # config.py deletes and recopies files here
        HOME=str(workdir / "home"),
        TMPDIR=str(workdir / "tmp"),
        OFFLINE_MODE="true",  # no version check, no frontmatter pip installs, HF offline
        ENABLE_OLLAMA_API="false",  # no model-list calls to localhost:11434
        ENABLE_OPENAI_API="false",  # ... nor to api.openai.com
        ENABLE_VERSION_UPDATE_CHECK="false",
        WEBUI_ADMIN_EMAIL=ADMIN_EMAIL,  # the admin exists from the first boot on (main.py:400-404)
        WEBUI_ADMIN_PASSWORD=ADMIN_PASSWORD,
        WEBUI_ADMIN_NAME=ADMIN_NAME,
        CORS_ALLOW_ORIGIN=f"http://127.0.0.1:{port}",  # the page's own origin ('*', the default, logs a warning)
        UVICORN_WORKERS=str(workers),
        ANONYMIZED_TELEMETRY="false",
        DO_NOT_TRACK="true",
        SCARF_NO_ANALYTICS="true",
        PYTHONUNBUFFERED="1",  # the log file gets lines as they happen, also when the process is killed
        # THIS checkout's owc, whichever checkout the venv's editable install points at (module docstring).
        PYTHONPATH=str(REPO_ROOT),
    )
    if database_url:
        env["DATABASE_URL"] = database_url
    if extra:
        env.update(extra)
    return env


@dataclass(frozen=True)
class Boot:
    """One start of the server process: how long until ``/health`` answered, and where its output went."""

    pid: int
    seconds: float
    log_path: Path


@dataclass(frozen=True)
class Stop:
    """One stop: the signal sent, the process's return code (``-15`` / ``143``-style codes are uvicorn re-raising
    SIGTERM), seconds from the signal to the exit, and whether it had to be SIGKILLed after the bound."""

    signal: str
    returncode: int | None
    seconds: float
    killed: bool


class OwuiServer:
    """The real ``open-webui serve`` on ``127.0.0.1:<port>``, one process at a time on one DATA_DIR / database.

    Everything it writes lives under ``workdir`` (``data/`` holds ``webui.db`` unless ``database_url``;
    ``logs/serve-N.log`` holds boot N's stdout + stderr, kept for failure reports). Not thread-safe: one test
    drives it.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        venv: Path | None = None,
        database_url: str | None = None,
        workers: int = 1,
        env_extra: dict[str, str] | None = None,
        port: int | None = None,
        boot_timeout_s: float = BOOT_TIMEOUT_S,
    ) -> None:
        self.venv = venv or ensure_server_venv()
        self.workdir = workdir
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.database_url = database_url
        self.boot_timeout_s = boot_timeout_s
        self.env = server_env(workdir, self.port, database_url=database_url, workers=workers, extra=env_extra)
        self.logs_dir = workdir / "logs"
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_path = self.logs_dir / "serve-1.log"
        self.boots: list[Boot] = []
        self.stops: list[Stop] = []

    # -- state

    @property
    def log_path(self) -> Path:
        """The log file of the current boot (or the last one; of the one in progress during :meth:`start`)."""
        return self._log_path

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, chars: int = 6000, path: Path | None = None) -> str:
        """The last ``chars`` characters of a boot's log (default: the current one), for failure messages."""
        try:
            return (path or self._log_path).read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    # -- start / stop

    def start(self) -> Boot:
        """Start a process and wait (bounded) until ``GET /health`` answers 200; raise :class:`ServerUnavailable`
        with the log's tail if it exits or does not answer in time (it is then killed)."""
        if self.running():
            raise RuntimeError(f"the server is already running (pid {self.pid})")
        n = len(self.boots) + 1
        log_path = self._log_path = self.logs_dir / f"serve-{n}.log"
        cmd = [str(self.venv / "bin" / "open-webui"), "serve", "--host", "127.0.0.1", "--port", str(self.port)]
        t = time.monotonic()
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen(
                cmd,
                cwd=self.workdir,  # ``serve`` would write .webui_secret_key here without WEBUI_SECRET_KEY
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: a SIGKILL also reaches uvicorn's workers
            )
        try:
            self._wait_healthy(log_path, t)
        except BaseException:
            self._kill()
            raise
        boot = Boot(self.proc.pid, round(time.monotonic() - t, 2), log_path)
        self.boots.append(boot)
        return boot

    def _wait_healthy(self, log_path: Path, started: float) -> None:
        assert self.proc is not None
        deadline = started + self.boot_timeout_s
        while True:
            if self.proc.poll() is not None:
                raise ServerUnavailable(
                    f"open-webui serve exited ({self.proc.returncode}) before /health answered; log {log_path}:\n"
                    + self.log_tail(path=log_path)
                )
            try:
                with urllib.request.urlopen(self.base_url + "/health", timeout=5) as resp:
                    if resp.status == 200:
                        return
            except (OSError, urllib.error.HTTPError):
                pass  # not listening yet (uvicorn binds after the lifespan startup: migrations, config)
            if time.monotonic() > deadline:
                raise ServerUnavailable(
                    f"open-webui serve did not answer /health within {self.boot_timeout_s} s; log {log_path}:\n"
                    + self.log_tail(path=log_path)
                )
            time.sleep(0.1)  # timer-ok: harness polls a booting server

    def signal_and_wait(self, sig: signal.Signals = signal.SIGTERM, timeout_s: float = STOP_TIMEOUT_S) -> Stop:
        """Send ``sig`` to the server process, wait up to ``timeout_s`` for it to exit and measure how long that
        took; past the bound, SIGKILL its process group (``killed=True``). Leftover group members (workers) are
        killed either way, so nothing outlives the test."""
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError("the server is not running")
        t = time.monotonic()
        self.proc.send_signal(sig)
        killed = False
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            killed = True
            self._kill()
        seconds = round(time.monotonic() - t, 3)
        self._kill_group()
        stop = Stop(sig.name, self.proc.returncode, seconds, killed)
        self.stops.append(stop)
        return stop

    def terminate(self, timeout_s: float = STOP_TIMEOUT_S) -> Stop:
        """SIGTERM (what a service manager or ``docker stop`` sends), measured; see :meth:`signal_and_wait`."""
        return self.signal_and_wait(signal.SIGTERM, timeout_s)

    def restart(self, timeout_s: float = STOP_TIMEOUT_S) -> Boot:
        """Stop the running process (SIGTERM, measured in :attr:`stops`) if any, then boot a new one on the same
        DATA_DIR, database, port and environment (so a browser tab's URL stays valid)."""
        if self.running():
            self.terminate(timeout_s)
        return self.start()

    def close(self) -> None:
        """Stop the server if it runs (SIGTERM, then SIGKILL after the bound); the logs stay."""
        if self.running():
            self.terminate()
        else:
            self._kill_group()

    def _kill(self) -> None:
        if self.proc is None:
            return
        self._kill_group(signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=KILL_TIMEOUT_S)

    def _kill_group(self, sig: signal.Signals = signal.SIGKILL) -> None:
        """Signal the process group this object started (its id is the server's pid: ``start_new_session``)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def __enter__(self) -> OwuiServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- clients

    def admin(self) -> AdminClient:
        """An :class:`AdminClient` signed in as the test admin."""
        client = AdminClient(self.base_url)
        client.signin()
        return client


@contextlib.contextmanager
def running_server(
    tmp_path: Path,
    *,
    database_url: str | None = None,
    workers: int = 1,
    env_extra: dict[str, str] | None = None,
) -> Iterator[OwuiServer]:
    """Build the venv if needed, boot a server with its files in ``tmp_path/owui-server``, yield it, stop it.

    ``database_url`` (e.g. a ``postgresql://`` URL from the postgres tier) replaces ``DATA_DIR/webui.db``;
    ``workers`` > 1 runs several uvicorn processes (one in-process task registry and socket manager each, so
    Stop and events need ``WEBSOCKET_MANAGER=redis`` then: pass it in ``env_extra``).
    """
    server = OwuiServer(tmp_path / "owui-server", database_url=database_url, workers=workers, env_extra=env_extra)
    try:
        server.start()
        yield server
    finally:
        server.close()


# ----------------------------------------------------------------------------------------------------------------
# REST


class AdminClient:
    """Open WebUI's REST API as the test admin, over stdlib ``urllib`` (the test env needs nothing installed).

    Every call is bounded (``timeout_s``) and raises :class:`HttpError` unless the answer is 2xx; JSON in, JSON
    out.
    """

    def __init__(self, base_url: str, token: str | None = None, *, timeout_s: float = HTTP_TIMEOUT_S) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.user: dict[str, Any] = {}
        self.timeout_s = timeout_s

    @property
    def user_id(self) -> str:
        return str(self.user["id"])

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise HttpError(method, path, exc.code, exc.read().decode(errors="replace")) from None
        except OSError as exc:
            raise HttpError(method, path, None, repr(exc)) from exc
        return json.loads(raw) if raw.strip() else None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, {} if body is None else body)

    # -- auth

    def signin(self, email: str = ADMIN_EMAIL, password: str = ADMIN_PASSWORD) -> dict[str, Any]:
        """``POST /api/v1/auths/signin``; keeps the JWT for the calls that follow. Returns the user (with token)."""
        result = self.post("/api/v1/auths/signin", {"email": email, "password": password})
        self.token = result["token"]
        self.user = result
        return result

    # -- functions (admin only; reference pipe-runtime section 1)

    def create_function(self, id: str, name: str, content: str, *, description: str = "") -> dict[str, Any]:
        """Store a Function (inactive: see :meth:`toggle_function`). ``id`` must be a Python identifier."""
        return self.post(
            "/api/v1/functions/create",
            {"id": id, "name": name, "content": content, "meta": {"description": description}},
        )

    def update_function(self, id: str, name: str, content: str, *, description: str = "") -> dict[str, Any]:
        return self.post(
            f"/api/v1/functions/id/{id}/update",
            {"id": id, "name": name, "content": content, "meta": {"description": description}},
        )

    def get_function(self, id: str) -> dict[str, Any] | None:
        try:
            return self.get(f"/api/v1/functions/id/{id}")
        except HttpError as exc:
            if exc.status in (401, 404):  # 0.12.4 answers 401 "not found" for an unknown id
                return None
            raise

    def toggle_function(self, id: str) -> dict[str, Any]:
        """Flip ``is_active``; returns the function (``is_active`` after the flip)."""
        return self.post(f"/api/v1/functions/id/{id}/toggle")

    def install_function(self, id: str, name: str, content: str, *, description: str = "") -> dict[str, Any]:
        """Create (or update) a Function, make sure it is active, and list the models once, which a completion
        needs before it can find a new Pipe's model (else 400 "Model not found"). Returns the function."""
        existing = self.get_function(id)
        if existing is None:
            function = self.create_function(id, name, content, description=description)
        else:
            function = self.update_function(id, name, content, description=description)
        if not function.get("is_active"):
            function = self.toggle_function(id)
        if not function.get("is_active"):
            raise HttpError("POST", f"/api/v1/functions/id/{id}/toggle", None, f"still inactive: {function}")
        self.models()
        return function

    def models(self) -> list[dict[str, Any]]:
        """``GET /api/models`` (also refreshes ``app.state.MODELS``): the model entries."""
        return list(self.get("/api/models")["data"])

    # -- chats

    def new_chat(self, chat: dict[str, Any], *, folder_id: str | None = None) -> dict[str, Any]:
        """``POST /api/v1/chats/new`` with ``chat`` (the JSON the page keeps: title, models, history, messages);
        returns the stored chat (its ``id`` is the new chat's id)."""
        body: dict[str, Any] = {"chat": chat}
        if folder_id:
            body["folder_id"] = folder_id
        return self.post("/api/v1/chats/new", body)

    def get_chat(self, chat_id: str) -> dict[str, Any]:
        """``GET /api/v1/chats/{id}`` (with the live response-stream overlay of a running task applied)."""
        return self.get(f"/api/v1/chats/{chat_id}")

    # -- tasks (Stop)

    def chat_tasks(self, chat_id: str) -> list[str]:
        """``GET /api/tasks/chat/{id}``: the task ids registered for the chat (a running Pipe or writer)."""
        return list(self.get(f"/api/tasks/chat/{chat_id}").get("task_ids") or [])

    def stop_chat(self, chat_id: str) -> Any:
        """``POST /api/tasks/chat/{id}/stop``: what the tab's Stop button (and "Send now") calls."""
        return self.post(f"/api/tasks/chat/{chat_id}/stop")


def user_turn_chat(model: str, text: str, *, title: str = "New Chat", message_id: str | None = None) -> dict[str, Any]:
    """A chat body as the page creates it: one user message (the history's current leaf) addressed to ``model``.

    Enough for ``new_chat``; a scenario then adds the assistant turn (or lets a completion / owc do it).
    """
    mid = message_id or f"u-{os.urandom(6).hex()}"
    now = int(time.time())
    message = {
        "id": mid,
        "parentId": None,
        "childrenIds": [],
        "role": "user",
        "content": text,
        "timestamp": now,
        "models": [model],
    }
    return {
        "title": title,
        "models": [model],
        "history": {"messages": {mid: message}, "currentId": mid},
        "messages": [message],
        "timestamp": now * 1000,
    }


def add_assistant_turn(chat: dict[str, Any], text: str, *, done: bool = True, message_id: str | None = None) -> str:
    """Append an assistant reply under ``chat``'s current leaf (in ``history`` and the flat ``messages`` list),
    make it the leaf, and return its id. ``done=False`` is a reply still being written (the page shows Stop)."""
    history = chat["history"]
    parent = history["messages"][history["currentId"]]
    mid = message_id or f"a-{os.urandom(6).hex()}"
    model = (chat.get("models") or [""])[0]
    message = {
        "id": mid,
        "parentId": parent["id"],
        "childrenIds": [],
        "role": "assistant",
        "content": text,
        "model": model,
        "modelName": model,
        "modelIdx": 0,
        "timestamp": parent["timestamp"],
        "done": done,
    }
    parent["childrenIds"].append(mid)
    history["messages"][mid] = message
    history["currentId"] = mid
    chat["messages"] = [*chat.get("messages", []), message]
    return mid


# ----------------------------------------------------------------------------------------------------------------
# Socket.IO

#: The client must speak the server's Engine.IO / Socket.IO protocol; pinned to the version in the slim set.
SOCKETIO_CLIENT_REQUIREMENT = "python-socketio[client]==5.16.2"


def ensure_socketio_client() -> None:
    """python-socketio's client importable in THIS interpreter (the test env), pip-installing it if missing."""
    try:
        import socketio  # noqa: F401
        import websocket  # noqa: F401  (websocket-client: the sync client's websocket transport)

        return
    except ImportError:
        pass
    _run(
        [sys.executable, "-m", "pip", "install", *PIP_OPTS, SOCKETIO_CLIENT_REQUIREMENT],
        PIP_TIMEOUT_S,
        f"pip install {SOCKETIO_CLIENT_REQUIREMENT} (test env)",
    )
    importlib.invalidate_caches()


@dataclass
class EventRecorder:
    """A Socket.IO client of the server, as the admin: records every ``'events'`` payload it receives.

    Connecting with ``auth={'token': JWT}`` joins the ``user:<id>`` room (every event of the user's chats);
    :meth:`join_chat` joins ``chat:<id>`` too (the *shared* copies the page of an open chat gets, e.g.
    ``chat:messages``). python-socketio's sync client runs its own threads, so this works from any test;
    :meth:`wait_for` blocks (bounded) until a matching payload has arrived.
    """

    base_url: str
    token: str
    events: list[dict[str, Any]] = field(default_factory=list)
    _cond: threading.Condition = field(default_factory=threading.Condition, repr=False)
    _sio: Any = field(default=None, repr=False)

    def connect(self, timeout_s: float = HTTP_TIMEOUT_S) -> EventRecorder:
        ensure_socketio_client()
        import socketio

        sio = socketio.Client(reconnection=False)
        sio.on("events", self._record)
        # websocket only: Open WebUI's server allows just that transport (ENABLE_WEBSOCKET_SUPPORT, the default)
        sio.connect(
            self.base_url,
            socketio_path="/ws/socket.io",
            auth={"token": self.token},
            transports=["websocket"],
            wait_timeout=timeout_s,
        )
        self._sio = sio
        return self

    def _record(self, payload: Any, *_: Any) -> None:
        with self._cond:
            self.events.append(payload)
            self._cond.notify_all()

    def join_chat(self, chat_id: str, timeout_s: float = HTTP_TIMEOUT_S) -> None:
        """Join ``chat:<id>``; the server acks True once the read-access check passed and the room is joined."""
        ack = self._sio.call("events:chat", {"chat_id": chat_id, "data": {"type": "join"}}, timeout=timeout_s)
        if ack is not True:
            raise RuntimeError(f"joining chat:{chat_id} was refused (ack {ack!r})")

    @property
    def sid(self) -> str | None:
        return self._sio.get_sid() if self._sio else None

    def snapshot(self) -> list[dict[str, Any]]:
        with self._cond:
            return list(self.events)

    def types(self, chat_id: str | None = None) -> list[str]:
        """The ``data.type`` of each recorded payload (of one chat if given), in arrival order."""
        return [
            str((e.get("data") or {}).get("type"))
            for e in self.snapshot()
            if isinstance(e, dict) and (chat_id is None or e.get("chat_id") == chat_id)
        ]

    def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout_s: float = HTTP_TIMEOUT_S
    ) -> dict[str, Any]:
        """The first recorded payload (already there, or arriving within ``timeout_s``) ``predicate`` accepts."""
        deadline = time.monotonic() + timeout_s  # timer-ok: harness bound on an awaited server event
        seen = 0
        with self._cond:
            while True:
                for payload in self.events[seen:]:
                    if predicate(payload):
                        return payload
                seen = len(self.events)
                left = deadline - time.monotonic()  # timer-ok: harness bound on an awaited server event
                if left <= 0:
                    raise TimeoutError(f"no matching 'events' payload within {timeout_s} s; got types {self.types()}")
                self._cond.wait(left)

    def close(self) -> None:
        if self._sio is not None:
            with contextlib.suppress(Exception):
                self._sio.disconnect()
            self._sio = None

    def __enter__(self) -> EventRecorder:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

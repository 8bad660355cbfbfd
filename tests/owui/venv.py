"""Build (once) and use a separate venv holding the real ``open-webui==0.12.4``.

Open WebUI's full dependency set is ~3 GB (torch, CUDA wheels, chromadb, ...), so it is installed with
``--no-deps`` plus only what its DB layer imports (the reference's Tier A + Tier B, see
``shared/reference/open-webui/open-webui-0.12.4.md`` section 3) and ``psycopg[binary]`` for PostgreSQL.

* The venv lives outside the checkout: ``$OWC_OWUI_CACHE`` (default ``~/.cache/owc/owui-0.12.4/venv``). A marker
  file written atomically after a successful install (holding the install spec) makes later calls reuse it, as long
  as the venv's python and open-webui's ``dist-info/METADATA`` (version 0.12.4) are still there; any other venv
  (no marker: a crashed build; a marker for another spec; missing files) is moved aside and deleted whole, then
  rebuilt. An exclusive ``flock`` on a lock file beside it is held across check + build, so concurrent test runs
  build once. A venv cannot be built elsewhere and renamed into place (``pyvenv.cfg`` and the scripts' shebangs
  hold its absolute path), hence the marker rather than a rename marks completion.
* Transitive dependencies are constrained to the versions open-webui's own wheel METADATA pins, so whatever gets
  installed matches what a full ``pip install open-webui==0.12.4`` would have.
* ``run_owui`` / ``start_owui`` run ``owui_side.py`` in it (isolated mode: ``-I``, so neither this folder nor our own
  package is importable there) with its own temporary DATA_DIR / STATIC_DIR / HOME, offline and quiet, and
  parse the JSON object it prints on its last stdout line.

Every subprocess has a bounded timeout; failures raise :class:`OwuiUnavailable` (install) or :class:`OwuiError` (a
subcommand that exited non-zero).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import tierlock

OWUI_VERSION = "0.12.4"
OWUI_REQUIREMENT = f"open-webui=={OWUI_VERSION}"
#: Tier A (reference section 3): import ``internal.db`` + ``models.chats``, run the Alembic migrations, use
#: ``Chats`` upserts/reads. ``typer`` and ``python-engineio`` are unpinned in the reference (and in open-webui's
#: METADATA); they are pinned here to the versions that resolved.
TIER_A = [
    "typer==0.29.2",  # open_webui/__init__.py
    "uvicorn==0.54.0",  # open_webui/__init__.py (METADATA: uvicorn[standard]; the extras are not imported)
    "markdown==3.10.2",  # env.py (changelog parsing)
    "beautifulsoup4==4.14.3",  # env.py
    "cryptography==48.0.1",  # env.py
    "aiohttp==3.14.5",  # env.py
    "python-engineio==4.15.1",  # utils/json_codec.py
    "orjson==3.11.9",  # utils/json_codec.py
    "sqlalchemy[asyncio]==2.0.50",  # internal/db.py
    "aiosqlite==0.22.1",  # internal/db.py (sqlite+aiosqlite async engine)
    "python-mimeparse==2.0.0",  # models import chain
    "pydantic==2.13.4",
    "alembic==1.18.4",  # migrations
    "bcrypt==5.0.0",  # models.auths/users (imported by migrations/env.py)
    "pillow==13.0.0",  # models.users
]
#: Tier B: ``Chats.insert_new_chat`` / ``Users`` (lazy ``fastapi`` and ``open_webui.config`` imports).
TIER_B = [
    "fastapi==0.136.3",
    "redis==8.0.1",
    "requests==2.34.2",
    "authlib==1.7.2",
    "httpx==0.28.1",
]
#: PostgreSQL through ``postgresql+psycopg://`` (the version open-webui 0.12.4 pins).
POSTGRES = ["psycopg[binary]==3.3.4"]
PACKAGES = TIER_A + TIER_B + POSTGRES

SUPPORTED_PYTHONS = ((3, 11), (3, 12))  # open-webui 0.12.4: Requires-Python >=3.11,<3.13
VENV_TIMEOUT_S = 180
PIP_TIMEOUT_S = 900
CHECK_TIMEOUT_S = 120
LOCK_TIMEOUT_S = VENV_TIMEOUT_S + 2 * PIP_TIMEOUT_S + CHECK_TIMEOUT_S + 60
LOCK_POLL_S = 1.0
DEFAULT_RUN_TIMEOUT_S = 300.0
MARKER = ".owc-owui-installed.json"
#: open_webui/env.py parses its 1.5 MB CHANGELOG.md (markdown + BeautifulSoup, ~3.5 s of a ~6 s import) on every
#: import, only to serve the UI's changelog. It reads ``BASE_DIR / 'CHANGELOG.md'`` first (BASE_DIR is
#: ``<venv>/lib/pythonX.Y``, two levels above ``open_webui/``) and the packaged copy only if that is missing, so
#: a stub there skips the parse without touching the package. Nothing in the DB layer reads CHANGELOG.
CHANGELOG_STUB = "# Changelog (stub written by owc's test tier to skip env.py's slow parse)\n"
PIP_OPTS = ["--disable-pip-version-check", "--no-input", "--progress-bar", "off"]
HERE = Path(__file__).resolve().parent
SIDE = HERE / "owui_side.py"
#: Inherited variables Open WebUI reads for its DB / Redis / auth / providers: dropped from the environment a tier
#: runs it with, so a developer's shell cannot change what the tier talks to.
DROPPED_ENV_PREFIXES = (
    "DATABASE_", "REDIS_", "WEBSOCKET_", "WEBUI_", "OPENAI_", "OLLAMA_", "ENABLE_", "OTEL_", "S3_", "GCS_", "AZURE_",
)  # fmt: skip
#: A fixed test secret (Open WebUI refuses to start without one while WEBUI_AUTH is on).
WEBUI_SECRET_KEY = "owc-owui-test-secret"


class OwuiUnavailable(RuntimeError):
    """The Open WebUI venv could not be built or used."""


class OwuiError(RuntimeError):
    """An ``owui_side.py`` subcommand failed (non-zero exit or no JSON on its last stdout line)."""

    def __init__(self, message: str, returncode: int | None = None, stderr: str = "", stdout: str = "") -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr
        self.stdout = stdout


def venv_dir() -> Path:
    return Path(os.environ.get("OWC_OWUI_CACHE") or Path.home() / ".cache" / "owc" / f"owui-{OWUI_VERSION}" / "venv")


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _spec() -> dict[str, Any]:
    return {
        "open_webui": OWUI_REQUIREMENT,
        "packages": PACKAGES,
        "constrained_by": "open-webui METADATA pins",
        "changelog_stub": CHANGELOG_STUB,
    }


def _dist_version(venv: Path, dist: str = "open_webui") -> str | None:
    """The ``Version:`` of ``dist`` from its ``dist-info/METADATA`` in the venv (``None``: not installed).

    A file read instead of ``import open_webui`` (~6 s): enough to notice a venv whose package is gone or another
    version, which is all a completeness check needs once the build's own import check has passed.
    """
    for metadata in sorted(venv.glob(f"lib/python3.*/site-packages/{dist}-*.dist-info/METADATA")):
        try:
            with metadata.open(encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if line.startswith("Version:"):
                        return line.split(":", 1)[1].strip()
                    if not line.strip():
                        break  # end of the headers
        except OSError:
            continue
    return None


def _marker_ok(venv: Path) -> bool:
    """A complete build: the marker holds this spec, the venv's python exists, open-webui 0.12.4's METADATA too."""
    try:
        marker = json.loads((venv / MARKER).read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(marker, dict) or marker.get("spec") != _spec() or not _venv_python(venv).exists():
        return False
    return _dist_version(venv) == OWUI_VERSION


def _base_python() -> str:
    """A Python that open-webui 0.12.4 supports: this one if it fits, else python3.12 / python3.11 on PATH."""
    if sys.version_info[:2] in SUPPORTED_PYTHONS:
        return sys.executable
    for major, minor in reversed(SUPPORTED_PYTHONS):
        found = shutil.which(f"python{major}.{minor}")
        if found:
            return found
    raise OwuiUnavailable(f"open-webui {OWUI_VERSION} needs Python 3.11 or 3.12; none found (this is {sys.version})")


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env.update(extra)
    return env


def _run(cmd: list[str], timeout: float, what: str) -> subprocess.CompletedProcess[str]:
    try:
        out = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, env=_clean_env(), stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired as exc:
        raise OwuiUnavailable(f"{what} timed out after {timeout} s: {cmd}") from exc
    except OSError as exc:
        raise OwuiUnavailable(f"{what} could not start: {exc}") from exc
    if out.returncode != 0:
        raise OwuiUnavailable(f"{what} failed (exit {out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
    return out


_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*==\s*([^\s;,]+)\s*$")


def _metadata_constraints(python: Path) -> list[str]:
    """open-webui's own unconditional ``name==version`` pins (extras and markers dropped), as pip constraints."""
    code = "import importlib.metadata as m, json; print(json.dumps(m.requires('open-webui') or []))"
    out = _run([str(python), "-I", "-c", code], CHECK_TIMEOUT_S, "reading open-webui METADATA")
    pins = []
    for requirement in json.loads(out.stdout.strip().splitlines()[-1]):
        if ";" in requirement:
            continue  # extras (all/postgres/mariadb/unstructured) and platform markers
        match = _PIN.match(requirement)
        if match:
            pins.append(f"{match.group(1)}=={match.group(2)}")
    return pins


def _discard(venv: Path) -> None:
    """Remove a partial or stale venv entirely: renamed aside first (so ``venv`` never names a half-deleted tree,
    even if this process dies mid-delete), then deleted."""
    if not venv.exists() and not venv.is_symlink():
        return
    trash = venv.with_name(f".{venv.name}.trash-{os.getpid()}-{time.monotonic_ns()}")
    os.rename(venv, trash)
    shutil.rmtree(trash, ignore_errors=True)


def _sweep(venv: Path) -> None:
    """Delete trash left beside the venv by a holder that died mid-delete (callers hold the lock)."""
    for leftover in venv.parent.glob(f".{venv.name}.trash-*"):
        shutil.rmtree(leftover, ignore_errors=True)


def _install(venv: Path) -> dict[str, float]:
    """Build the venv from nothing (whatever was at ``venv`` is discarded first); returns the step timings."""
    _discard(venv)
    return _build(venv)


def _build(venv: Path) -> dict[str, float]:
    """Create the venv at ``venv`` (absent) and install the packages; the seam tests replace (no pip, no network)."""
    timings: dict[str, float] = {}
    python = _venv_python(venv)

    t = time.monotonic()
    _run([_base_python(), "-m", "venv", str(venv)], VENV_TIMEOUT_S, "creating the venv")
    timings["venv_s"] = round(time.monotonic() - t, 2)

    t = time.monotonic()
    _run(
        [str(python), "-m", "pip", "install", *PIP_OPTS, "--no-deps", OWUI_REQUIREMENT],
        PIP_TIMEOUT_S,
        f"pip install --no-deps {OWUI_REQUIREMENT}",
    )
    timings["pip_open_webui_s"] = round(time.monotonic() - t, 2)

    constraints = venv / "owui-constraints.txt"
    constraints.write_text("\n".join(_metadata_constraints(python)) + "\n")
    t = time.monotonic()
    _run(
        [str(python), "-m", "pip", "install", *PIP_OPTS, "-c", str(constraints), *PACKAGES],
        PIP_TIMEOUT_S,
        "pip install of the minimal set",
    )
    timings["pip_minimal_set_s"] = round(time.monotonic() - t, 2)

    (site_packages(python).parent / "CHANGELOG.md").write_text(CHANGELOG_STUB)

    t = time.monotonic()
    check = (
        "import open_webui, sqlalchemy, aiosqlite, alembic, psycopg, fastapi, pydantic, orjson;"
        " print(open_webui.__file__)"
    )
    _run([str(python), "-I", "-c", check], CHECK_TIMEOUT_S, "import check")
    timings["check_s"] = round(time.monotonic() - t, 2)
    return timings


def _wait_for_lock(seconds: float) -> None:
    """Pause between two attempts to take the build lock (``flock`` has no timeout; a seam tests replace)."""
    time.sleep(seconds)


def lock_path(venv: Path) -> Path:
    return venv.parent / f"{venv.name}.lock"


def ensure_owui_python() -> Path:
    """The venv's python, building the venv first unless a completed install is already there.

    The unlocked first check is safe because a complete venv is never modified in place: the marker is written
    last and atomically, and a rebuild first renames the old venv away. Everything else happens under the lock.
    """
    venv = venv_dir().absolute()
    if _marker_ok(venv):
        return _venv_python(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    with tierlock.held(
        lock_path(venv), timeout=LOCK_TIMEOUT_S, poll=LOCK_POLL_S, fail=OwuiUnavailable,
        wait=lambda seconds: _wait_for_lock(seconds),  # late-bound: the seam tests replace
    ):  # fmt: skip
        _sweep(venv)
        if _marker_ok(venv):  # built by whoever held the lock
            return _venv_python(venv)
        t = time.monotonic()
        timings = _install(venv)  # discards the partial / stale venv first
        timings["total_s"] = round(time.monotonic() - t, 2)
        if _dist_version(venv) != OWUI_VERSION:
            raise OwuiUnavailable(f"the build left no open-webui {OWUI_VERSION} METADATA in {venv}")
        tmp = venv / f"{MARKER}.tmp"
        tmp.write_text(json.dumps({"spec": _spec(), "timings": timings, "installed_at": int(time.time())}, indent=2))
        tmp.replace(venv / MARKER)  # last, atomically: only now does the venv count as complete
    return _venv_python(venv)


def install_info() -> dict[str, Any]:
    """The marker's content (spec, timings of the cold install), or ``{}`` when not installed."""
    try:
        return json.loads((venv_dir() / MARKER).read_text())
    except (OSError, ValueError):
        return {}


def site_packages(python: Path) -> Path:
    """``<venv>/lib/pythonX.Y/site-packages`` (found on disk, without starting the interpreter)."""
    found = sorted(python.parent.parent.glob("lib/python3.*/site-packages"))
    if not found:
        raise OwuiUnavailable(f"no site-packages under {python.parent.parent}")
    return found[0]


def owui_env(
    database_url: str, workdir: Path, python: Path, *, migrating: bool = False, extra: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment ``owui_side.py`` runs with: the given DB, every writable dir inside ``workdir``, offline, quiet.

    Inherited variables that Open WebUI reads for its DB / Redis / auth setup are dropped first so a developer's
    shell cannot change what the tier talks to.
    """
    dropped = DROPPED_ENV_PREFIXES
    env = {
        k: v
        for k, v in _clean_env().items()
        if not k.startswith(dropped)
        and not k.startswith("PYTHON")
        and k not in ("DATA_DIR", "STATIC_DIR", "FRONTEND_BUILD_DIR", "CUSTOM_NAME", "VECTOR_DB", "CORS_ALLOW_ORIGIN")
    }
    for sub in ("data", "static", "home", "tmp"):
        (workdir / sub).mkdir(parents=True, exist_ok=True)
    env.update(
        DATABASE_URL=database_url,
        WEBUI_SECRET_KEY=WEBUI_SECRET_KEY,
        DATA_DIR=str(workdir / "data"),  # config.py makes uploads/ and cache/ here
        STATIC_DIR=str(
            workdir / "static"
        ),  # config.py deletes and recopies files here (default: the package's static/)
        FRONTEND_BUILD_DIR=str(site_packages(python) / "open_webui" / "frontend"),  # else config.py raises
        VECTOR_DB="qdrant",  # anything but chroma: config.py would import chromadb
        ENABLE_DB_MIGRATIONS="True" if migrating else "False",  # else importing open_webui.config re-runs Alembic
        HOME=str(workdir / "home"),
        TMPDIR=str(workdir / "tmp"),
        OFFLINE_MODE="true",  # no version check, HF_HUB_OFFLINE=1
        ENABLE_VERSION_UPDATE_CHECK="false",
        CUSTOM_NAME="",  # non-empty would fetch branding from api.openwebui.com at import
        ENABLE_OTEL="false",
        ANONYMIZED_TELEMETRY="false",
        DO_NOT_TRACK="true",
        SCARF_NO_ANALYTICS="true",
        CORS_ALLOW_ORIGIN="http://127.0.0.1",  # '*' (the default) logs a warning when open_webui.config is imported
        GLOBAL_LOG_LEVEL="WARNING",  # env.py: basicConfig(level=..., stream=stdout); owui_side moves stdout to stderr
    )
    if extra:
        env.update(extra)
    return env


def _last_json(stdout: str) -> Any:
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise ValueError("no output")
    return json.loads(lines[-1])


def _fail(what: str, returncode: int | None, stdout: str, stderr: str) -> OwuiError:
    return OwuiError(
        f"owui_side {what} failed (exit {returncode}); stderr tail:\n{stderr[-4000:]}\nstdout tail:\n{stdout[-1000:]}",
        returncode,
        stderr,
        stdout,
    )


def run_owui(
    args: list[str], database_url: str, timeout: float = DEFAULT_RUN_TIMEOUT_S, *, env: dict[str, str] | None = None
) -> Any:
    """Run ``owui_side.py ARGS`` in the Open WebUI venv against ``database_url``; return its last-line JSON."""
    python = ensure_owui_python()
    workdir = Path(tempfile.mkdtemp(prefix="owc-owui-"))
    try:
        cmd = [str(python), "-I", str(SIDE), *args]
        run_env = owui_env(database_url, workdir, python, migrating=bool(args) and args[0] == "migrate", extra=env)
        try:
            out = subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout, env=run_env, cwd=workdir, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired as exc:
            stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
            raise OwuiError(
                f"owui_side {args[:1]} timed out after {timeout} s; stderr tail:\n{stderr[-4000:]}"
            ) from exc
        if out.returncode != 0:
            raise _fail(" ".join(args[:1]), out.returncode, out.stdout, out.stderr)
        try:
            return _last_json(out.stdout)
        except ValueError:
            raise _fail(" ".join(args[:1]), out.returncode, out.stdout, out.stderr) from None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


class OwuiProcess(subprocess.Popen):
    """A background ``owui_side.py`` run (a :class:`subprocess.Popen`); stdout/stderr go to files in ``workdir``.

    ``result()`` waits (bounded), parses the JSON, raises :class:`OwuiError` on failure, and removes ``workdir``;
    ``stop()`` kills it (by its own pid) and cleans up. Use one of the two exactly once.
    """

    workdir: Path
    args_: list[str]

    def _read(self, name: str) -> str:
        try:
            return (self.workdir / name).read_text(errors="replace")
        except OSError:
            return ""

    def result(self, timeout: float = DEFAULT_RUN_TIMEOUT_S) -> Any:
        try:
            try:
                self.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                self.wait(timeout=30)
                raise OwuiError(
                    f"owui_side {self.args_[:1]} timed out after {timeout} s;"
                    f" stderr tail:\n{self._read('stderr')[-4000:]}"
                ) from None
            stdout, stderr = self._read("stdout"), self._read("stderr")
            if self.returncode != 0:
                raise _fail(" ".join(self.args_[:1]), self.returncode, stdout, stderr)
            try:
                return _last_json(stdout)
            except ValueError:
                raise _fail(" ".join(self.args_[:1]), self.returncode, stdout, stderr) from None
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def stop(self) -> None:
        try:
            if self.poll() is None:
                self.kill()
                self.wait(timeout=30)
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)


def start_owui(args: list[str], database_url: str, *, env: dict[str, str] | None = None) -> OwuiProcess:
    """Start ``owui_side.py ARGS`` in the background (e.g. ``hammer`` next to our own writer); see
    :class:`OwuiProcess`."""
    python = ensure_owui_python()
    workdir = Path(tempfile.mkdtemp(prefix="owc-owui-"))
    try:
        run_env = owui_env(database_url, workdir, python, migrating=bool(args) and args[0] == "migrate", extra=env)
        with open(workdir / "stdout", "wb") as out, open(workdir / "stderr", "wb") as err:
            proc = OwuiProcess(
                [str(python), "-I", str(SIDE), *args],
                env=run_env,
                cwd=workdir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
            )
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    proc.workdir = workdir
    proc.args_ = list(args)
    return proc

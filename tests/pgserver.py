"""A throwaway PostgreSQL server for the test suite.

Tests that need a real database call :func:`start_postgres` (usually from a
session-scoped fixture) and :meth:`PgServer.stop` when done.  Each call makes a
fresh cluster in a temp dir, so tests never touch a system cluster and never
depend on one being configured or running.

Why the server is a direct child of this process (not daemonised by
``pg_ctl start``): a child can be waited for, reaped, and signalled by pid
without guessing, so ``stop()`` can guarantee that nothing is left behind.  When
started from the main thread the child also gets a parent-death signal, so
even a SIGKILLed pytest does not leak a postmaster.

Why we switch to the ``postgres`` OS user: PostgreSQL refuses to run as root,
and CI runs as root.  We use ``subprocess``'s ``user=``/``group=`` (the same
effect as ``runuser -u postgres --`` but without an intermediate process that
would sit between us and the postmaster).

This module is standalone on purpose (stdlib + attrs only): it must be
importable before the project is, and the database driver (psycopg 3) is only
needed by whoever uses the URL.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import attrs

__all__ = ["PgServer", "PostgresUnavailable", "find_pg_bin", "start_postgres"]

#: Name of the superuser role created by initdb; also the user in the URL.
DB_USER = "postgres"
#: Every wait in this module is bounded by this many seconds.
TIMEOUT = 60.0

#: Settings appended to postgresql.conf.  Durability is worthless for a
#: throwaway cluster, so trade it for speed; background work that only burns
#: the CI machine's 2 cores is turned off; and parallel query is off because
#: its dynamic shared memory can hit a small /dev/shm in containers.
_SETTINGS: dict[str, str] = {
    "listen_addresses": "'127.0.0.1'",
    "max_connections": "200",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "wal_level": "minimal",
    "max_wal_senders": "0",
    "autovacuum": "off",
    "jit": "off",
    "max_parallel_workers_per_gather": "0",
    "timezone": "'UTC'",
    "log_min_messages": "warning",
}

_HBA = (
    "# Written by tests/pgserver.py: loopback-only test cluster, no passwords.\n"
    "local all all trust\n"
    "host all all 127.0.0.1/32 trust\n"
)

_PR_SET_PDEATHSIG = 1


class PostgresUnavailable(RuntimeError):
    """PostgreSQL cannot be run here (binaries or the ``postgres`` user missing).

    Distinct from other errors so a fixture can turn it into a skip, or into a
    hard failure in CI, while a genuine start-up failure stays an error.
    """


def find_pg_bin() -> Path | None:
    """Return the directory with ``initdb``/``pg_ctl``/``postgres``, or None.

    Debian keeps server binaries off PATH, in /usr/lib/postgresql/VERSION/bin
    (several versions can coexist); the newest wins.  Falls back to PATH for
    other layouts.  ``createdb`` (which start_postgres uses) must be there too;
    on Debian it comes with the server package's postgresql-client-VERSION.
    """
    needed = ("initdb", "pg_ctl", "postgres", "createdb")

    def complete(d: Path) -> bool:
        return all(os.access(d / n, os.X_OK) for n in needed)

    def version(d: Path) -> tuple[int, ...]:
        try:
            return tuple(int(p) for p in d.parent.name.split("."))
        except ValueError:
            return (-1,)

    found = [d for d in Path("/usr/lib/postgresql").glob("*/bin") if complete(d)]
    if found:
        return max(found, key=version)
    on_path = shutil.which("initdb")
    if on_path is not None and complete(Path(on_path).resolve().parent):
        return Path(on_path).resolve().parent
    return None


@attrs.define(eq=False)
class PgServer:
    """A running throwaway server; ``stop()`` kills it and deletes its files."""

    url: str
    port: int
    datadir: Path
    _proc: subprocess.Popen[bytes] = attrs.field(repr=False)
    _tmpdir: Path = attrs.field(repr=False)

    @property
    def logfile(self) -> Path:
        """The server log, useful when a test fails (deleted by ``stop()``)."""
        return self._tmpdir / "postgres.log"

    def stop(self) -> None:
        """Stop the server and remove its temp dir.  Idempotent, bounded.

        Escalates fast shutdown (SIGINT, what ``pg_ctl stop -m fast`` sends),
        then immediate (SIGQUIT), then SIGKILL to the postmaster and its
        children, so no process survives even a wedged server.
        """
        _live.discard(self)
        proc = self._proc
        for sig, wait in ((signal.SIGINT, 30.0), (signal.SIGQUIT, 10.0)):
            if proc.poll() is not None:
                break
            proc.send_signal(sig)
            try:
                proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
        if proc.poll() is None:
            for pid in [proc.pid, *_children(proc.pid)]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            proc.wait(timeout=10)
        shutil.rmtree(self._tmpdir, ignore_errors=True)

    def __enter__(self) -> PgServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


#: Servers not yet stopped; stopped at interpreter exit so temp dirs go too.
_live: set[PgServer] = set()


@atexit.register
def _stop_all() -> None:
    for server in list(_live):
        server.stop()


def start_postgres(base: Path | None = None, dbname: str = "owc") -> PgServer:
    """Start a fresh, fast, loopback-only cluster and create ``dbname`` in it.

    ``base`` is where the temp dir goes (default: the system temp dir).  When
    running as root it must be traversable by the ``postgres`` user, so
    pytest's ``tmp_path`` (under a 0700 root-owned dir) does not work there.

    Raises PostgresUnavailable when PostgreSQL is not installed, and
    RuntimeError (with the server log) when it is but does not start.
    """
    bindir = find_pg_bin()
    if bindir is None:
        raise PostgresUnavailable("PostgreSQL server binaries not found (apt-get install -y postgresql)")
    ids: tuple[int, int] | None = None
    if os.geteuid() == 0:
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            raise PostgresUnavailable("running as root but no 'postgres' OS user") from None
        ids = (pw.pw_uid, pw.pw_gid)

    tmpdir = Path(tempfile.mkdtemp(prefix="pgtest-", dir=base))
    try:
        if ids is not None:
            os.chown(tmpdir, *ids)
        datadir = tmpdir / "data"
        run = _Runner(bindir, tmpdir, ids)
        run.check(
            "initdb", "-D", str(datadir), "-U", DB_USER, "-A", "trust",
            "-E", "UTF8", "--locale=C", "--no-sync",
        )  # fmt: skip
        settings = {**_SETTINGS, "unix_socket_directories": f"'{tmpdir}'"}
        with open(datadir / "postgresql.conf", "a") as f:
            f.write("\n# tests/pgserver.py\n")
            f.writelines(f"{k} = {v}\n" for k, v in settings.items())
        (datadir / "pg_hba.conf").write_text(_HBA)
        server = _launch(run, datadir, dbname)
    except BaseException:
        shutil.rmtree(tmpdir, ignore_errors=True)
        raise
    try:
        if dbname != "postgres":
            run.check("createdb", "-h", "127.0.0.1", "-p", str(server.port), "-U", DB_USER, dbname)
    except BaseException:
        server.stop()
        raise
    return server


def _launch(run: _Runner, datadir: Path, dbname: str) -> PgServer:
    """Start the postmaster on a free port and wait until it accepts connections.

    A port that was free when probed can be taken before the server binds it,
    so a bind failure is retried on a new port (a few times, then it's an error).
    """
    log = run.cwd / "postgres.log"
    for _ in range(3):
        port = _free_port()
        proc = run.server(datadir, port)
        try:
            _wait_ready(proc, datadir, log)
        except _BindFailed:
            continue
        except BaseException:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
            raise
        server = PgServer(
            url=f"postgresql+psycopg://{DB_USER}@127.0.0.1:{port}/{dbname}",
            port=port,
            datadir=datadir,
            proc=proc,
            tmpdir=run.cwd,
        )
        _live.add(server)
        return server
    raise RuntimeError(f"postgres could not bind a free port in 3 tries:\n{log.read_text()}")


class _BindFailed(Exception):
    pass


@attrs.define
class _Runner:
    """Runs PostgreSQL programs as the right user, in a sane environment.

    The environment drops PG* variables (PGPORT, PGHOST, ... would redirect
    the client tools) and forces the C locale; cwd is the temp dir because the
    caller's cwd (e.g. /root) may be unreadable to ``postgres``.
    """

    bindir: Path
    cwd: Path
    ids: tuple[int, int] | None  # (uid, gid) to switch to, when running as root

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update(LC_ALL="C", LANG="C", PGCONNECT_TIMEOUT="10")
        return env

    def _as_user(self) -> dict[str, object]:
        if self.ids is None:
            return {}
        return {"user": self.ids[0], "group": self.ids[1], "extra_groups": []}

    def check(self, prog: str, *args: str) -> None:
        """Run a short-lived program; raise with its output if it fails."""
        cmd = [str(self.bindir / prog), *args]
        res = subprocess.run(
            cmd, cwd=self.cwd, env=self._env(), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            timeout=TIMEOUT, **self._as_user(),  # type: ignore[call-overload]
        )  # fmt: skip
        if res.returncode != 0:
            hint = ""
            if self.ids is not None:
                hint = f"\n(is {self.cwd} reachable by the 'postgres' user?)"
            out = res.stdout.decode(errors="replace")
            raise RuntimeError(f"{prog} failed ({res.returncode}):\n{out}{hint}")

    def server(self, datadir: Path, port: int) -> subprocess.Popen[bytes]:
        """Start the postmaster in the foreground, logging to a file."""
        # The parent-death signal fires when the *thread* that forked exits,
        # so only arm it from the main thread, whose end is the process's end.
        main = threading.current_thread() is threading.main_thread()
        with open(self.cwd / "postgres.log", "ab") as log:
            return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
                [str(self.bindir / "postgres"), "-D", str(datadir), "-p", str(port)],
                cwd=self.cwd, env=self._env(), stdin=subprocess.DEVNULL,
                stdout=log, stderr=log,
                preexec_fn=_die_with_parent() if main else None,
                **self._as_user(),
            )  # fmt: skip


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec_fn that makes the child get SIGQUIT (immediate shutdown) if we die.

    prctl is looked up here, in the parent: dlopen/dlsym in a child forked
    from a threaded process can deadlock.  subprocess runs preexec_fn after
    switching uid, which matters: the kernel clears the parent-death signal on
    credential changes.  None where there is no prctl (not Linux).
    """
    prctl = getattr(ctypes.CDLL(None), "prctl", None)
    if prctl is None:
        return None

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGQUIT), 0, 0, 0)

    return arm


def _wait_ready(proc: subprocess.Popen[bytes], datadir: Path, log: Path) -> None:
    """Wait (bounded) until postmaster.pid says "ready", like ``pg_ctl -w``."""
    deadline = time.monotonic() + TIMEOUT
    pidfile = datadir / "postmaster.pid"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            text = log.read_text(errors="replace")
            if "could not bind" in text or "could not create any TCP/IP" in text:
                log.write_text("")
                raise _BindFailed
            raise RuntimeError(f"postgres exited with {proc.returncode}:\n{text}")
        try:
            lines = pidfile.read_text().splitlines()
        except FileNotFoundError:
            lines = []
        if len(lines) >= 8 and lines[0] == str(proc.pid) and lines[7].strip() == "ready":
            return
        time.sleep(0.02)
    proc.kill()
    proc.wait(timeout=10)
    raise RuntimeError(f"postgres not ready after {TIMEOUT}s:\n{log.read_text(errors='replace')}")


def _free_port() -> int:
    """A loopback port that is free right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _children(pid: int) -> list[int]:
    """Pids whose parent is ``pid`` (Linux /proc), for the last-resort SIGKILL."""
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == str(pid):
            kids.append(int(stat.parent.name))
    return kids

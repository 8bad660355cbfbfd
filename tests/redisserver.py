"""A throwaway Redis server for the W tier: Open WebUI with ``WEBSOCKET_MANAGER=redis`` (several workers share
their Socket.IO rooms, session pool and task registry through it).

A direct child of this process on a free loopback port, nothing saved to disk, stopped (and reaped) by
:meth:`RedisServer.stop`. Standalone (stdlib only), like ``tests/pgserver.py``.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

#: Every wait here is bounded by this many seconds (a harness bound: another process's start).
TIMEOUT = 30.0


class RedisUnavailable(RuntimeError):
    """No ``redis-server`` on this machine (Debian's ``redis-server`` package; ``.ci/run`` installs it)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pong(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RedisUnavailable("redis-server is not installed (apt-get install redis-server)")
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        workdir.mkdir(parents=True, exist_ok=True)
        self._log = (workdir / "redis.log").open("wb")
        self._proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            cwd=workdir,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + TIMEOUT
        while not _pong(self.port):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RedisUnavailable(f"redis-server did not start: {(workdir / 'redis.log').read_text()[-2000:]}")
            time.sleep(0.05)  # harness: waits for another process to listen

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._log.close()


@contextlib.contextmanager
def running_redis(workdir: Path) -> Iterator[RedisServer]:
    server = RedisServer(workdir)
    try:
        yield server
    finally:
        server.stop()

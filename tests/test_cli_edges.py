"""Issue 31's rough edges a new operator hits: each is one ``owc:`` line naming the fix and a documented exit code
(``owc --help``), never a traceback, and nothing lost. Each test says what the command did before."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from owc.cli import EXIT_CONFIG, EXIT_OK, TOKEN_ENV
from owc.sim import open_simulator
from owc.store import ChatStore, make_engine

from conftest import ROOT, TOKEN, leaked


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


async def _owc(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``python3 -m owc ARGS``: exit code, stdout, stderr."""
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, "-m", "owc", *args], cwd=cwd, env=env or _env(), capture_stdout=True,
            capture_stderr=True, check=False,
        )  # fmt: skip
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def _one_clear_line(stderr: str) -> str:
    """The ``owc:`` line, checking it is the only one, with no traceback and no secret around it."""
    assert "Traceback" not in stderr and "ExceptionGroup" not in stderr, stderr
    assert not leaked(stderr), stderr
    lines = [line for line in stderr.splitlines() if line.startswith("owc: ") and "warning:" not in line]
    assert len(lines) == 1, stderr
    return lines[0]


def _token_file(folder: Path) -> Path:
    token = folder / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    return token


def _webui_db(path: Path) -> str:
    """A SQLite database with Open WebUI's chat tables (what ``owc run`` writes into)."""
    engine = make_engine(f"sqlite:///{path}")
    ChatStore(engine).create_tables()
    engine.dispose()
    return f"sqlite:///{path}"


async def _started(args: list[str], cwd: Path, ready: str):
    """``owc ARGS`` started, once its stdout has said ``ready``."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "owc", *args], cwd=cwd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None
    out = b""
    with trio.fail_after(60):
        while ready.encode() not in out:
            chunk = await process.stdout.receive_some(65536)
            assert chunk, out
            out += chunk
    return process


async def _ended(process) -> tuple[int, str]:
    """The exit code and stderr of a process told to stop (killed if it does not, failing the test)."""
    err = b""
    try:
        with trio.fail_after(60):
            assert process.stderr is not None
            async for chunk in process.stderr:
                err += chunk
            code = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return code, err.decode()


SIGNAL_PAIRS = [(signal.SIGINT, signal.SIGINT), (signal.SIGTERM, signal.SIGTERM), (signal.SIGINT, signal.SIGTERM)]


@pytest.mark.parametrize("first,second", SIGNAL_PAIRS, ids=lambda s: signal.Signals(s).name)
async def test_two_signals_close_together_exit_0_for_run_and_sim(tmp_path: Path, first, second) -> None:
    """Before: two signals a millisecond to 20 ms apart made ``owc run`` / ``owc sim`` exit 130 (SIGINT) or die
    by the signal (-2 / -15: 130 / 143 in a shell) instead of the documented 0, because Trio delivers again the
    signals still pending when its receiver closes, to Python's own handlers. Now every pair, at each spacing,
    ends in 0 with no traceback."""
    db = _webui_db(tmp_path / "webui.db")
    token = _token_file(tmp_path)
    async with open_simulator(token=TOKEN) as sim:
        commands = {
            "run": (
                ["run", "--gateway", sim.url, "--token-file", str(token), "--no-device", "--db", db],
                "owc running",
            ),
            "sim": (["sim", "--port", "0", "--token-file", str(token)], "owc sim listening"),
        }
        for name, (args, ready) in commands.items():
            for gap in (0.0, 0.02):
                process = await _started(args, tmp_path, ready)
                process.send_signal(first)
                if gap:
                    await trio.sleep(gap)  # timer-ok: the spacing between the two signals is what is tested
                process.send_signal(second)
                code, err = await _ended(process)
                assert code == EXIT_OK, (name, gap, code, err)
                assert "Traceback" not in err and f"owc stopping ({signal.Signals(first).name})" in err, err


def test_the_first_stop_says_what_it_waits_for() -> None:
    """Before: ``owc stopping (SIGINT)`` and then up to a minute of silence while ended runs' messages were
    finished. Now the line says what the stop waits for and that a second Ctrl-C stops at once."""
    from owc.cli.bridge import stopping_line

    assert stopping_line("SIGINT", 2) == (
        "owc stopping (SIGINT): finishing 2 ended runs' messages (Ctrl-C again to stop now; the next start"
        " finishes what is left)"
    )
    assert stopping_line("SIGTERM", 1).startswith("owc stopping (SIGTERM): finishing 1 ended run's message (")
    assert stopping_line("SIGINT", 0) == (
        "owc stopping (SIGINT): closing the Gateway connection (Ctrl-C again to stop now)"
    )


async def test_an_unusable_device_folder_is_one_line_and_exit_3_before_connecting(tmp_path: Path) -> None:
    """Before: ``owc run`` looped forever with a 36-line traceback at each reconnect, ``owc doctor`` crashed with a
    traceback (exit 1). Now both say it in one line naming the folder and the three fixes, exit 3, and connect to
    nothing. (As root, permissions cannot be taken away: a folder under a regular file is the unusable folder here;
    without root, a read-only folder too.)"""
    token = _token_file(tmp_path)
    db = _webui_db(tmp_path / "webui.db")
    folders = [tmp_path / "token" / "dev"]
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        folders.append(locked)
    accepted: list[object] = []
    async with trio.open_nursery() as nursery:
        (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")  # counts every connection made to it

        async def count(stream: trio.SocketStream) -> None:
            accepted.append(stream)
            await stream.aclose()

        nursery.start_soon(trio.serve_listeners, count, [listener])
        url = f"ws://127.0.0.1:{listener.socket.getsockname()[1]}/"
        for folder in folders:
            gateway = ["--gateway", url, "--token-file", str(token), "--device-dir", str(folder)]
            for command in (["doctor", *gateway], ["run", *gateway, "--db", db]):
                code, out, err = await _owc(*command, cwd=tmp_path)
                assert code == EXIT_CONFIG, (command, code, out, err)
                line = _one_clear_line(err)
                assert line.startswith(f"owc: device folder {folder} cannot hold owc's device identity ("), line
                uid = os.geteuid()
                assert line.endswith(
                    f"): pass --device-dir with a folder owc can write, fix this one's permissions (owc runs as uid"
                    f" {uid}), or pass --no-device (the token alone: only on the Gateway's own loopback)"
                ), line
                assert "owc running" not in out
        nursery.cancel_scope.cancel()
    assert accepted == []  # refused before connecting


async def test_an_unusable_device_folder_inside_open_webui_is_one_log_line_an_attempt(tmp_path: Path, caplog) -> None:
    """Inside Open WebUI the same folder is found at the connect (the runtime keeps retrying: the Pipe answers each
    message with the reason). Before: a traceback at each attempt; now one ERROR line an attempt, naming the file."""
    import logging

    from owc.gateway import GatewayClient, GatewayConfig

    folder = _token_file(tmp_path) / "dev"
    seen: list[logging.LogRecord] = []
    twice = trio.Event()

    class Count(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)
            if sum("gateway.device_unusable" in r.getMessage() for r in seen) >= 2:
                twice.set()

    handler = Count()
    logging.getLogger("owc").addHandler(handler)
    try:
        async with open_simulator(token=TOKEN) as sim:
            config = GatewayConfig(device_dir=folder, backoff_initial=0.01, backoff_watch_cap=0.02, backoff_jitter=0)
            client = GatewayClient(sim.url, TOKEN, config=config)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.run)
                with trio.fail_after(30):
                    await twice.wait()
                nursery.cancel_scope.cancel()
    finally:
        logging.getLogger("owc").removeHandler(handler)
    failures = [r for r in seen if r.levelno >= logging.WARNING]
    assert failures and all(r.exc_info is None for r in seen), [r.getMessage() for r in failures]
    for record in failures:
        assert record.getMessage() == (
            f"gateway.device_unusable url={sim.url}: device identity {folder}/device.json: Not a directory (fix the"
            " folder's permissions or choose another)"
        )

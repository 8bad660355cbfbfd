"""``owc status`` and ``/metrics`` against a running ``owc run`` subprocess on the simulator (issue 31): real HTTP on
loopback, the exact exit codes (0 connected, 6 not, 3 no endpoint) and lines; ``--status-listen`` on a taken port or
a bad value is one line and exit 3; and the logs of a 300-word run: JSON lines that parse, the process id and worker
in every one, INFO lines bounded by the run's steps, never its deltas (the tab events are DEBUG)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import trio

from owc.cli.codes import EXIT_CONFIG, EXIT_OK, EXIT_UNHEALTHY, EXIT_USAGE
from owc.sim import open_simulator
from owc.store import open_store

from conftest import TOKEN

ROOT = Path(__file__).resolve().parents[1]
USER = "user-1"

#: The endpoint is entered by ``owc/cli/bridge.py``'s ``run_bridge`` (``owc.cli.status.open_status_endpoint``).
wired = pytest.mark.skipif(
    "open_status_endpoint" not in (ROOT / "owc" / "cli" / "bridge.py").read_text(),
    reason="owc/cli/bridge.py does not enter owc.cli.status.open_status_endpoint yet",
)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OWC_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


async def _owc(*args: str, cwd: Path) -> tuple[int, str, str]:
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, "-m", "owc", *args], cwd=cwd, env=_env(), capture_stdout=True, capture_stderr=True,
            check=False,
        )  # fmt: skip
    return done.returncode, done.stdout.decode(), done.stderr.decode()


class Lines:
    """A child's stream read line by line, waiting for a line (an event, not a clock)."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.seen: list[str] = []
        self._buffer = b""
        self._read = 0

    async def until(self, predicate: Any) -> str:
        while True:
            while self._read < len(self.seen):
                line = self.seen[self._read]
                self._read += 1
                if predicate(line):
                    return line
            chunk = await self.stream.receive_some(65536)
            if not chunk:
                raise AssertionError(f"the stream ended before the line; it said: {self.seen[-20:]}")
            self._buffer += chunk
            *whole, self._buffer = self._buffer.split(b"\n")
            self.seen.extend(part.decode() for part in whole)

    async def rest(self) -> None:
        while chunk := await self.stream.receive_some(65536):
            self._buffer += chunk
        self.seen.extend(part.decode() for part in self._buffer.split(b"\n") if part)


def _get(url: str) -> tuple[int, str, str]:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.status, answer.headers["Content-Type"], answer.read().decode()


@wired
async def test_owc_status_and_metrics_say_how_a_running_owc_run_is(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    db = f"sqlite:///{tmp_path / 'webui.db'}"
    chat_id = "c0ffee00-0000-4000-8000-000000000031"
    body = {"id": chat_id, "title": "t", "models": ["openclaw.main"], "history": {"messages": {}, "currentId": None}}
    async with open_store(db, create=True) as store:
        await store.create_chat(chat_id, USER, chat={**body, "messages": []})
    key = f"agent:main:openwebui-{USER}-{chat_id}"
    words = [f"word{n} " for n in range(300)]
    async with open_simulator(token=TOKEN) as sim:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "owc", "run", "--gateway", sim.url, "--token-file", str(token), "--db", db,
             "--no-device", "--status-listen", "127.0.0.1:0", "--log-format", "json", "--instance", "op-1"],
            cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        out, err = Lines(process.stdout), Lines(process.stderr)
        try:
            with trio.fail_after(60):
                shown = await out.until(lambda line: line.startswith("owc status on "))
                base = shown.split()[3].removesuffix("/status")
                assert shown == f"owc status on {base}/status and {base}/metrics"
                await err.until(lambda line: '"questions.listed' in line)  # past the hello and its subscribe

                code, text, stderr = await _owc("status", "--url", base, cwd=tmp_path)
                assert code == EXIT_OK, stderr
                shown_lines = text.splitlines()
                assert shown_lines[0] == f"owc 0.1.0 pid {process.pid} worker op-1"
                assert shown_lines[1].startswith(f"gateway {sim.url}: connected (Gateway 2026.9.6, boot {sim.boot_id},")
                assert (
                    "device (none): no device (the shared token alone: enough only on the Gateway's own loopback)"
                    in text
                )

                status, kind, metrics = await trio.to_thread.run_sync(_get, f"{base}/metrics")
                assert (status, kind) == (200, "text/plain; version=0.0.4; charset=utf-8")
                assert "owc_connected 1\n" in metrics
                assert f'owc_info{{version="0.1.0",pid="{process.pid}",worker="op-1"}} 1\n' in metrics
                status, kind, body = await trio.to_thread.run_sync(_get, f"{base}/status")
                assert (status, kind) == (200, "application/json") and json.loads(body)["connected"] is True

                run = sim.start_run(key, "r300").text("".join(words), chunks=words)
                run.tool("exec", {"cmd": "ls"}, "ok").end()
                await err.until(lambda line: '"runs.finalized' in line and "r300" in line)
        except BaseException:
            process.kill()
            raise
    # The Gateway went away (the simulator closed): owc is not connected, and says why.
    try:
        with trio.fail_after(60):
            await err.until(lambda line: '"gateway.closed' in line)
            code, text, _ = await _owc("status", "--url", base, cwd=tmp_path)
            assert code == EXIT_UNHEALTHY, text
            assert text.splitlines()[1].startswith(f"gateway {sim.url}: not connected (")
            process.send_signal(signal.SIGTERM)
            await process.wait()
            await err.rest()
    finally:
        if process.returncode is None:
            process.kill()
    code, text, stderr = await _owc("status", "--url", base, cwd=tmp_path)
    assert (code, text) == (EXIT_CONFIG, "")
    assert stderr == (
        f"owc: cannot reach {base}/status ([Errno 111] Connection refused): is `owc run` running with its status"
        " endpoint there? (`--status-listen`; `owc status --url` names another)\n"
    )

    # Every log line is one JSON object with the process id and the worker; the run took a few INFO lines, not 300.
    logs = [json.loads(line) for line in err.seen if line.startswith("{")]
    printed = [line for line in err.seen if line.strip() and not line.startswith("{")]
    assert all(line.startswith("owc stopping") for line in printed), printed  # the signal's own line, not a log
    assert logs and all(line["pid"] == process.pid and line["worker"] == "op-1" for line in logs)
    assert all({"time", "level", "logger", "message"} <= set(line) for line in logs)
    of_run = [line for line in logs if "r300" in line["message"] and line["level"] == "INFO"]
    assert [line["fields"]["event"] for line in of_run] == ["runs.claimed", "runs.finalized"], of_run
    assert not [line for line in logs if line["logger"] == "owc.emit" and line["level"] != "DEBUG"]
    assert len([line for line in logs if line["level"] == "INFO"]) <= 15, [line["message"] for line in logs]


@wired
async def test_a_status_address_that_cannot_be_used_is_one_line_and_exit_3(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    db = f"sqlite:///{tmp_path / 'webui.db'}"
    async with open_store(db, create=True):
        pass  # Open WebUI's schema, as owc run wants it
    taken = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = taken.socket.getsockname()[1]
    async with open_simulator(token=TOKEN) as sim, taken:
        run = ("run", "--gateway", sim.url, "--token-file", str(token), "--db", db, "--no-device")
        code, _, stderr = await _owc(*run, "--status-listen", f"127.0.0.1:{port}", cwd=tmp_path)
        assert code == EXIT_CONFIG
        assert stderr.splitlines()[-1] == (
            f"owc: --status-listen 127.0.0.1:{port}: cannot listen there (Address already in use); pick a free port,"
            " or 'off'"
        )
        assert "Traceback" not in stderr
        code, _, stderr = await _owc(*run, "--status-listen", "localhost", cwd=tmp_path)
        assert code == EXIT_CONFIG
        assert stderr.splitlines()[-1] == (
            "owc: --status-listen 'localhost': HOST:PORT with a port from 0 to 65535 (e.g. 127.0.0.1:18790), or off"
        )


async def test_owc_status_without_an_endpoint_is_exit_3_naming_the_fix(tmp_path: Path) -> None:
    free = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = free.socket.getsockname()[1]
    await free.aclose()  # nothing listens there now
    code, text, stderr = await _owc("status", "--url", f"http://127.0.0.1:{port}", cwd=tmp_path)
    assert (code, text) == (EXIT_CONFIG, "")
    assert stderr == (
        f"owc: cannot reach http://127.0.0.1:{port}/status ([Errno 111] Connection refused): is `owc run` running"
        " with its status endpoint there? (`--status-listen`; `owc status --url` names another)\n"
    )


async def test_the_log_options_go_before_or_after_the_subcommand(tmp_path: Path) -> None:
    url = ("--url", "http://127.0.0.1:1")
    for args in (
        ("-v", "status", *url),
        ("status", "-v", *url),
        ("status", "-q", "--log-level", "info", "--log-format", "json", *url),
    ):
        code, _, stderr = await _owc(*args, cwd=tmp_path)
        assert code == EXIT_CONFIG and stderr.startswith("owc: cannot reach http://127.0.0.1:1/status"), stderr
    code, _, stderr = await _owc("status", "--log-level", "loud", cwd=tmp_path)
    assert (code, stderr) == (
        EXIT_USAGE,
        "owc: --log-level 'loud': one of DEBUG, INFO, WARNING, ERROR, CRITICAL (any case)\n",
    )

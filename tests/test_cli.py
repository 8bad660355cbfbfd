"""The ``owc`` command: every failure the user can fix is one ``owc:`` line on stderr and a documented exit code
(``owc --help``), never a traceback, and never a secret."""

from __future__ import annotations

import os
import signal
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from owc import __version__, device
from owc.cli import EXIT_CONFIG, EXIT_INVARIANTS, EXIT_OK, EXIT_REFUSED, EXIT_USAGE, TOKEN_ENV, main
from owc.sim import open_simulator

from conftest import ROOT, TOKEN, leaked, secret

WRONG_TOKEN = secret("owc-test-wrong-token-4c1d9e")
DB_PASSWORD = secret("db-password-93a1f7c0")
URL_TOKEN = secret("url-token-0b6e2d58")


def test_help_exits_zero(capsys) -> None:
    assert main([]) == 0
    assert "owc" in capsys.readouterr().out


def test_console_script_runs() -> None:
    out = subprocess.run([sys.executable, "-m", "owc", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"owc {__version__}"


def test_help_documents_the_exit_codes_and_the_token_variable(capsys) -> None:
    for argv in (["--help"], ["run", "--help"]):
        with pytest.raises(SystemExit) as done:
            main(argv)
        assert done.value.code == 0
        text = capsys.readouterr().out
        assert "exit codes:" in text and TOKEN_ENV in text
        for code in (EXIT_OK, EXIT_INVARIANTS, EXIT_USAGE, EXIT_CONFIG, EXIT_REFUSED):
            assert f"\n  {code} " in text


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


async def test_owc_run_configuration_errors_exit_3(tmp_path: Path) -> None:
    """Before: a missing token file or a bad database URL was a traceback and exit 1; an http:// Gateway URL
    was retried forever; a token in the URL was used (and logged)."""
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    db = f"sqlite:///{tmp_path / 'webui.db'}"
    gw = "ws://127.0.0.1:9/"
    readonly = tmp_path / "readonly.db"
    conn = sqlite3.connect(readonly)
    conn.execute("CREATE TABLE other (x)")
    conn.commit()
    conn.close()
    cases = {
        "missing token file": (["--gateway", gw, "--token-file", str(tmp_path / "nope"), "--db", db], "no such file"),
        "token file not a file": (["--gateway", gw, "--token-file", os.devnull, "--db", db], "not a regular file"),
        "no token at all": (["--gateway", gw, "--db", db], f"--token-file FILE (mode 0600) or set {TOKEN_ENV}"),
        "bad database url": (["--gateway", gw, "--token-file", str(token), "--db", "mysql://x/y"], "unsupported"),
        "database unreachable": (
            ["--gateway", gw, "--token-file", str(token), "--db", f"postgresql://owc:{DB_PASSWORD}@127.0.0.1:1/w"],
            "database postgresql://***@127.0.0.1:1/w:",
        ),
        "tables cannot be created": (
            ["--gateway", gw, "--token-file", str(token), "--db", f"sqlite:///file:{readonly}?mode=ro&uri=true"],
            "attempt to write a readonly database",
        ),
        # http(s):// is what people paste from the Gateway's dashboard: it is taken as ws(s)://; ftp:// is not.
        "ftp gateway": (
            ["--gateway", "ftp://127.0.0.1:9/", "--token-file", str(token), "--db", db],
            "--gateway 'ftp://127.0.0.1:9/' has the scheme ftp://",
        ),
        "token in the url": (
            ["--gateway", f"ws://owc:{URL_TOKEN}@127.0.0.1:9/?token={URL_TOKEN}", "--token-file", str(token)]
            + ["--db", db],
            f"--token-file (mode 0600), or in {TOKEN_ENV}",
        ),
    }
    results: dict[str, tuple[int, str, str]] = {}

    async def one(name: str, args: list[str]) -> None:
        results[name] = await _owc("run", *args, cwd=tmp_path)

    async with trio.open_nursery() as nursery:
        for name, (args, _) in cases.items():
            nursery.start_soon(one, name, args)
    for name, (_, why) in cases.items():
        code, out, err = results[name]
        assert code == EXIT_CONFIG, (name, code, err)
        assert why in _one_clear_line(err), (name, err)
        assert not leaked(out), (name, out)


async def test_owc_run_with_a_wrong_token_exits_4_and_warns_about_a_readable_token_file(tmp_path: Path) -> None:
    """Before: exit 1 (the code for violated invariants), and nothing said about a 0644 token file."""
    token = tmp_path / "token"
    token.write_text(WRONG_TOKEN + "\n")
    token.chmod(0o644)
    db = f"sqlite:///{tmp_path / 'webui.db'}"
    async with open_simulator(token=TOKEN) as sim:
        from_file, from_env = {}, {}

        async def by_file() -> None:
            from_file["r"] = await _owc(
                "run", "--gateway", sim.url, "--token-file", str(token), "--db", db, "--create-db", cwd=tmp_path
            )

        async def by_env() -> None:
            args = ("run", "--gateway", sim.url, "--db", f"sqlite:///{tmp_path / 'other.db'}", "--create-db")
            from_env["r"] = await _owc(*args, cwd=tmp_path, env=_env(**{TOKEN_ENV: WRONG_TOKEN}))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(by_file)
            nursery.start_soon(by_env)
    code, _, err = from_file["r"]
    assert code == EXIT_REFUSED, err
    line = _one_clear_line(err)
    # The line of the one table the Pipe's reply uses too (``owc.protocol.refusals``), naming where the token came from.
    assert "refused owc's token (AUTH_TOKEN_MISMATCH)" in line and f"in the token file {token} (--token-file)" in line
    assert f"owc: warning: token file {token} is accessible by group or others (mode 0644)" in err
    code, _, err = from_env["r"]
    assert code == EXIT_REFUSED, err
    assert (
        f"refused owc's token (AUTH_TOKEN_MISMATCH): put the Gateway's token (gateway.auth.token on the Gateway host)"
        f" in ${TOKEN_ENV}" in _one_clear_line(err)
    )


async def test_owc_scenario_errors_exit_2(tmp_path: Path) -> None:
    """Before: a scenario error found while playing was an ExceptionGroup traceback and exit 1 (which means
    "invariants violated"); a missing scenario file a traceback."""
    playing = tmp_path / "kill.jsonl"
    playing.write_text('{"op": "kill", "deploy": "nope"}\n')
    db = f"sqlite:///{tmp_path / 'webui.db'}"
    code, _, err = await _owc("scenario", "run", str(playing), "--db", db, cwd=tmp_path)
    assert code == EXIT_USAGE, err
    assert "deploy 'nope'" in _one_clear_line(err)
    code, _, err = await _owc("scenario", "run", str(tmp_path / "absent.jsonl"), "--db", db, cwd=tmp_path)
    assert code == EXIT_USAGE, err
    assert "absent.jsonl: No such file or directory" in _one_clear_line(err)
    code, _, err = await _owc("scenario", "run", str(playing), "--db", "nosuch://db", cwd=tmp_path)
    assert code == EXIT_CONFIG, err
    # ``owc sim`` playing a file: a scenario error while playing was exit 1 there too.
    args = ("sim", "--port", "0", "--token", "x" * 12, "--scenario", str(playing), "--exit-after-scenario")
    code, _, err = await _owc(*args, cwd=tmp_path)
    assert code == EXIT_USAGE, err
    assert "scenario failed: line 1" in _one_clear_line(err)


async def test_owc_sim_writes_its_token_file_0600_and_never_through_a_link(tmp_path: Path) -> None:
    """Before: a planted link was followed. A new token file is made 0600 (an existing one is reused as it is:
    ``test_cli_edges.test_owc_sim_reuses_an_existing_default_token_file``)."""
    scenario = tmp_path / "empty.jsonl"
    scenario.write_text("")
    args = ("sim", "--port", "0", "--scenario", str(scenario), "--exit-after-scenario")
    path = tmp_path / "owc-sim.token"
    code, out, err = await _owc(*args, cwd=tmp_path)
    assert code == EXIT_OK, err
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text().strip()
    assert path.read_text().strip() not in out + err  # never printed
    path.unlink()
    target = tmp_path / "target"
    path.symlink_to(target)
    code, out, err = await _owc(*args, cwd=tmp_path)
    assert code == EXIT_CONFIG, err
    assert "is a symbolic link" in _one_clear_line(err)
    assert not target.exists() and path.is_symlink()


async def test_owc_sim_on_a_busy_port_exits_3(tmp_path: Path) -> None:
    """Before: an ExceptionGroup traceback (``Address already in use``) and exit 1."""
    async with open_simulator(token=TOKEN) as sim:
        code, _, err = await _owc("sim", "--port", str(sim.port), "--token", "x" * 12, cwd=tmp_path)
    assert code == EXIT_CONFIG, err
    assert "cannot listen on 127.0.0.1" in _one_clear_line(err)


async def test_owc_doctor_reports_a_usable_gateway_and_makes_the_device_by_default(tmp_path: Path, state_home) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    async with open_simulator(token=TOKEN) as sim:
        code, out, err = await _owc("doctor", "--gateway", sim.url, "--token-file", str(token), cwd=tmp_path)
        boot = sim.boot_id
    assert code == EXIT_OK, (out, err)
    report = dict(line.split(":", 1) for line in out.splitlines())
    report = {k.strip(): v.strip() for k, v in report.items()}
    assert (report["reachable"], report["authenticated"], report["status"]) == ("yes", "yes", "ok")
    assert report["scopes"] == "operator.read, operator.write, operator.admin" and report["protocol"] == "4"
    assert report["boot id"] == boot and report["server"] == "2026.9.6"
    # On the Gateway's own loopback the device is let in without pairing (measured on 2026.9.6: no device token).
    assert report["paired"].startswith("not needed")
    stored = device.load(state_home / "owc")  # made in the default folder ($XDG_STATE_HOME/owc)
    assert stored is not None and report["device id"] == stored.device_id
    assert stat.S_IMODE((state_home / "owc" / "device.json").stat().st_mode) == 0o600
    assert not leaked(out + err)


async def test_owc_doctor_names_what_fails(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(WRONG_TOKEN + "\n")
    token.chmod(0o600)
    with trio.socket.socket() as sock:  # a port nobody listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    args = ("--token-file", str(token), "--device-dir", str(tmp_path / "dev"))
    code, out, err = await _owc("doctor", "--gateway", f"ws://127.0.0.1:{port}", *args, cwd=tmp_path)
    assert code == EXIT_REFUSED and "reachable:     no" in out and "PROBLEM: cannot connect" in out, out
    async with open_simulator(token=TOKEN) as sim:
        code, out, err = await _owc("doctor", "--gateway", sim.url, *args, cwd=tmp_path)
    assert code == EXIT_REFUSED, out
    assert "reachable:     yes" in out and "authenticated: no" in out and "AUTH_TOKEN_MISMATCH" in out
    assert f"in the token file {token} (--token-file)" in out and not leaked(out + err)
    code, out, err = await _owc(
        "doctor", "--gateway", "ws://x", "--no-device", *args[:2], "--tls-pin", "12", cwd=tmp_path
    )
    assert code == EXIT_CONFIG and "--tls-pin: a TLS pin is the certificate's SHA-256" in _one_clear_line(err)


async def test_a_web_page_at_the_gateway_url_is_one_line_for_doctor_and_run(tmp_path: Path) -> None:
    """Issue 24 item 13: ``owc doctor`` and ``owc run`` against a URL that answers with an HTTP page printed the
    page, or trio-websocket's raw tuple with the page inside. ``owc doctor`` says it in its status line and exits
    4 (something to fix); ``owc run`` says it in its connect-failure line and goes on retrying, as for a Gateway
    not up yet (a proxy answers so while its Gateway restarts), until Ctrl-C (exit 0)."""
    from http_page import answer, http_page_server

    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    line = "the Gateway URL answered HTTP 404 Not Found (not a WebSocket endpoint): check --gateway / OWC_GATEWAY_URL"
    async with http_page_server(answer(404, b"Not Found")) as (port, _):
        gw = f"ws://127.0.0.1:{port}/"
        code, out, err = await _owc("doctor", "--gateway", gw, "--token-file", str(token), "--no-device", cwd=tmp_path)
        assert code == EXIT_REFUSED, (out, err)
        assert f"status:        PROBLEM: {line}" in out.splitlines(), out
        assert "SECRET-LOOKING" not in out + err and "b'" not in out + err

        args = ["run", "--gateway", gw, "--token-file", str(token), "--no-device", "--db", f"sqlite:///{tmp_path}/w.db"]
        args.append("--create-db")
        with trio.fail_after(60):
            process = await trio.lowlevel.open_process(
                [sys.executable, "-m", "owc", *args], cwd=tmp_path, env=_env(), stderr=subprocess.PIPE
            )
            assert process.stderr is not None
            err = ""
            try:
                while "gateway.connect_failed" not in err:
                    chunk = await process.stderr.receive_some(65536)
                    assert chunk, err
                    err += chunk.decode()
                process.send_signal(signal.SIGINT)
                async for chunk in process.stderr:
                    err += chunk.decode()
                code = await process.wait()
            finally:
                if process.returncode is None:  # the test failed: the process it started goes with it
                    process.kill()
                    await process.wait()
    assert code == EXIT_OK, err
    failed = [row for row in err.splitlines() if "gateway.connect_failed" in row]
    assert failed and all(row.endswith(f"error={line}") for row in failed), err
    assert "SECRET-LOOKING" not in err and "Traceback" not in err and "b'" not in err

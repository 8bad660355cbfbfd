"""Issue 31's rough edges a new operator hits: each is one ``owc:`` line naming the fix and a documented exit code
(``owc --help``), never a traceback, and nothing lost. Each test says what the command did before."""

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
    """``owc ARGS`` started, once its stdout has said ``ready``; and what it said until then."""
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
    return process, out.decode()


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
                process, _ = await _started(args, tmp_path, ready)
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


def _tables(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return sorted(row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    finally:
        conn.close()


WHERE = "point the URL at the database Open WebUI uses (its DATABASE_URL, or DATA_DIR/webui.db)"


async def test_owc_run_refuses_a_database_that_is_not_open_webuis(tmp_path: Path) -> None:
    """Before: ``owc run --db`` took any SQLite URL: a typo made a new empty database (owc ran, wrote nothing Open
    WebUI would ever read), another application's database got ``chat`` tables added, a foreign ``chat`` table gave
    tracebacks while owc kept running, ``sqlite://`` and ``sqlite:///:memory:`` a TypeError traceback. Now each is
    one line and exit 3, before connecting, and the file is left as it was (or not made)."""
    token = _token_file(tmp_path)
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.commit()
    conn.close()
    foreign = tmp_path / "foreign.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE chat (id TEXT PRIMARY KEY, body TEXT)")
    conn.execute("CREATE TABLE chat_message (id TEXT PRIMARY KEY)")
    conn.commit()
    conn.close()
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")  # a SQLite database with no tables
    typo = tmp_path / "webiu.db"
    memory = (
        "an in-memory SQLite database cannot be shared with Open WebUI (each connection would get its own, and"
        " nothing outlives owc): give the file Open WebUI uses, sqlite:////path/to/webui.db"
    )
    cases = {
        f"sqlite:///{typo}": (
            f"database sqlite:///{typo}: no such file {typo}: point --db at the database Open WebUI uses (its"
            " DATA_DIR/webui.db), or pass --create-db to make a new one"
        ),
        f"sqlite:///{other}": (
            f"database sqlite:///{other}: no Open WebUI chat tables (it holds users): not Open WebUI's database;"
            f" {WHERE}"
        ),
        f"sqlite:///{foreign}": (
            f"database sqlite:///{foreign}: the table chat lacks the columns archived, chat, created_at,"
            " current_message_id, folder_id and 11 more: not Open WebUI 0.12's schema (another application's table,"
            " or an older Open WebUI: upgrade it and let it migrate first)"
        ),
        f"sqlite:///{empty}": (
            f"database sqlite:///{empty}: an empty database, not Open WebUI's: {WHERE}, or pass --create-db to make"
            " Open WebUI's chat tables in it"
        ),
        "sqlite://": f"database sqlite://: {memory}",
        "sqlite:///:memory:": f"database sqlite:///:memory:: {memory}",
    }
    results: dict[str, tuple[int, str, str]] = {}
    gateway = ["--gateway", "ws://127.0.0.1:9/", "--token-file", str(token), "--no-device"]

    async def one(db: str, *extra: str) -> None:
        results[db + "".join(extra)] = await _owc("run", *gateway, "--db", db, *extra, cwd=tmp_path)

    async with trio.open_nursery() as nursery:
        for db in cases:
            nursery.start_soon(one, db)
        # --create-db makes tables only in a new file or an empty database: never beside another application's.
        nursery.start_soon(one, f"sqlite:///{other}", "--create-db")
        nursery.start_soon(one, f"sqlite:///{foreign}", "--create-db")
    for db, line in cases.items():
        code, out, err = results[db]
        assert (code, _one_clear_line(err)) == (EXIT_CONFIG, f"owc: {line}"), (db, out, err)
    for db in (f"sqlite:///{other}", f"sqlite:///{foreign}"):
        code, _, err = results[db + "--create-db"]
        assert (code, _one_clear_line(err)) == (EXIT_CONFIG, f"owc: {cases[db]}")
    assert not typo.exists()
    assert _tables(other) == ["users"] and _tables(foreign) == ["chat", "chat_message"] and _tables(empty) == []


async def test_owc_run_create_db_makes_the_tables_in_a_new_file_and_takes_open_webuis(tmp_path: Path) -> None:
    """``--create-db`` (documented in ``owc run --help``) makes Open WebUI's chat tables in a file that does not
    exist yet; without it, a database that has them (as Open WebUI's migrations or ``create_tables`` made them) is
    taken as before."""
    token = _token_file(tmp_path)
    new = tmp_path / "new.db"
    existing = _webui_db(tmp_path / "webui.db")
    async with open_simulator(token=TOKEN) as sim:
        for db, extra in ((f"sqlite:///{new}", ["--create-db"]), (existing, [])):
            args = ["run", "--gateway", sim.url, "--token-file", str(token), "--no-device", "--db", db, *extra]
            process, _ = await _started(args, tmp_path, "owc running")
            process.send_signal(signal.SIGINT)
            code, err = await _ended(process)
            assert code == EXIT_OK and "Traceback" not in err, err
    assert _tables(new) == ["chat", "chat_message"]


def test_a_postgresql_url_without_psycopg_names_the_extra(monkeypatch) -> None:
    """Before: ``database postgresql://***@h/w: No module named 'psycopg'``, with no word of how to get it."""
    from owc.cli import CliError
    from owc.cli.inputs import check_database

    monkeypatch.setitem(sys.modules, "psycopg", None)  # ``import psycopg`` raises ImportError
    with pytest.raises(CliError) as refused:
        check_database("postgresql://owc:pw@127.0.0.1:1/webui")
    assert (refused.value.code, refused.value.message) == (
        EXIT_CONFIG,
        "database postgresql://***@127.0.0.1:1/webui: the PostgreSQL driver psycopg is not installed:"
        " pip install 'owc[postgres]' (in owc's virtual environment)",
    )


@pytest.mark.postgres
def test_an_empty_postgresql_database_is_refused_unless_create_db(postgres_url: str) -> None:
    """The same rule on PostgreSQL: an empty database is not Open WebUI's (``--create-db`` makes the tables)."""
    import uuid

    import psycopg

    from owc.cli import CliError
    from owc.cli.inputs import check_database
    from owc.gateway.url import redact_url

    name = f"owc_edges_{uuid.uuid4().hex[:8]}"
    admin = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = postgres_url.rsplit("/", 1)[0] + f"/{name}"
    try:
        with pytest.raises(CliError) as refused:
            check_database(url)
        assert (refused.value.code, refused.value.message) == (
            EXIT_CONFIG,
            f"database {redact_url(url)}: an empty database, not Open WebUI's: {WHERE}, or pass --create-db to make"
            " Open WebUI's chat tables in it",
        )
        check_database(url, create=True)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


async def test_owc_demo_replaces_only_its_own_database(tmp_path: Path) -> None:
    """Before: ``owc demo --db FILE`` deleted whatever was at FILE (a text file, another application's database)
    and wrote the demo there. Now it replaces only a database an earlier ``owc demo`` made (marked by its
    ``owc_demo`` table); any other file is one line, exit 3, and left as it was."""
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database\n")
    other = tmp_path / "app.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY)")
    conn.commit()
    conn.close()
    for path in (notes, other):
        code, out, err = await _owc("demo", "--db", str(path), cwd=tmp_path)
        assert (code, _one_clear_line(err)) == (
            EXIT_CONFIG,
            f"owc: owc demo --db {path}: the file exists and is not a database owc demo made (no owc_demo table):"
            " owc demo replaces its file, so it leaves this one alone; pass another path, or remove the file",
        ), out
    assert notes.read_text() == "not a database\n" and _tables(other) == ["users"]
    demo = tmp_path / "demo.db"
    for _ in range(2):  # made, then replaced
        code, out, err = await _owc("demo", "--db", str(demo), cwd=tmp_path)
        assert code == EXIT_OK and "every ended run's message is finished" in out, err
    assert _tables(demo) == ["chat", "chat_message", "owc_demo"]


async def test_ports_out_of_range_and_tls_flags_on_ws_are_refused(tmp_path: Path) -> None:
    """Before: ``owc sim --port 70000`` listened on 4464 (70000 - 65536); ``--tls-pin`` and ``--ca-file`` with a
    ws:// Gateway were silently ignored (nothing was checked). Now the port is a usage error at parse time (exit 2,
    argparse's line), the TLS flags on ws:// a configuration error (exit 3)."""
    from owc.cli import EXIT_USAGE

    for port in ("70000", "-1", "http"):
        code, out, err = await _owc("sim", "--port", port, "--token", "x" * 12, cwd=tmp_path)
        assert code == EXIT_USAGE and "listening" not in out, err
        assert err.splitlines()[-1] == (
            f"owc sim: error: argument --port: {port!r} is not a port: a number from 0 to 65535 (0 picks a free one)"
        )
    token = _token_file(tmp_path)
    pin = "ab" * 32
    for command in ("doctor", "run"):
        for flag, value in (("--tls-pin", pin), ("--ca-file", str(token))):
            args = [command, "--gateway", "127.0.0.1:9", "--token-file", str(token), "--no-device", flag, value]
            if command == "run":
                args += ["--db", _webui_db(tmp_path / "webui.db")]
            code, _, err = await _owc(*args, cwd=tmp_path)
            assert (code, _one_clear_line(err)) == (
                EXIT_CONFIG,
                f"owc: {flag} applies to wss:// only, and --gateway ws://127.0.0.1:9/ is ws:// (no TLS, so nothing"
                f" to check): use the Gateway's wss:// URL, or drop {flag}",
            )


async def test_owc_sim_reuses_an_existing_default_token_file(tmp_path: Path) -> None:
    """Before: ``owc sim`` without ``--token-file`` wrote a new token over ``./owc-sim.token``, which an ``owc run``
    started against the previous simulator was reading: that one was locked out. Now an existing file is reused
    (read, never rewritten; its loose mode warned about) and the start line says so; a missing one is made 0600."""
    path = tmp_path / "owc-sim.token"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    args = ("sim", "--port", "0", "--scenario", str(empty), "--exit-after-scenario")
    code, out, err = await _owc(*args, cwd=tmp_path)
    assert code == EXIT_OK and f"token from {path} (new)" in out, err
    made = path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and made.strip() and made.strip() not in out + err
    code, out, err = await _owc(*args, cwd=tmp_path)
    assert code == EXIT_OK, err
    assert f"token from {path} (reused: it was there already; remove it for a new token)" in out
    assert path.read_text() == made
    # The simulator really takes the reused token: owc doctor signs in with that very file.
    path.chmod(0o644)
    async with trio.open_nursery() as nursery:
        sim = await nursery.start(_serve_sim, tmp_path)
        code, out, err = await _owc("doctor", "--gateway", sim, "--token-file", str(path), "--no-device", cwd=tmp_path)
        nursery.cancel_scope.cancel()
    assert code == EXIT_OK and "authenticated: yes" in out, (out, err)
    assert path.read_text() == made


async def _serve_sim(cwd: Path, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """``owc sim --port 0`` with its default token file, until cancelled; started: its URL."""
    process, out = await _started(["sim", "--port", "0"], cwd, " (boot ")
    try:
        task_status.started(out.split("owc sim listening on ", 1)[1].split(" ", 1)[0])
        await trio.sleep_forever()  # timer-ok: serves until the test cancels it
    finally:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


async def test_a_web_page_at_the_gateway_url_is_documented_exit_4_for_doctor(tmp_path: Path) -> None:
    """Issue 24 made the page one line (``test_cli``: 404, and ``owc run``'s one line an attempt); issue 31 asked
    for its exit code to be documented: ``owc doctor`` exits 4 for every problem its status line names, a web
    page at the URL (here 200 OK, a dashboard) among them, and ``owc --help`` says so."""
    from http_page import answer, http_page_server

    from owc.cli import EXIT_REFUSED
    from owc.cli.codes import EPILOG

    token = _token_file(tmp_path)
    async with http_page_server(answer(200, b"OK")) as (port, _):
        gw = f"ws://127.0.0.1:{port}/"
        code, out, err = await _owc("doctor", "--gateway", gw, "--token-file", str(token), "--no-device", cwd=tmp_path)
    assert code == EXIT_REFUSED, (out, err)
    assert out.splitlines()[-1] == (
        "status:        PROBLEM: the Gateway URL answered HTTP 200 OK (not a WebSocket endpoint): check --gateway"
        " / OWC_GATEWAY_URL"
    )
    assert "SECRET-LOOKING" not in out + err and "Traceback" not in err
    assert (
        f"  {EXIT_REFUSED}      the Gateway refused the connection: a wrong token, missing scopes, a protocol"
        " mismatch;\n"
        "         owc doctor: any problem its status line names (unreachable, an HTTP server that is not\n"
        "         the Gateway's WebSocket, a device waiting for approval)\n"
    ) in EPILOG


async def test_owc_sim_scenario_with_db_gives_owc_run_its_chats(tmp_path: Path) -> None:
    """Before: ``owc sim --scenario FILE`` plus ``owc run``: the bare simulator made no chats, so every run of a
    shipped scenario only logged ``runs.claim_failed``. Now ``owc sim --scenario FILE --db URL`` makes the chats in
    Open WebUI's database as Open WebUI does, and the ``owc run`` on that database writes every message: here
    scenarios/agent-turns.jsonl's four (its heartbeat and the sub-agent's own session have none, by design)."""
    db = f"sqlite:///{tmp_path / 'webui.db'}"
    scenario = str(ROOT / "scenarios" / "agent-turns.jsonl")
    sim, out = await _started(
        ["sim", "--port", "0", "--scenario", scenario, "--db", db, "--create-db"], tmp_path, " (boot "
    )
    url = out.split("owc sim listening on ", 1)[1].split(" ", 1)[0]
    args = ["run", "--gateway", url, "--token-file", str(tmp_path / "owc-sim.token"), "--no-device", "--db", db]
    run = await trio.lowlevel.open_process(
        [sys.executable, "-m", "owc", *args], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    err = b""
    try:
        with trio.fail_after(60):
            assert run.stderr is not None
            while err.count(b"runs.finalized") < 4:  # owc's own line for each message it finished
                chunk = await run.stderr.receive_some(65536)
                assert chunk, err.decode()
                err += chunk
    finally:
        run.send_signal(signal.SIGINT)
        sim.send_signal(signal.SIGINT)
    code, rest = await _ended(run)
    assert code == EXIT_OK, rest
    code, sim_err = await _ended(sim)
    assert code == EXIT_OK, sim_err
    log = err.decode() + rest
    assert "runs.claim_failed" not in log and "Traceback" not in log, log
    assert " emit chat=" not in log  # what the tabs would be told is DEBUG: one INFO line a run step, not a tab event
    conn = sqlite3.connect(tmp_path / "webui.db")
    try:
        rows = conn.execute("SELECT content, done FROM chat_message WHERE role = 'assistant'").fetchall()
    finally:
        conn.close()
    assert sorted(rows) == sorted(
        [
            ('"Checking the disks.\\nAll disks are fine."', 1),
            ('"The sub-agent found 42."', 1),
            ('"First of two."', 1),
            ('"Second of two."', 1),
        ]
    )


async def test_owc_sim_db_refuses_ops_that_need_owc_in_its_process(tmp_path: Path) -> None:
    """A scenario that starts owc's own deploys (``connect``) cannot play beside a separate ``owc run``: one line
    naming the line and the command that plays it, exit 2; ``--db`` without ``--scenario`` is a usage error."""
    from owc.cli import EXIT_USAGE

    db = f"sqlite:///{tmp_path / 'webui.db'}"
    scenario = ROOT / "scenarios" / "joined-mid-run.jsonl"
    args = ("sim", "--port", "0", "--token", "x" * 12, "--db", db, "--create-db", "--exit-after-scenario")
    code, _, err = await _owc(*args, "--scenario", str(scenario), cwd=tmp_path)
    line = _one_clear_line(err)
    assert code == EXIT_USAGE and line.startswith(f"owc: {scenario}: scenario failed: line "), err
    assert line.endswith(": connect: needs owc in the same process: play this file with `owc scenario run`"), line
    code, _, err = await _owc(*args, cwd=tmp_path)
    assert (code, _one_clear_line(err)) == (
        EXIT_USAGE,
        "owc: --db goes with --scenario: the scenario's chats are what is made there",
    )


async def test_diagnose_reports_an_unusable_device_folder_without_connecting(tmp_path: Path) -> None:
    """``diagnose`` (owc doctor's report, also used outside the CLI) raised the device folder's error as a
    traceback; now it is the report's problem, and nothing is connected."""
    from owc.gateway import GatewayConfig
    from owc.gateway.doctor import diagnose

    folder = _token_file(tmp_path) / "dev"
    report = await diagnose("ws://127.0.0.1:9/", TOKEN, GatewayConfig(device_dir=folder))
    assert (report.reachable, report.authenticated, report.ok) == (False, False, False)
    assert report.problem == f"device identity {folder}/device.json: Not a directory"
    assert report.lines()[-1] == f"status:        PROBLEM: device identity {folder}/device.json: Not a directory"

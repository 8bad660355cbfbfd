"""Shared test fixtures.

The real Gateway frames live in the workplace's ``shared/reference`` next to the checkout (``../shared``), or
wherever ``OWC_SHARED`` points. Without them the real-data tests skip on a developer's machine and fail in
CI, where a skip would hide that nothing was checked.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]

# Property tests judge what owc does, never how fast: no per-example deadline (Hypothesis's 200 ms default failed
# a fast-path test at load 9, a timed test in disguise). In CI the examples are derandomized, so a run's result
# is the same every time; locally they are drawn afresh, which is how new cases are found.
settings.register_profile("owc", deadline=None, derandomize=bool(os.environ.get("CI")))
settings.load_profile("owc")

#: ``background``: a long, mostly idle test in a pytest process of its own beside the session (tests/background.py).
pytest_plugins = ["background", "pytester"]

#: The shared token the tests' Gateways accept. Every secret a test uses is registered in ``SECRETS`` (with
#: ``secret()``), and the secrets guard fails the test in whose time any of them reached a log record or the
#: test's captured stdout / stderr.
TOKEN = "owc-test-s3cr3t-token-0123456789"
#: The simulator token ``owc demo`` / ``owc scenario run`` use (``owc.sim.play``): a token all the same.
SIM_PLAY_TOKEN = "owc-local-sim-token"
SECRETS: set[str] = {TOKEN, SIM_PLAY_TOKEN}


def secret(value: str) -> str:
    """Register ``value`` as a secret no log line or output of the suite may hold, and return it."""
    assert len(value) >= 8, "a secret this short would match innocent text"
    SECRETS.add(value)
    return value


def leaked(text: str) -> bool:
    return any(s in text for s in SECRETS)


class _SecretsGuard(logging.Handler):
    """A root handler for the whole session (owc at DEBUG): each record is checked as it is emitted, and a
    leak is charged to the test that was running."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records = 0
        self.current: str | None = None
        self.leaks: dict[str | None, list[str]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        self.records += 1
        try:
            text = record.getMessage()
        except Exception:  # a bad format string is the logging call's problem, not a leak
            text = f"{record.msg!r} {record.args!r}"
        if record.exc_info:
            text += logging.Formatter().formatException(record.exc_info)
        if leaked(text):
            self.leaks.setdefault(self.current, []).append(f"{record.name}: {text}")


_GUARD = _SecretsGuard()


def _device_secrets(record: dict[str, Any]) -> None:
    """Register a device identity's private key (as stored, and as hex and padded base64, the forms a careless
    line would print) and its device token, the moment owc writes them."""
    import base64

    from owc import device

    seed = device.b64url_decode(record["ed25519_seed"])
    for form in (record["ed25519_seed"], seed.hex(), base64.b64encode(seed).decode()):
        SECRETS.add(form)
    if record.get("device_token"):
        secret(record["device_token"])


@pytest.fixture(scope="session", autouse=True)
def state_home(tmp_path_factory) -> Iterator[Path]:
    """``owc run`` / ``owc doctor`` keep a device identity in ``$XDG_STATE_HOME/owc`` by default: the suite (and
    every ``owc`` process it starts) uses a folder of its own, never the developer's."""
    folder = tmp_path_factory.mktemp("xdg-state")
    old = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(folder)
    try:
        yield folder
    finally:
        if old is None:
            os.environ.pop("XDG_STATE_HOME", None)
        else:
            os.environ["XDG_STATE_HOME"] = old


@pytest.fixture(scope="session", autouse=True)
def device_secrets_guarded():
    """Every device identity owc stores in this process (its key, the device token a Gateway issued) joins
    ``SECRETS``: the secrets guard then fails any test whose logs or output hold one (issue 15: no token,
    private key or device token in any log, output or error across the suite)."""
    from owc import device

    real = device._record

    def recording(identity: Any) -> dict[str, Any]:
        record = real(identity)
        _device_secrets(record)
        return record

    device._record = recording
    try:
        yield
    finally:
        device._record = real


@pytest.fixture(scope="session", autouse=True)
def token_never_logged(request):
    """Install the secrets guard for the whole suite; at the end, check it saw records at all (else it would
    prove nothing) and that no leak escaped a test (one logged between tests)."""
    root = logging.getLogger()
    owc_logger = logging.getLogger("owc")
    old_level = owc_logger.level
    root.addHandler(_GUARD)
    owc_logger.setLevel(logging.DEBUG)
    try:
        yield _GUARD
    finally:
        root.removeHandler(_GUARD)
        owc_logger.setLevel(old_level)
    if request.session.testscollected >= 400:  # a whole-suite run logs plenty; a file of pure tests logs nothing
        assert _GUARD.records, "no log record was captured: the check would prove nothing"
    stray = _GUARD.leaks.get(None, [])
    assert not stray, f"{len(stray)} log records hold a secret, e.g. {stray[0][:200]!r}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _GUARD.current = item.nodeid
    try:
        yield
    finally:
        _GUARD.current = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Fail the phase of a test whose log records or captured stdout / stderr hold a secret."""
    outcome = yield
    report = outcome.get_result()
    found = _GUARD.leaks.pop(item.nodeid, [])
    # Each phase's report repeats the earlier phases' sections: check only this phase's own.
    found += [name for name, content in report.sections if name.endswith(f" {report.when}") and leaked(content)]
    if not found:
        return
    message = f"a secret reached a log record or the output ({len(found)}x), e.g. {found[0][:300]!r}"
    if report.outcome == "failed":
        report.sections.append(("secrets guard", message))
    else:
        report.outcome = "failed"
        report.longrepr = message


def shared_dir() -> Path | None:
    env = os.environ.get("OWC_SHARED")
    candidate = Path(env) if env else ROOT.parent / "shared"
    return candidate if (candidate / "reference").is_dir() else None


def frames_dir() -> Path:
    shared = shared_dir()
    if shared is None:
        if os.environ.get("CI"):
            pytest.fail("../shared/reference is missing in CI: the real-frame tests cannot run")
        pytest.skip("../shared/reference not found (set OWC_SHARED)")
    return shared / "reference" / "openclaw" / "frames"


def load_log(name: str) -> list[dict[str, Any]]:
    """One frame log: ``{t, conn, dir, frame}`` lines (some logs also hold summary lines without ``frame``)."""
    with open(frames_dir() / name, "rb") as fh:
        return [orjson.loads(line) for line in fh if line.strip()]


FRAME_LOGS = [
    "frames.jsonl",
    "frames_abort.jsonl",
    "frames_auth.jsonl",
    "frames_delivery.jsonl",
    "frames_lifecycle.jsonl",
    "frames_recipe_check.jsonl",
    "frames_stop.jsonl",
    "frames_tool.jsonl",
    "frames_tool_abort.jsonl",
]


@pytest.fixture(scope="session")
def real_gateway_install() -> Any:
    """The real OpenClaw Gateway's installation (Node and openclaw), installed when missing."""
    from realgw.gateway import RealGatewayUnavailable, ensure_installed

    try:
        return ensure_installed()
    except (RealGatewayUnavailable, OSError) as exc:
        _tier_unavailable("the real Gateway", exc)
        raise  # unreachable: skip / fail raise


@pytest.fixture(scope="session")
def real_gateway(real_gateway_install):
    """The real OpenClaw Gateway, offline on loopback, for the ``realgateway`` tier (one per test session)."""
    from realgw.gateway import start

    gateway = start(real_gateway_install)
    SECRETS.add(gateway.token)
    try:
        yield gateway
    finally:
        gateway.stop()


#: The tiers run by one pytest-xdist worker each (the README's ``-n``, ``--dist loadgroup`` in pyproject): the real
#: Gateway is a session-wide process (started once; its cut tests also record what the simulator's must equal), so
#: its tier runs whole in one worker. The Open WebUI server tier starts a server and Chromium per module, so it is
#: two groups (``OWUISERVER_SECOND``): whole in one worker it took 15 min 54 s alone (2 cores 43 % busy: it mostly
#: waits on a browser or a server), the suite's longest path, and the suite 20-25 min. With three groups on the
#: README's three workers (xdist hands out the largest units first), the three run side by side and the fast tests
#: fill the workers as the groups end: 17 min 24 s, all passed (load 7-9 while the groups ran).
XDIST_GROUPS = {"realgateway": "realgw", "owuiserver": "owuiserver"}
#: The Open WebUI server modules of the second group, chosen by their measured times alone (``--durations``,
#: quiet machine): ``test_owui_w`` 312 s, ``_status`` 78 s, ``_status_view`` 42 s, ``_settings`` 38 s (470 s),
#: against the rest's 475 s.
OWUISERVER_SECOND = frozenset(
    {"test_owui_w.py", "test_owui_w_status.py", "test_owui_w_status_view.py", "test_owui_w_settings.py"}
)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        if "postgres_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)
        if any(item.get_closest_marker(tier) for tier in ("realgateway", "owui", "owuiserver")):
            # The per-test limit (pyproject: a hung resync or Stop fails instead of hanging CI) counts fixture
            # set-up, and these tiers install Node, openclaw or Open WebUI on first use.
            item.add_marker(pytest.mark.timeout(1800))
        for tier, group in XDIST_GROUPS.items():
            if item.get_closest_marker(tier):
                if tier == "owuiserver" and item.path.name in OWUISERVER_SECOND:
                    group += "-2"
                item.add_marker(pytest.mark.xdist_group(group))
                break
    # A module holding a ``background`` test (tests/background.py) runs last, so the rest of its tier runs while the
    # test's child waits out its drain; the module's own order stays (a test after it reads what it recorded).
    late = {item.module for item in items if item.get_closest_marker("background") is not None}
    if late:
        items.sort(key=lambda item: item.module in late)


@pytest.fixture
def clock(mock_clock, request):
    """Trio's clock for run tests: it never moves by itself (after 5 s of real idleness it jumps, so a test
    that waited on a timer fails on this check instead of hanging), and when the test is over it must have
    spent exactly the virtual seconds it declares with ``@pytest.mark.virtual_seconds(n)`` (default 0): a
    whole agent turn takes no time, and only the transport's own timers (a reconnect's backoff) may add any.
    (A sync fixture, so pytest-trio sees the clock; a ``MockClock`` starts at 0 and can be read after the run.)"""
    mock_clock.autojump_threshold = 5
    marker = request.node.get_closest_marker("virtual_seconds")
    allowed = marker.args[0] if marker else 0
    yield mock_clock
    elapsed = mock_clock.current_time()
    assert elapsed == allowed, (
        f"the test spent {elapsed:g} virtual seconds, not {allowed:g}: something waited on a clock"
    )


_POSTGRES: dict[str, object] = {}


def _postgres() -> str:
    """The session's PostgreSQL server (``tests/pgserver.py``), started on first use and stopped when the
    session ends; skipped without one, except in CI."""
    import pgserver

    if "error" in _POSTGRES:
        pytest.skip(str(_POSTGRES["error"]))
    if "server" not in _POSTGRES:
        try:
            _POSTGRES["server"] = pgserver.start_postgres()
        except pgserver.PostgresUnavailable as exc:
            if os.environ.get("CI"):
                pytest.fail(f"PostgreSQL is not installed in CI: {exc}")
            _POSTGRES["error"] = exc
            pytest.skip(str(exc))
    return _POSTGRES["server"].url  # type: ignore[attr-defined]


def pytest_sessionfinish(session, exitstatus):
    server = _POSTGRES.pop("server", None)
    if server is not None:
        server.stop()  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """A real PostgreSQL server for the session; skipped without one, except in CI."""
    return _postgres()


def _postgres_database(name: str) -> str:
    """A database of its own in the session's PostgreSQL cluster (created once): run tests make owc's embedded
    tables there, and must not leave them where the Open WebUI tier runs Open WebUI's own migrations."""
    import psycopg

    base = _postgres()
    url = base.rsplit("/", 1)[0] + f"/{name}"
    if url not in _POSTGRES:
        with psycopg.connect(base.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{name}"')
        _POSTGRES[url] = True
    return url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request) -> str | None:
    """Both databases owc supports: ``None`` (the test's own SQLite file) or a PostgreSQL database of the run
    tests' own."""
    return _postgres_database("owc_runs") if request.param == "postgres" else None


def _tier_unavailable(what: str, exc: Exception) -> None:
    """A tier's requirement could not be installed: skipped here, a failure in CI (a skip would hide that nothing
    was checked)."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} could not be installed in CI: {exc}")
    pytest.skip(f"{what} unavailable: {exc}")


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A throwaway Redis server (``tests/redisserver.py``) for Open WebUI's ``WEBSOCKET_MANAGER=redis``."""
    from redisserver import RedisUnavailable, running_redis

    try:
        with running_redis(tmp_path / "redis") as server:
            yield server.url
    except RedisUnavailable as exc:
        _tier_unavailable("a Redis server", exc)


@pytest.fixture(scope="session")
def server_venv() -> Path:
    """The W tier's cached venv of the real Open WebUI server (``tests/owui/server.py``), built on first use."""
    from owui.server import ADMIN_PASSWORD, WEBUI_SECRET_KEY, ServerUnavailable, ensure_server_venv

    secret(ADMIN_PASSWORD)
    secret(WEBUI_SECRET_KEY)
    try:
        return ensure_server_venv()
    except ServerUnavailable as exc:
        _tier_unavailable("the Open WebUI server venv", exc)
        raise  # unreachable: skip / fail raise


@pytest.fixture(scope="session")
def browser_install() -> Any:
    """Debian's Chromium and Playwright for the W tier (``tests/owui/browser.py``), installed when missing."""
    from owui.browser import BrowserUnavailable, ensure_browser

    try:
        return ensure_browser()
    except BrowserUnavailable as exc:
        _tier_unavailable("Chromium / Playwright", exc)
        raise

"""Tier W: a real headless Chromium, driven by Playwright, looking at the real Open WebUI server (``server.py``).

Why these choices:

* The browser is Debian's ``chromium`` package (apt), not a Playwright browser build: only the package registries
  are reachable here, and ``playwright install`` downloads from a CDN. Playwright's Python wheel bundles its Node
  driver and downloads nothing by itself, so ``pip install playwright`` is enough, and Playwright is pointed at the
  package's real binary ``/usr/lib/chromium/chromium`` (``/usr/bin/chromium`` is a shell wrapper that adds flags).
* The sync API: a scenario reads top to bottom (log in, open a chat, wait for a text, click Stop), and it runs in a
  plain (non-Trio) test function. Playwright's sync API runs its own asyncio loop in the calling thread, so call it
  from a sync test, or from a worker thread of a Trio test (``trio.to_thread.run_sync``), never directly from a
  Trio task.
* Waits are on ``load`` plus selectors / texts: ``networkidle`` never settles on a chat page, which keeps a
  websocket open.

:func:`ensure_browser` installs what is missing (apt for chromium + fonts, pip for playwright into this
interpreter) under a ``flock``, with bounded timeouts, raising :class:`BrowserUnavailable` with the reason.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tierlock

if TYPE_CHECKING:  # imported lazily: playwright may not be installed yet when this module is imported
    from playwright.sync_api import Browser as PwBrowser
    from playwright.sync_api import BrowserContext, Page, Playwright

#: The Debian package's real browser binary (not the ``/usr/bin/chromium`` wrapper script).
CHROMIUM = Path("/usr/lib/chromium/chromium")
APT_PACKAGES = ["chromium", "fonts-liberation"]
#: Playwright from PyPI; its wheel carries the Node driver, and no browser is downloaded (we use Debian's).
PLAYWRIGHT_REQUIREMENT = "playwright>=1.50"
CHROMIUM_ARGS = [
    "--no-sandbox",  # root in a container: the setuid/namespace sandbox is unavailable
    "--disable-gpu",
    "--disable-dev-shm-usage",  # small /dev/shm in containers
    "--no-first-run",
    "--disable-background-networking",  # no calls home: nothing but loopback is reachable anyway
    "--disable-component-update",
    "--disable-sync",
]
APT_TIMEOUT_S = 600
PIP_TIMEOUT_S = 600
LOCK_TIMEOUT_S = 2 * APT_TIMEOUT_S + PIP_TIMEOUT_S + 60
LOCK_POLL_S = 1.0
#: Playwright's default per-action timeout for pages made here (ms): a real server on a loaded 2-core box.
DEFAULT_TIMEOUT_MS = 30_000
VIEWPORT = {"width": 1280, "height": 900}

#: Selectors in Open WebUI 0.12.4's frontend (its Svelte sources, carried in the wheel's sourcemaps).
SEL_EMAIL = "input[type=email]"
SEL_PASSWORD = "input[type=password]"
SEL_SUBMIT = "button[type=submit]"
SEL_WHATS_NEW_OK = "text=Okay, Let's Go!"  # the "What's New" modal after a login (ChangelogModal.svelte)
#: How long to look for "What's New" once the composer shows (it comes within a render flush when due).
WHATS_NEW_WAIT_MS = 3_000
SEL_COMPOSER = "#chat-input"
SEL_STOP = 'button[aria-label="Stop"]'  # MessageInput.svelte: shown while the tab's tail reply is not done
SEL_SEND_NOW = 'button[aria-label="Send now"]'  # QueuedMessageItem.svelte: a queued message's "send now"
#: One assistant reply (ResponseMessage.svelte): ``#message-<id>`` > ``.chat-assistant`` >
#: ``#response-content-container``.
SEL_ASSISTANT = ".chat-assistant"
SEL_ASSISTANT_CONTENT = ".chat-assistant #response-content-container"


def _playwright_timeout() -> type[Exception]:
    from playwright.sync_api import TimeoutError as PwTimeout

    return PwTimeout


class BrowserUnavailable(RuntimeError):
    """Chromium or Playwright is missing and could not be installed (the message says which, and why)."""


@dataclass
class BrowserInstall:
    """What :func:`ensure_browser` found or installed, and how long each install step took (0 when present)."""

    chromium: Path
    chromium_version: str
    playwright_version: str
    timings: dict[str, float] = field(default_factory=dict)


def _run(cmd: list[str], timeout: float, what: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise BrowserUnavailable(f"{what} timed out after {timeout} s: {cmd}") from exc
    except OSError as exc:
        raise BrowserUnavailable(f"{what} could not start: {exc}") from exc
    if out.returncode != 0:
        raise BrowserUnavailable(f"{what} failed (exit {out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    return out


def _playwright_version() -> str | None:
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("playwright")
    except PackageNotFoundError:
        return None


def _fonts_present() -> bool:
    return any(Path("/usr/share/fonts/truetype/liberation").glob("*.ttf"))


def _apt_install() -> None:
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise BrowserUnavailable(
            f"{CHROMIUM} (or fonts-liberation) is missing and this is not root with apt-get: install them with"
            f" `apt-get install -y --no-install-recommends {' '.join(APT_PACKAGES)}`"
        )
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *APT_PACKAGES]
    try:
        _run(install, APT_TIMEOUT_S, "apt-get install chromium")
    except BrowserUnavailable:
        # The package lists may be missing or stale (a fresh machine): refresh once and retry.
        _run(["apt-get", "update", "-qq"], APT_TIMEOUT_S, "apt-get update")
        _run(install, APT_TIMEOUT_S, "apt-get install chromium")


def _lock_path() -> Path:
    cache = Path(os.environ.get("OWC_BROWSER_LOCK_DIR") or Path.home() / ".cache" / "owc")
    cache.mkdir(parents=True, exist_ok=True)
    return cache / "browser-install.lock"


def ensure_browser() -> BrowserInstall:
    """Chromium (apt) and Playwright (pip, into this interpreter) present, installing only what is missing.

    Under an exclusive ``flock`` (two test sessions must not run apt or pip at once), each step bounded.
    """
    timings: dict[str, float] = {}
    if not (CHROMIUM.exists() and _fonts_present() and _playwright_version()):
        with tierlock.held(_lock_path(), timeout=LOCK_TIMEOUT_S, poll=LOCK_POLL_S, fail=BrowserUnavailable):
            if not (CHROMIUM.exists() and _fonts_present()):
                t = time.monotonic()
                _apt_install()
                timings["apt_s"] = round(time.monotonic() - t, 2)
                if not CHROMIUM.exists():
                    raise BrowserUnavailable(f"apt-get installed {APT_PACKAGES} but {CHROMIUM} is not there")
            if not _playwright_version():
                t = time.monotonic()
                _run(
                    [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
                     "--progress-bar", "off", PLAYWRIGHT_REQUIREMENT],
                    PIP_TIMEOUT_S,
                    f"pip install {PLAYWRIGHT_REQUIREMENT}",
                )  # fmt: skip
                importlib.invalidate_caches()
                timings["pip_playwright_s"] = round(time.monotonic() - t, 2)
    version = _run([str(CHROMIUM), "--version"], 60, "chromium --version").stdout.strip()
    playwright = _playwright_version()
    if not playwright:
        raise BrowserUnavailable("playwright was installed but is not importable from this interpreter")
    return BrowserInstall(CHROMIUM, version, playwright, timings)


def screenshots_dir(tmp_path: Path) -> Path:
    """``$OWC_SCREENSHOTS`` if set (e.g. kept by CI as an artifact), else ``tmp_path/screenshots``."""
    folder = Path(os.environ.get("OWC_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class OwuiPage:
    """One tab on the Open WebUI server: the handful of actions a scenario needs, by the frontend's own selectors.

    ``page`` is the Playwright page, for anything not wrapped here.
    """

    def __init__(self, page: Page, base_url: str, shots: Path) -> None:
        self.page = page
        self.base_url = base_url.rstrip("/")
        self.shots = shots
        #: True once "What's New" was dismissed or found absent (see :meth:`_settle_changelog`).
        self.changelog_settled = False

    def goto(self, path: str = "/") -> None:
        self.page.goto(self.base_url + path, wait_until="load")

    def login(self, email: str, password: str) -> bool:
        """Sign in through the real form and wait for the home page's composer; then dismiss the "What's New"
        modal if it shows. Returns whether it did (it does for an admin once per version)."""
        self.goto("/auth")
        self.page.locator(SEL_EMAIL).fill(email)
        self.page.locator(SEL_PASSWORD).fill(password)
        self.page.locator(SEL_SUBMIT).click()
        self.page.locator(SEL_COMPOSER).wait_for(state="visible")
        return self._settle_changelog()

    def sign_in_with_token(self, token: str) -> bool:
        """Sign in as the holder of ``token`` (a session token from Open WebUI's sign-in API) the way the page keeps
        a session: in its ``localStorage``. Open WebUI limits form sign-ins to 15 per 3 minutes per email
        (``routers/auths.py:95``); a tier with more tabs than that signs the rest in this way."""
        # Set before any of the page's own scripts run, on every load of this tab's context: setting it from a
        # loaded /auth page raced the page's own start (it timed out in CI now and then).
        self.page.context.add_init_script(f"window.localStorage.setItem('token', {json.dumps(token)});")
        self.goto("/")
        self.page.locator(SEL_COMPOSER).wait_for(state="visible")
        return self._settle_changelog()

    def _settle_changelog(self) -> bool:
        """The (app) layout decides whether to show "What's New" (an admin whose ``settings.version`` is not the
        server's) BEFORE it renders the page, so once the composer is visible the modal is either up or comes
        within a render flush: a short bounded look settles it. Clicking "Okay, Let's Go!" saves the version to
        the user's settings before the modal closes, so it never shows again for this user: checked once per
        page object (it would otherwise come back on every full page load, e.g. :meth:`open_chat`)."""
        if self.changelog_settled:
            return False
        ok = self.page.locator(SEL_WHATS_NEW_OK)
        try:
            ok.wait_for(state="visible", timeout=WHATS_NEW_WAIT_MS)
        except _playwright_timeout():
            self.changelog_settled = True
            return False
        ok.click()
        ok.wait_for(state="hidden")  # the modal closes only after the settings update was answered
        self.changelog_settled = True
        return True

    def open_chat(self, chat_id: str) -> None:
        """Load ``/c/<id>`` and wait for the composer (the chat's messages render with it)."""
        self.goto(f"/c/{chat_id}")
        self.page.locator(SEL_COMPOSER).wait_for(state="visible")
        self._settle_changelog()

    def assistant_texts(self) -> list[str]:
        """The visible text of every assistant reply's content, top to bottom."""
        return [t.strip() for t in self.page.locator(SEL_ASSISTANT_CONTENT).all_inner_texts()]

    def assistant_text(self, message_id: str) -> str:
        """The visible text of one reply, by its message id."""
        return self.page.locator(f'[id="message-{message_id}"] #response-content-container').inner_text().strip()

    def wait_for_text(self, text: str | re.Pattern[str], timeout_ms: float | None = None) -> None:
        """Wait until ``text`` (substring, or a regex) is visible anywhere on the page."""
        self.page.get_by_text(text).first.wait_for(state="visible", timeout=timeout_ms)

    def wait_for_assistant_text(self, text: str, timeout_ms: float | None = None) -> None:
        """Wait until some assistant reply's visible content contains ``text``."""
        self.page.locator(SEL_ASSISTANT_CONTENT).filter(has_text=text).first.wait_for(
            state="visible", timeout=timeout_ms
        )

    def stop_visible(self) -> bool:
        return self.page.locator(SEL_STOP).is_visible()

    def click_stop(self, timeout_ms: float | None = None) -> None:
        """Click the composer's Stop button (waits for it to show; it does while the tail reply is not done)."""
        stop = self.page.locator(SEL_STOP)
        stop.wait_for(state="visible", timeout=timeout_ms)
        stop.click()

    def another_tab(self) -> OwuiPage:
        """A new tab in this tab's browser (signed in already: same cookies and storage), as a person opens one."""
        return OwuiPage(self.page.context.new_page(), self.base_url, self.shots)

    def send_message(self, text: str) -> None:
        """Type ``text`` into the composer and press Enter (a new turn; queued instead while generating)."""
        composer = self.page.locator(SEL_COMPOSER)
        composer.click()
        composer.type(text)
        composer.press("Enter")

    def new_chat_with(self, model_id: str, text: str, timeout_ms: float | None = None, *, navigate: bool = True) -> str:
        """Open a new chat on ``model_id`` (``/?model=...``; ``navigate=False``: the tab is there already, files
        attached), send ``text``; returns the chat id from the URL."""
        if navigate:
            self.goto(f"/?model={model_id}")
        self.page.locator(SEL_COMPOSER).wait_for(state="visible", timeout=timeout_ms)
        self._settle_changelog()
        self.send_message(text)
        self.page.wait_for_url(re.compile(r".*/c/[0-9a-f-]{36}"), timeout=timeout_ms)
        return self.page.url.rstrip("/").rsplit("/", 1)[-1]

    def queue_message(self, text: str, timeout_ms: float | None = None) -> None:
        """Type ``text`` into the composer and press Enter while the tab is generating: the page queues it (its
        default) and shows it above the composer with a "Send now" button."""
        composer = self.page.locator(SEL_COMPOSER)
        composer.click()
        composer.type(text)
        composer.press("Enter")
        self.page.locator(SEL_SEND_NOW).first.wait_for(state="visible", timeout=timeout_ms)

    def click_send_now(self, timeout_ms: float | None = None) -> None:
        """Click "Send now" on the first queued message."""
        button = self.page.locator(SEL_SEND_NOW).first
        button.wait_for(state="visible", timeout=timeout_ms)
        button.click()

    def wait_for_intent_hook(self, timeout_ms: float | None = None) -> None:
        """Until owc's page intent hook is installed in this tab (``owc/owui/intent_hook.py``)."""
        from owc.owui.intent_hook import GLOBAL

        self.page.wait_for_function(f"() => !!window[{GLOBAL!r}]", timeout=timeout_ms)

    def screenshot(self, name: str) -> Path:
        """Save a full-page PNG as ``<shots>/<name>.png`` (the name sanitised) and return its path."""
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "shot"
        path = self.shots / f"{safe}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


class Browser:
    """A running headless Chromium (one per test is cheap: launch ~0.7 s); ``new_page`` opens isolated tabs.

    Each ``new_page`` gets its own browser context (own cookies / localStorage), so two pages are two users'
    (or one user's two devices') tabs. Close with :meth:`close` or use as a context manager.
    """

    def __init__(self, shots: Path) -> None:
        self.shots = shots
        self.launch_s = 0.0
        self._pw: Playwright | None = None
        self._browser: PwBrowser | None = None
        self._contexts: list[BrowserContext] = []

    def launch(self) -> Browser:
        from playwright.sync_api import sync_playwright

        t = time.monotonic()
        self._pw = sync_playwright().start()
        try:
            self._browser = self._pw.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS, timeout=60_000
            )
        except BaseException:
            self._pw.stop()
            self._pw = None
            raise
        self.launch_s = round(time.monotonic() - t, 3)
        return self

    def new_page(self, base_url: str, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> OwuiPage:
        assert self._browser is not None, "launch() first"
        context = self._browser.new_context(viewport=VIEWPORT, base_url=base_url)  # type: ignore[arg-type]
        context.set_default_timeout(timeout_ms)
        self._contexts.append(context)
        return OwuiPage(context.new_page(), base_url, self.shots)

    def blank_page(self, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> Page:
        """A bare Playwright page in its own context (no Open WebUI): for a test that serves its own page."""
        assert self._browser is not None, "launch() first"
        context = self._browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
        context.set_default_timeout(timeout_ms)
        self._contexts.append(context)
        return context.new_page()

    def close(self) -> None:
        for context in self._contexts:
            with contextlib.suppress(Exception):
                context.close()
        self._contexts.clear()
        if self._browser is not None:
            with contextlib.suppress(Exception):
                self._browser.close()
            self._browser = None
        if self._pw is not None:
            with contextlib.suppress(Exception):
                self._pw.stop()
            self._pw = None

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@contextlib.contextmanager
def running_browser(tmp_path: Path) -> Iterator[Browser]:
    """:func:`ensure_browser`, then a launched :class:`Browser` saving screenshots to :func:`screenshots_dir`."""
    ensure_browser()
    browser = Browser(screenshots_dir(tmp_path)).launch()
    try:
        yield browser
    finally:
        browser.close()

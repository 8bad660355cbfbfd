"""Tier W, issue 28: the files an agent makes, as a person sees them. The real Open WebUI 0.12.4 server with owc
installed, the simulator as the Gateway (delivering files as the real 2026.9.6 does, ``tests/test_sim_media.py``),
headless Chromium as the person.

A person sends a message; the agent answers with text, a PNG, a PDF and a page the Gateway refuses. The person
sees the image inline (loaded from Open WebUI's own file storage), the PDF as a file chip with its name, the refusal
named in the reply's status history, and no ``MEDIA:`` text; after a reload and in a second tab, the same. The files
are in Open WebUI's storage, owned by the chat's user, with the Gateway's bytes. Screenshots go to
``$OWC_SCREENSHOTS`` (else the test's tmp dir)."""

from __future__ import annotations

import struct
import urllib.request
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from test_owui_w import (
    MODEL,
    WAIT_S,
    assistant_messages,
    one_server,
    open_page,
    simulated_gateway,
    wait_until,
)

from owc.sim.script import End, Media, Text, fake_model_responder

from owui.simthread import call

pytestmark = [pytest.mark.owuiserver, pytest.mark.timeout(1800)]

MS = WAIT_S * 1000
WORDS = "MEDIA_PLEASE make me a chart"
SAID = "Here is your chart and the report."
REFUSAL = "page.html was not delivered: the Gateway does not deliver files of this type."
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


def png(width: int, height: int, rgb: tuple[int, int, int] = (30, 120, 220)) -> bytes:
    """A real PNG of one colour, which a browser decodes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    row = b"\x00" + bytes(rgb) * width
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(row * height)) + chunk(b"IEND", b"")
    )


CHART = png(64, 48)


def responder(key: str, words: str) -> Any:
    """The agent: files for ``MEDIA_PLEASE``, the fake model's answer for anything else (Open WebUI's own tasks)."""
    if "MEDIA_PLEASE" not in words:
        return fake_model_responder(key, words)
    return [
        Text(SAID),
        Media("chart.png", "image/png", CHART),
        Media("report.pdf", "application/pdf", PDF),
        Media("page.html", "text/html", refused="unsupported-format"),
        End(),
    ]


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[Any, Any]]:
    def prepare(simulator: Any) -> None:
        simulator.responder = responder

    with simulated_gateway(prepare) as pair:
        yield pair


@pytest.fixture(scope="module")
def deployment(gateway, server_venv, browser_install, tmp_path_factory) -> Iterator[dict[str, Any]]:
    with one_server(gateway, tmp_path_factory.mktemp("owui-w-media")) as deployed:
        yield deployed


@pytest.fixture
def browser(deployment, tmp_path) -> Iterator[Any]:
    from owui.browser import running_browser

    with running_browser(tmp_path) as b:
        yield b


def _with_files(admin: Any, chat_id: str) -> dict[str, Any] | None:
    """The chat's one finished reply once it holds both files and the refusal (None until then)."""
    replies = assistant_messages(admin, chat_id)
    assert len(replies) <= 1, replies
    reply = next(iter(replies.values()), None)
    if reply is None or reply.get("done") is not True or len(reply.get("files") or []) < 2:
        return None
    notes = [s.get("description") for s in reply.get("statusHistory") or [] if s.get("action") == "openclaw_file"]
    return reply if REFUSAL in notes else None


def _content(deployment: dict[str, Any], file_id: str) -> bytes:
    """The file's bytes from Open WebUI, as the chat's user (the admin here) asks for them."""
    admin = deployment["admin"]
    req = urllib.request.Request(f"{deployment['server'].base_url}/api/v1/files/{file_id}/content")
    req.add_header("Authorization", f"Bearer {admin.token}")
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.read()


def _sees_the_files(page: Any, image_id: str, label: str) -> None:
    """What a person sees of the reply: the image shown inline and loaded from Open WebUI's storage, the PDF's
    chip with its name, the refusal in the status history, no ``MEDIA:`` text."""
    page.wait_for_assistant_text(SAID, timeout_ms=MS)
    image = page.page.locator(f'img[src*="/api/v1/files/{image_id}/content"]').first
    image.wait_for(state="visible", timeout=MS)
    page.page.wait_for_function(
        "(sel) => { const i = document.querySelector(sel); return i && i.complete && i.naturalWidth > 0; }",
        arg=f'img[src*="/api/v1/files/{image_id}/content"]',
        timeout=MS,
    )
    assert image.evaluate("i => [i.naturalWidth, i.naturalHeight]") == [64, 48]
    page.page.get_by_text("report.pdf").first.wait_for(state="visible", timeout=MS)
    refusal = page.page.get_by_text(REFUSAL)
    if not refusal.first.is_visible():
        # The status line shows the newest entry; a click on it unfolds the history.
        page.page.locator("button:has(.status-description), .status-description").first.click()
    refusal.first.wait_for(state="visible", timeout=MS)
    page.screenshot(label)
    assert "MEDIA:" not in page.page.locator("#messages-container").inner_text()


def test_an_agents_image_pdf_and_refused_page_as_a_person_sees_them(deployment, browser) -> None:
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    page = open_page(browser, deployment)
    chat_id = page.new_chat_with(MODEL, WORDS, timeout_ms=MS)
    reply = wait_until(lambda: _with_files(admin, chat_id), "the reply with its files")
    files = reply["files"]
    assert [(f["type"], f["name"]) for f in files] == [("image", "chart.png"), ("file", "report.pdf")]
    image_id, pdf_id = files[0]["id"], files[1]["id"]
    assert "MEDIA:" not in reply["content"] and reply["content"].startswith(SAID)
    _sees_the_files(page, image_id, "media-first-tab")
    # Reloaded: all still there, the image loaded again from Open WebUI's storage.
    page.page.reload(wait_until="load")
    _sees_the_files(page, image_id, "media-after-reload")
    second = page.another_tab()
    second.open_chat(chat_id)
    _sees_the_files(second, image_id, "media-second-tab")
    # In Open WebUI's storage, owned by the chat's user, with the Gateway's bytes.
    for file_id, data in ((image_id, CHART), (pdf_id, PDF)):
        meta = admin.get(f"/api/v1/files/{file_id}")
        assert meta["user_id"] == admin.user_id
        assert _content(deployment, file_id) == data
    assert call(token, lambda: [s for _, s in sim.media.served]) == [200, 200]

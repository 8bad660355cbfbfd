"""Real Gateway tier: the files an agent makes reach its message (issue 28).

The fake model answers ``SEND_MEDIA <names>`` with standalone ``MEDIA:<name>`` lines, as an agent does; the real
2026.9.6 Gateway checks each file, copies it into its managed media and rewrites the transcript message after the
run's final (``docs/measured/media-2026.9.6.md``). owc takes exactly the blocks the Gateway delivered: the bytes
it stores are the workspace file's (sha256), the refused ones are named in M, and a ``MEDIA:`` line naming a path
outside (``../../etc/passwd``) opens nothing: no file, no block, nothing of it stored."""

from __future__ import annotations

import hashlib
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from owc import ids
from owc.emit import RecordingEmitter
from owc.emit.files import RecordingFiles
from owc.gateway import GatewayConfig
from owc.runtime import RuntimeConfig, open_runtime
from owc.store import open_store

from rawclient import raw_client
from realgw.probe_media import png

pytestmark = pytest.mark.realgateway

PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


async def _turn(
    real_gateway: Any, tmp_path: Path, words: str
) -> tuple[dict[str, Any], RecordingFiles, RecordingEmitter]:
    """One agent turn on a chat's key (another client's ``chat.send``), owc writing its message; returns M once the
    media desk has taken every file the Gateway delivered, the stored files and the tab events."""
    user, chat_id, run_id = "u-media", str(uuid.uuid4()), str(uuid.uuid4())
    key = ids.session_key("main", user, chat_id)
    config = RuntimeConfig(url=real_gateway.url, token=real_gateway.token, gateway=GatewayConfig(instance_id="owc"))
    files, emitter = RecordingFiles(), RecordingEmitter()
    message_id = ids.message_id(key, run_id)
    async with open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store:
        await store.create_chat(chat_id, user)

        async def message() -> dict[str, Any]:
            return (await store.read_chat(chat_id))["history"]["messages"].get(message_id) or {}

        with trio.fail_after(180):
            async with open_runtime(config, store, emitter, files=files) as runtime:
                await runtime.connected()
                async with raw_client(real_gateway.url, real_gateway.token, caps=(), instance_id="cron-ish") as other:
                    sent = await other.request(
                        "chat.send", {"sessionKey": key, "message": words, "idempotencyKey": run_id}
                    )
                    assert sent.ok, sent.error
                    await runtime.keeper.until(lambda: runtime.keeper.totals()[1] >= 1)
                    media = runtime.keeper.media
                    # The rewrite that carries the files comes after the final, with its own push: the desk looks
                    # once per push; done when the Gateway's transcript holds blocks and the desk took them all.
                    while True:  # pragma: no branch
                        history = (await other.request("chat.history", {"sessionKey": key, "limit": 20})).payload
                        blocks = [
                            p
                            for m in history["messages"]
                            if m.get("role") == "assistant"
                            for p in m.get("content") or []
                            if isinstance(p, dict) and p.get("type") in ("image", "attachment", "attachment_error")
                        ]
                        got = await message()
                        if blocks and len(got.get("files") or []) + len(
                            [s for s in got.get("statusHistory") or [] if s.get("action") == "openclaw_file"]
                        ) >= len(blocks):
                            break
                        await media.until(partial(lambda seen: media.looks > seen, media.looks))
        return await message(), files, emitter


async def test_delivered_files_are_stored_and_shown_refused_ones_named_and_no_path_opened(
    real_gateway, tmp_path: Path
) -> None:
    workspace = real_gateway.home / "workspace"
    chart = png(64, 48)
    (workspace / "chart.png").write_bytes(chart)
    (workspace / "report.pdf").write_bytes(PDF)
    (workspace / "page.html").write_text("<script>alert(1)</script>")
    message, files, emitter = await _turn(
        real_gateway, tmp_path, "SEND_MEDIA chart.png report.pdf page.html ../../etc/passwd"
    )
    entries = message["files"]
    assert [(e["type"], e["name"], e["content_type"]) for e in entries] == [
        ("image", "chart.png", "image/png"),
        ("file", "report.pdf", "application/pdf"),
    ]
    stored = {fid: meta for fid, meta in files.files.items()}
    by_name = {meta[1]: (fid, meta) for fid, meta in stored.items()}
    assert set(by_name) == {"chart.png", "report.pdf"}  # nothing of /etc/passwd, nothing of the refused page
    assert by_name["chart.png"][1][3] == hashlib.sha256(chart).hexdigest()  # the Gateway's bytes are the file's
    assert by_name["report.pdf"][1][3] == hashlib.sha256(PDF).hexdigest()
    assert all(meta[0] == "u-media" for meta in stored.values())  # owned by the chat's user
    for entry in entries:
        assert entry["url"] == f"/api/v1/files/{entry['id']}/content"
        assert entry["openclaw_artifact"].startswith("artifact_managed_")
    notes = [s["description"] for s in message["statusHistory"] if s.get("action") == "openclaw_file"]
    assert notes == ["page.html was not delivered: the Gateway does not deliver files of this type."]
    assert "MEDIA:" not in message["content"] and "passwd" not in str(entries)
    assert message["content"].startswith("Here are your files.")
    # The tabs were told the files (every tab and the shared room: Open WebUI's ``files`` event).
    told = [e for e in emitter.events if e.event.get("type") == "files"]
    assert told and told[-1].event["data"]["files"] == entries


async def test_a_reply_that_is_only_a_file_is_that_file_without_an_empty_note(real_gateway, tmp_path: Path) -> None:
    workspace = real_gateway.home / "workspace"
    (workspace / "only.png").write_bytes(png(8, 8, (10, 200, 10)))
    message, _, _ = await _turn(real_gateway, tmp_path, "SEND_MEDIA_ONLY only.png")
    assert [e["name"] for e in message["files"]] == ["only.png"]
    assert message["content"] == ""
    assert not message.get("error"), message.get("error")  # no "nothing was saved" note on an image-only reply

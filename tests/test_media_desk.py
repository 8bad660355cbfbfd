"""The media desk (``owc.runs.media``): a finished run's files from its transcript into M, again at each rewrite
push; what cannot be kept named in M; a failure that may pass tried again at the next look; nothing twice. And the
Gateway side (``GatewayMedia``): owc's policy decides before any byte is asked for, a ticket URL outside the
Gateway's download routes is never fetched, a dropped connection is a failure that passes.

The store is real SQLite with Open WebUI's schema; the file storage records (``RecordingFiles``: Open WebUI's own is
the browser tier's, ``tests/test_owui_w_media.py``); ``fetch`` and ``request`` are the desk's ports, played here by
functions that answer as the Gateway does (``tests/test_realgw_media.py`` runs the real ones)."""

from __future__ import annotations

import base64
import types
from pathlib import Path
from typing import Any

import pytest
import trio

from owc.emit import RecordingEmitter
from owc.emit.files import RecordingFiles
from owc.gateway import GatewayConfig, RequestError, SessionClosed
from owc.ids import SessionRef
from owc.protocol import parse_chat_history
from owc.protocol.errors import ErrorShape
from owc.protocol.media import DeliveredFile
from owc.runs.media import Fetched, GatewayMedia, MediaDesk, NotFetched
from owc.store import open_store

KEY = "agent:main:openwebui-u1-c1"
IMG = "artifact_managed_image_11111111-2222-3333-4444-555555555555"
DOC = "artifact_managed_media_66666666-7777-8888-9999-000000000000"
PNG = b"\x89PNG\r\n\x1a\n" + b"x" * 20


def _history(run_id: str, *blocks: dict[str, Any]) -> Any:
    return parse_chat_history(
        {
            "sessionKey": KEY,
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "Here."}, *blocks],
                    "__openclaw": {"runId": run_id, "id": "a1", "seq": 2},
                },
            ],
        }
    )


def _image(
    artifact: str = IMG, size: int = len(PNG), mime: str = "image/png", alt: str = "chart.png"
) -> dict[str, Any]:
    return {"type": "image", "artifactId": artifact, "url": "/x", "alt": alt, "mimeType": mime, "sizeBytes": size}


DOC_BLOCK = {
    "type": "attachment",
    "attachment": {
        "artifactId": DOC,
        "url": "/x",
        "kind": "document",
        "label": "report.pdf",
        "mimeType": "application/pdf",
        "sizeBytes": 4,
    },
}
REFUSED = {"type": "attachment_error", "attachment": {"code": "file-not-found", "kind": "image", "label": "gone.png"}}


class _Run:
    """What the desk reads of a finished run."""

    def __init__(self, run_id: str) -> None:
        self.session_key, self.run_id, self.message_id = KEY, run_id, "m1"
        self.ref = SessionRef("main", "u1", "c1")
        self.renderer = types.SimpleNamespace(media_announced=False)  # the stream named no file


@pytest.fixture
async def setup(tmp_path: Path, nursery: trio.Nursery) -> Any:
    async with open_store(f"sqlite:///{tmp_path / 'db.sqlite'}", create=True) as store:
        await store.create_chat("c1", "u1")
        await store.add_turn("c1", "um", "m1", text="hi")
        emitter, files = RecordingEmitter(), RecordingFiles()
        answers: dict[str, Any] = {}
        calls: list[str] = []

        async def fetch(session_key: str, item: DeliveredFile) -> Fetched:
            calls.append(item.artifact_id)
            answer = answers[item.artifact_id]
            if isinstance(answer, Exception):
                raise answer
            return Fetched(answer[0], answer[1], item.label)

        history: dict[str, Any] = {}

        async def request(method: str, params: dict[str, Any]) -> Any:
            assert method == "chat.history" and params["sessionKey"] == KEY
            return history["now"]

        corrections: list[Any] = []
        desk = MediaDesk(
            store=store, emitter=emitter, files=files, fetch=fetch, request=request, correct=corrections.append
        )
        await nursery.start(desk.run)
        yield desk, store, emitter, files, answers, calls, history, corrections


async def _message(store: Any) -> dict[str, Any]:
    return (await store.read_chat("c1"))["history"]["messages"]["m1"]


def _notes(message: dict[str, Any]) -> list[str]:
    return [s["description"] for s in message.get("statusHistory") or [] if s.get("action") == "openclaw_file"]


async def test_files_in_the_finalizes_transcript_are_taken_at_once(setup: Any) -> None:
    desk, store, emitter, files, answers, _, _, _corrections = setup
    answers[IMG] = (PNG, "image/png")
    answers[DOC] = (b"%PDF", "application/pdf")
    desk.finished(_Run("r1"), _history("r1", _image(), DOC_BLOCK, REFUSED))
    await desk.until(lambda: desk.looks >= 1)
    message = await _message(store)
    assert [(f["type"], f["name"], f["size"]) for f in message["files"]] == [
        ("image", "chart.png", len(PNG)),
        ("file", "report.pdf", 4),
    ]
    assert _notes(message) == ["gone.png was not delivered: the Gateway did not find the file."]
    assert sorted(meta[1] for meta in files.files.values()) == ["chart.png", "report.pdf"]
    assert all(meta[0] == "u1" for meta in files.files.values())
    told = [e.event for e in emitter.events]
    assert [e["type"] for e in told] == ["status", "files"]
    assert told[-1]["data"]["files"] == message["files"]


async def test_a_rewrite_push_brings_the_files_a_finalize_could_not_see_and_nothing_twice(setup: Any) -> None:
    desk, store, emitter, _, answers, calls, history, _corrections = setup
    answers[IMG] = (PNG, "image/png")
    desk.finished(_Run("r1"), _history("r1"))  # read before the Gateway's rewrite: no blocks yet
    desk.on_changed("agent:main:openwebui-u9-other")  # a session with no watched run: no read at all
    history["now"] = _history("r1", _image()).raw
    desk.on_changed(KEY)
    await desk.until(lambda: desk.looks >= 1)
    assert [f["name"] for f in (await _message(store))["files"]] == ["chart.png"]
    desk.on_changed(KEY)  # another push: the same transcript, nothing new
    await desk.until(lambda: desk.looks >= 2)
    assert calls == [IMG]
    assert len((await _message(store))["files"]) == 1
    assert [e.event["type"] for e in emitter.events] == ["files"]


async def test_a_failure_that_may_pass_is_tried_again_one_that_cannot_is_named(setup: Any) -> None:
    desk, store, _, _, answers, calls, history, _corrections = setup
    answers[IMG] = NotFetched("chart.png: the connection dropped", passing=True)
    answers[DOC] = NotFetched("report.pdf was not stored: the Gateway no longer has it")
    history["now"] = _history("r1", _image(), DOC_BLOCK).raw
    desk.finished(_Run("r1"), _history("r1", _image(), DOC_BLOCK))
    await desk.until(lambda: desk.looks >= 1)
    message = await _message(store)
    assert not message.get("files")
    assert _notes(message) == ["report.pdf was not stored: the Gateway no longer has it"]
    answers[IMG] = (PNG, "image/png")
    desk.on_changed(KEY)
    await desk.until(lambda: desk.looks >= 2)
    message = await _message(store)
    assert [f["name"] for f in message["files"]] == ["chart.png"]
    assert _notes(message) == ["report.pdf was not stored: the Gateway no longer has it"]  # once
    assert calls == [IMG, DOC, IMG]


async def test_storage_that_refuses_is_named(setup: Any) -> None:
    desk, store, _, files, answers, _, _, _corrections = setup
    files.refuse = "Open WebUI's file storage refused it"
    answers[IMG] = (PNG, "image/png")
    desk.finished(_Run("r1"), _history("r1", _image()))
    await desk.until(lambda: desk.looks >= 1)
    assert _notes(await _message(store)) == ["chart.png was not stored: Open WebUI's file storage refused it"]


# ---------------------------------------------------------------------------------------------- GatewayMedia


def _gateway(answer: Any) -> tuple[GatewayMedia, list[tuple[str, dict[str, Any]]]]:
    calls: list[tuple[str, dict[str, Any]]] = []

    async def request(method: str, params: dict[str, Any]) -> Any:
        calls.append((method, params))
        if isinstance(answer, Exception):
            raise answer
        return answer

    return GatewayMedia(request, "ws://127.0.0.1:9/", GatewayConfig()), calls


@pytest.mark.parametrize(
    ("item", "line"),
    [
        (
            DeliveredFile(IMG, "image", "big.png", "image/png", 13 * 1024 * 1024),
            "big.png was not stored: it is 13 MiB, over owc's 12 MiB limit for images",
        ),
        (
            DeliveredFile(IMG, "image", "logo.svg", "image/svg+xml", 100),
            "logo.svg was not stored: owc does not store files of type image/svg+xml",
        ),
        (
            DeliveredFile(DOC, "document", "x.bin", None, 10),
            "x.bin was not stored: the Gateway gave no valid file type",
        ),
    ],
)
async def test_owcs_policy_decides_before_any_byte_is_asked_for(item: DeliveredFile, line: str) -> None:
    media, calls = _gateway({})
    with pytest.raises(NotFetched) as caught:
        await media.fetch(KEY, item)
    assert str(caught.value).startswith(line)
    assert not caught.value.passing
    assert calls == []  # not even artifacts.download


async def test_bytes_in_the_answer_are_taken_within_the_cap() -> None:
    item = DeliveredFile(IMG, "image", "chart.png", "image/png", len(PNG))
    media, calls = _gateway({"encoding": "base64", "data": base64.b64encode(PNG).decode()})
    got = await media.fetch(KEY, item)
    assert (got.data, got.mime, got.name) == (PNG, "image/png", "chart.png")
    assert calls == [("artifacts.download", {"sessionKey": KEY, "artifactId": IMG})]
    # More bytes than the block declared: refused, whatever the Gateway sends.
    media, _ = _gateway({"encoding": "base64", "data": base64.b64encode(PNG + b"more").decode()})
    with pytest.raises(NotFetched, match="larger than the Gateway said"):
        await media.fetch(KEY, item)


@pytest.mark.parametrize(
    "url", ["http://evil.example/x", "//evil/x", "/api/chat/media/outgoing/../../etc", "/etc/passwd"]
)
async def test_a_url_outside_the_gateways_download_routes_is_never_fetched(url: str) -> None:
    media, _ = _gateway({"url": url})
    with pytest.raises(NotFetched, match="the Gateway named no place owc fetches from"):
        await media.fetch(KEY, DeliveredFile(IMG, "image", "chart.png", "image/png", 10))


async def test_a_dropped_connection_passes_a_missing_artifact_does_not() -> None:
    item = DeliveredFile(IMG, "image", "chart.png", "image/png", 10)
    media, _ = _gateway(SessionClosed("artifacts.download"))
    with pytest.raises(NotFetched) as caught:
        await media.fetch(KEY, item)
    assert caught.value.passing
    media, _ = _gateway(RequestError("artifacts.download", ErrorShape("INVALID_REQUEST", "artifact not found")))
    with pytest.raises(NotFetched) as caught:
        await media.fetch(KEY, item)
    assert not caught.value.passing and str(caught.value) == "chart.png was not stored: the Gateway no longer has it"


async def test_a_message_finished_before_the_rewrite_is_corrected_from_the_rewritten_transcript(setup: Any) -> None:
    desk, store, _, _, answers, _, history, corrections = setup
    answers[IMG] = (PNG, "image/png")
    # The finalize wrote the raw record's text, its absolute MEDIA: line in it (measured before the rewrite).
    await store.write("c1", "m1", content="Here.\n\nMEDIA:/root/ws/chart.png", output=[], done=True)
    desk.finished(_Run("r1"), None)
    history["now"] = _history("r1", _image()).raw  # the rewrite: "Here." and the image block
    desk.on_changed(KEY)
    await desk.until(lambda: desk.looks >= 1)
    [item] = corrections
    assert (item.run_id, item.message_id, item.content) == ("r1", "m1", True)


async def test_a_message_finished_after_the_rewrite_is_left_as_it_is(setup: Any) -> None:
    desk, store, _, _, answers, _, _, corrections = setup
    answers[IMG] = (PNG, "image/png")
    await store.write("c1", "m1", content="Here.", output=[], done=True)
    desk.finished(_Run("r1"), _history("r1", _image()))
    await desk.until(lambda: desk.looks >= 1)
    assert corrections == []

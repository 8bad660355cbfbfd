"""The files an agent makes: the transcript's blocks (``owc.protocol.media``, shapes measured on the real Gateway
2026.9.6, ``docs/measured/media-2026.9.6.md`` section 3), the book of runs that still owe files
(``owc.rules.media``), their entries and lines (``owc.render.files``) and their place in M (``ChatStore.add_files``)."""

from __future__ import annotations

from typing import Any

import pytest

from owc.protocol import parse_chat_history
from owc.protocol.media import DeliveredFile, RefusedFile, announces_media, media_of_block, run_media
from owc.render import files as shown
from owc.rules.media import MediaBook, Watch, item_key
from owc.store import ChatStore
from owc.store.engine import make_engine

UUID = "51943999-795e-4aba-b8c0-5afca94b1b57"
IMAGE = {
    "type": "image",
    "artifactId": f"artifact_managed_image_{UUID}",
    "url": f"/api/chat/media/outgoing/agent%3Amain%3Aopenwebui-x/{UUID}/full",
    "openUrl": f"/api/chat/media/outgoing/agent%3Amain%3Aopenwebui-x/{UUID}/full",
    "alt": "space name.png",
    "mimeType": "image/png",
    "width": 20,
    "height": 20,
    "sizeBytes": 83,
}
DOC = {
    "type": "attachment",
    "attachment": {
        "artifactId": "artifact_managed_media_ace93caa-1111-2222-3333-444455556666",
        "url": "/api/chat/media/outgoing/k/ace93caa/full",
        "kind": "document",
        "label": "report.pdf",
        "mimeType": "application/pdf",
        "sizeBytes": 193,
    },
}
AUDIO = {
    "type": "audio",
    "artifactId": "artifact_managed_media_d44a787c-0000-1111-2222-333344445555",
    "url": "/x/full",
    "fileName": "tone.wav",
    "mimeType": "audio/wav",
    "playback": "native",
    "sizeBytes": 844,
}
ERROR = {
    "type": "attachment_error",
    "attachment": {"code": "unsupported-format", "kind": "document", "label": "page.html", "mimeType": "text/html"},
}
TOOL_IMAGE = {
    "type": "image",
    "mimeType": "image/png",
    "artifactId": "artifact_transcript_image_eyJ4IjoxfQ",
    "omitted": True,
    "bytes": 124,
}


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        (IMAGE, DeliveredFile(IMAGE["artifactId"], "image", "space name.png", "image/png", 83)),
        (DOC, DeliveredFile(DOC["attachment"]["artifactId"], "document", "report.pdf", "application/pdf", 193)),
        (AUDIO, DeliveredFile(AUDIO["artifactId"], "audio", "tone.wav", "audio/wav", 844)),
        (ERROR, RefusedFile("unsupported-format", "document", "page.html", "text/html")),
        # A tool result's own image is the agent's input, not a delivered file.
        (TOOL_IMAGE, None),
        ({"type": "text", "text": "MEDIA:chart.png"}, None),
        # Hostile or broken blocks are skipped, never raised on.
        ({**IMAGE, "artifactId": "artifact_managed_image_../../x"}, None),
        ({**IMAGE, "artifactId": 7}, None),
        ({**IMAGE, "artifactId": "artifact_other_1"}, None),
        ({"type": "attachment", "attachment": "x"}, None),
        ({"type": "attachment"}, None),
        ({**IMAGE, "sizeBytes": -1}, DeliveredFile(IMAGE["artifactId"], "image", "space name.png", "image/png", None)),
        (
            {**IMAGE, "sizeBytes": True},
            DeliveredFile(IMAGE["artifactId"], "image", "space name.png", "image/png", None),
        ),
        (
            {k: v for k, v in IMAGE.items() if k != "alt"},
            DeliveredFile(IMAGE["artifactId"], "image", "image", "image/png", 83),
        ),
        ({"type": "attachment_error", "attachment": {}}, RefusedFile("delivery-failed", "document", "file", None)),
    ],
)
def test_block(block: dict[str, Any], expected: object) -> None:
    assert media_of_block(block) == expected


def _history(*messages: dict[str, Any]) -> Any:
    return parse_chat_history({"sessionKey": "agent:main:openwebui-u-c", "messages": list(messages)})


def _assistant(run_id: str, *content: dict[str, Any], seq: int = 1) -> dict[str, Any]:
    return {"role": "assistant", "content": list(content), "__openclaw": {"runId": run_id, "id": f"m{seq}", "seq": seq}}


def test_run_media_takes_only_the_runs_own_blocks_in_order_each_once() -> None:
    history = _history(
        _assistant("r0", {"type": "text", "text": "before"}, {**IMAGE, "artifactId": "artifact_managed_image_other"}),
        {"role": "user", "content": "hi"},
        _assistant("r1", {"type": "text", "text": "Odd ones."}, IMAGE, ERROR, seq=2),
        # A stored message shown as two display rows repeats its blocks (measured, commentary case).
        _assistant("r1", IMAGE, DOC, seq=2),
        {"role": "toolResult", "toolCallId": "c1", "content": [TOOL_IMAGE]},
    )
    items = run_media(history, "r1")
    assert [item_key(i) for i in items] == [
        IMAGE["artifactId"],
        "refused:unsupported-format:page.html",
        DOC["attachment"]["artifactId"],
    ]
    assert run_media(history, "r2") == ()


@pytest.mark.parametrize(
    ("data", "announced"),
    [
        ({"text": "x", "mediaUrls": ["chart.png"]}, True),
        ({"text": "x", "mediaUrls": []}, False),
        ({"text": "x", "mediaUrls": [""]}, False),
        ({"text": "x", "mediaUrls": "chart.png"}, False),
        ({"text": "x"}, False),
    ],
)
def test_announces_media(data: dict[str, Any], announced: bool) -> None:
    assert announces_media(data) is announced


# ---------------------------------------------------------------------------------------------- the book

W1 = Watch("s1", "r1", "c1", "m1", "u1")
W2 = Watch("s1", "r2", "c1", "m2", "u1")
W3 = Watch("s2", "r3", "c2", "m3", "u1")
F1 = DeliveredFile("artifact_managed_image_1", "image", "a.png", "image/png", 1)
F2 = DeliveredFile("artifact_managed_media_2", "document", "b.pdf", "application/pdf", 2)
R1 = RefusedFile("file-not-found", "image", "missing.png")


def test_book_watches_a_finished_run_until_its_files_are_handled() -> None:
    book = MediaBook()
    assert not book.watches("s1")
    book.watch(W1)
    assert book.watches("s1") and not book.watches("s2")
    due = book.due(W1, (F1, R1))
    assert due is not None and due.items == (F1, R1)
    book.handled(W1, (R1,))  # F1's fetch failed in a way that may pass: owed again at the next look
    due = book.due(W1, (F1, R1, F2))
    assert due is not None and due.items == (F1, F2)
    book.handled(W1, (F1, F2))
    assert book.due(W1, (F1, R1, F2)) is None


def test_book_a_second_finalize_keeps_what_was_handled() -> None:
    book = MediaBook()
    book.watch(W1)
    book.handled(W1, (F1,))
    book.watch(W1)
    assert book.due(W1, (F1,)) is None


def test_book_watched_runs_per_session_in_finish_order() -> None:
    book = MediaBook()
    for w in (W1, W3, W2):
        book.watch(w)
    assert book.watched("s1") == (W1, W2)
    assert book.watched("s2") == (W3,)


def test_book_is_bounded_by_a_count_oldest_first() -> None:
    book = MediaBook(cap=2)
    book.watch(W1)
    book.watch(W2)
    book.watch(W3)
    assert len(book) == 2
    assert book.watched("s1") == (W2,)
    assert book.due(W1, (F1,)) is None  # no longer watched: nothing owed
    book.handled(W1, (F1,))  # a late report for it changes nothing
    assert len(book) == 2


# ---------------------------------------------------------------------------------------------- the words


def test_entries_and_lines() -> None:
    image = shown.file_entry(F1, "f1", "/api/v1/files/f1/content", "image/png", 10)
    assert image == {
        "type": "image",
        "id": "f1",
        "url": "/api/v1/files/f1/content",
        "name": "a.png",
        "content_type": "image/png",
        "size": 10,
        "openclaw_artifact": F1.artifact_id,
    }
    assert shown.file_entry(F2, "f2", "/u", "application/pdf", 2)["type"] == "file"
    assert shown.refused_line(R1) == "missing.png was not delivered: the Gateway did not find the file."
    odd = RefusedFile("new-code", "image", "x\x00y.png")
    assert shown.refused_line(odd) == "x?y.png was not delivered: the Gateway refused it (new-code)."
    assert shown.note("l") == {"description": "l", "done": True, "action": "openclaw_file"}


# ---------------------------------------------------------------------------------------------- the store


def _chat(store: ChatStore) -> None:
    store.create_tables()
    store.create_chat("c1", "u1")
    store.add_turn("c1", "um", "m1", text="hi")


@pytest.fixture
def store(tmp_path: Any) -> ChatStore:
    s = ChatStore(make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}"))
    _chat(s)
    return s


def test_add_files_merges_by_artifact_and_names_what_was_not_kept(store: ChatStore) -> None:
    e1 = shown.file_entry(F1, "f1", "/api/v1/files/f1/content", "image/png", 1)
    e2 = shown.file_entry(F2, "f2", "/api/v1/files/f2/content", "application/pdf", 2)
    n1 = shown.note(shown.refused_line(R1))
    added = store.add_files("c1", "m1", [e1], [n1])
    assert (
        added is not None
        and list(added.files) == [e1]
        and [n["description"] for n in added.notes] == [n1["description"]]
    )
    # A second pass over the same transcript writes nothing.
    assert store.add_files("c1", "m1", [e1], []) is None
    added = store.add_files("c1", "m1", [e1, e2], [])
    assert added is not None and list(added.files) == [e1, e2]
    message = store.read_chat("c1")["history"]["messages"]["m1"]  # type: ignore[index]
    assert message["files"] == [e1, e2]
    assert [s["description"] for s in message["statusHistory"]] == [n1["description"]]
    # Gone or not an assistant message: nothing written.
    assert store.add_files("c1", "nope", [e1], []) is None
    assert store.add_files("c1", "um", [e2], []) is None
    assert store.add_files("missing", "m1", [e1], []) is None


@pytest.mark.parametrize(
    ("shown_text", "transcript", "stale"),
    [
        # Read before the rewrite: the raw record's absolute reference, gone from the rewritten transcript.
        ("Here.\n\nMEDIA:/home/u/.openclaw/workspace/chart.png", "Here.", True),
        ("Here.\n   MEDIA:chart.png", "Here.", True),
        # Read after it: nothing to correct.
        ("Here.", "Here.", False),
        # A line the Gateway kept as text (not a file to it, measured): in both, it stays.
        ("Only a bad one.\n\nMEDIA:../../etc/passwd", "Only a bad one.\n\nMEDIA:../../etc/passwd", False),
        # Not standalone (inside a sentence, indented as code): never a directive.
        ("see MEDIA:chart.png here", "see here", False),
        ("    MEDIA:chart.png", "", False),
    ],
)
def test_stale_media_lines(shown_text: str, transcript: str, stale: bool) -> None:
    from owc.rules.media import stale_media_lines

    assert stale_media_lines(shown_text, transcript) is stale

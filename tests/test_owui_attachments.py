"""A user's images and files as ``chat.send`` attachments (``owc/owui/attachments.py``): every shape Open WebUI
0.12.4 hands a Pipe, hostile input, the Gateway's limits, and a Python port of the Gateway's own checks
(``attachment-normalize-Bei1203a.mjs``) as the oracle. The real Gateway's code judges the same attachments in
``tests/test_realgw_attachments.py``."""

from __future__ import annotations

import asyncio
import base64
import os
import sys
import types
import uuid
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from owc.owui import attachments as att
from owc.owui.attachments import (
    MAX_BYTES,
    MAX_IMAGE_BYTES,
    MAX_PROBLEMS,
    FileRef,
    attachments_from,
    file_refs,
    message_files,
    owui_file_reader,
    read_upload,
)

# A real 1x1 PNG and GIF; the others carry their format's signature (the Gateway sniffs only the start).
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
GIF = base64.b64decode("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7")
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01" + b"\x00" * 40
WEBP = b"RIFF\x24\x00\x00\x00WEBPVP8 " + b"\x00" * 40
HEIC = b"\x00\x00\x00\x18ftypheic" + b"\x00" * 40
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n"
SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>'


B64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def image_part(url: Any, *, as_string: bool = False, kind: str = "image_url") -> dict[str, Any]:
    return {"type": kind, "image_url": url if as_string else {"url": url}}


def text(t: str = "look at this") -> dict[str, Any]:
    return {"type": "text", "text": t}


def upload(name: str, content_type: str | None, *, size: int | None = None, **extra: Any) -> dict[str, Any]:
    """A file item as the page puts it in ``user_message.files`` (``uploadFileHandler``)."""
    file_id = extra.pop("id", str(uuid.uuid4()))
    item = {
        "type": "file",
        "file": {"id": file_id, "filename": name, "path": "/etc/passwd", "meta": {"content_type": content_type}},
        "id": file_id,
        "url": file_id,
        "name": name,
        "collection_name": "",
        "status": "uploaded",
        "size": size,
        "error": "",
        "itemId": str(uuid.uuid4()),
        "content_type": content_type,
    }
    item.update(extra)
    return item


def reader(blobs: dict[str, bytes], calls: list[str] | None = None):
    def read(ref: FileRef, limit: int) -> bytes | None:
        if calls is not None:
            calls.append(ref.id)
        data = blobs.get(ref.id)
        return None if data is None else data[: limit + 1]

    return read


# ---- the Gateway's own checks, ported (attachment-normalize-Bei1203a.mjs:162-195, base64-B5EyWEOm.mjs:3-40)


def gateway_error(a: dict[str, Any], *, max_bytes: int = MAX_BYTES) -> str | None:
    """What the Gateway 2026.9.6 answers for one attachment (None: accepted). ``isImage`` is approximated by
    the attachment's own ``type``: the real sniffer judges the same attachments in the real-Gateway tier."""
    content = a.get("content")
    label = a.get("fileName") or a.get("type") or "attachment-1"
    if not isinstance(content, str):
        return f"attachment {label}: content must be base64 string"
    b64 = content.strip()
    head, comma, rest = b64.partition(",")
    if comma and head.startswith("data:") and head.endswith(";base64") and ";" not in head[5:-7]:
        b64 = rest
    if not b64:
        return f"attachment {label}: empty payload"
    padding = len(b64) - len(b64.rstrip("="))
    if len(b64) % 4 or padding > 2 or any(c not in B64_CHARS for c in b64.rstrip("=")):
        return f"attachment {label}: invalid base64 content"
    size = len(b64) * 3 // 4 - padding
    if size > max_bytes:
        return f"attachment {label}: exceeds size limit"
    if a.get("type") == "image" and size > MAX_IMAGE_BYTES:
        return f"attachment {label}: image exceeds size limit"
    return None


def assert_gateway_accepts(attachments: list[dict[str, Any]], **limits: int) -> None:
    for a in attachments:
        assert set(a) == {"type", "mimeType", "fileName", "content"}
        assert a["type"] == ("image" if a["mimeType"].startswith("image/") else "file")
        assert isinstance(a["fileName"], str) and a["fileName"] and "\n" not in a["fileName"]
        assert gateway_error(a, **limits) is None, a["fileName"]


# ---- images in the message content


def test_an_image_part_becomes_the_control_ui_shape() -> None:
    files = [upload("cat.png", "image/png")]
    got, problems = attachments_from([text(), image_part(data_url(PNG))], files)
    assert problems == []
    assert got == [
        {"type": "image", "mimeType": "image/png", "fileName": "cat.png", "content": base64.b64encode(PNG).decode()}
    ]
    assert_gateway_accepts(got)


@pytest.mark.parametrize(
    ("data", "mime", "ext"),
    [
        (PNG, "image/png", ".png"),
        (GIF, "image/gif", ".gif"),
        (JPEG, "image/jpeg", ".jpg"),
        (WEBP, "image/webp", ".webp"),
        (HEIC, "image/heic", ".heic"),
    ],
)
def test_the_type_is_the_bytes_not_the_declared_one(data: bytes, mime: str, ext: str) -> None:
    # Declared as something else (Open WebUI guesses it from the file name): the bytes decide, as in the Gateway.
    got, problems = attachments_from([image_part(data_url(data, "image/x-whatever"))], [])
    assert problems == []
    assert [(a["mimeType"], a["fileName"]) for a in got] == [(mime, f"image-1{ext}")]
    assert base64.b64decode(got[0]["content"]) == data


@pytest.mark.parametrize(
    "part",
    [
        image_part(data_url(PNG), as_string=True),  # image_url as a bare string (convert_url_images_to_base64)
        image_part(data_url(PNG), kind="input_image"),
        image_part(data_url(PNG), as_string=True, kind="input_image"),
        {"type": "image_url", "image_url": {"url": data_url(PNG), "detail": "high"}},
        image_part("  " + data_url(PNG) + "\n"),
        image_part("DATA:image/png;base64," + base64.b64encode(PNG).decode()),
        image_part("data:image/png;name=x.png;base64," + base64.b64encode(PNG).decode()),  # parameters
        image_part(data_url(PNG).replace("data:image/png", "data:")),  # no type at all
    ],
)
def test_every_image_part_shape(part: dict[str, Any]) -> None:
    got, problems = attachments_from([part], [])
    assert problems == []
    assert [base64.b64decode(a["content"]) for a in got] == [PNG]
    assert_gateway_accepts(got)


@pytest.mark.parametrize(
    "payload",
    [
        base64.b64encode(PNG).decode().rstrip("="),  # unpadded
        "\n".join(base64.b64encode(PNG).decode()[i : i + 20] for i in range(0, 96, 20)),  # line breaks
        base64.urlsafe_b64encode(PNG + b"\xfb\xff").decode(),  # URL-safe alphabet
    ],
)
def test_base64_is_sent_canonical(payload: str) -> None:
    got, problems = attachments_from([image_part(f"data:image/png;base64,{payload}")], [])
    assert problems == []
    (a,) = got
    assert a["content"] == base64.b64encode(base64.b64decode(a["content"])).decode()  # padded, no whitespace
    assert base64.b64decode(a["content"]).startswith(PNG[:8])
    assert_gateway_accepts(got)


def test_images_are_named_after_the_message_files_in_order() -> None:
    files = [upload("a.png", "image/png"), upload("notes.txt", "text/plain"), upload("b.gif", "image/gif")]
    content = [text(), image_part(data_url(PNG)), image_part(data_url(GIF))]
    got, problems = attachments_from(content, files, read=reader({}))
    assert [a["fileName"] for a in got] == ["a.png", "b.gif"]
    assert problems == ["notes.txt: Open WebUI could not read this file, so it was not sent."]


def test_names_are_not_guessed_when_the_counts_differ() -> None:
    files = [upload("a.png", "image/png")]
    content = [image_part(data_url(PNG)), image_part(data_url(GIF))]
    got, _ = attachments_from(content, files)
    assert [a["fileName"] for a in got] == ["image-1.png", "image-2.gif"]


def test_a_file_without_url_gets_no_image_part_so_no_name() -> None:
    # utils/middleware.py:2136-2142 adds a part only for a file with a url.
    files = [upload("lost.png", "image/png", url=""), upload("a.png", "image/png")]
    got, _ = attachments_from([image_part(data_url(PNG))], files)
    assert [a["fileName"] for a in got] == ["a.png"]


def test_legacy_image_items_and_string_content() -> None:
    files = [{"type": "image", "url": data_url(PNG)}]
    assert attachments_from("just text", files) == ([], [])
    got, _ = attachments_from([image_part(data_url(PNG))], files)
    assert [a["fileName"] for a in got] == ["image-1.png"]


@pytest.mark.parametrize(
    ("part", "line"),
    [
        (image_part("1b1c5f4e-0000-4000-8000-000000000000"), "Image 1: Open WebUI could not read this image"),
        (image_part("/api/v1/files/x/content"), "Image 1: Open WebUI could not read this image"),
        (image_part("https://example.com/cat.png"), "Image 1: Open WebUI could not read this image"),
        (image_part(""), "Image 1: Open WebUI gave no data for this image"),
        (image_part(None), "Image 1: Open WebUI gave no data for this image"),
        (image_part(42), "Image 1: Open WebUI gave no data for this image"),
        ({"type": "image_url"}, "Image 1: Open WebUI gave no data for this image"),
        (image_part(data_url(SVG, "image/svg+xml")), "Image 1: SVG images are not sent to the agent."),
        (image_part("data:image/svg+xml,%3Csvg%2F%3E"), "Image 1: SVG images are not sent to the agent."),
        (image_part(data_url(PDF, "image/png")), "Image 1: this image format is not sent to the agent."),
        (image_part("data:image/png;base64,!!!notbase64!!!"), "Image 1: its data is not valid"),
        (image_part("data:image/png;base64,A"), "Image 1: its data is not valid"),
        (image_part("data:image/png;base64,AB+_"), "Image 1: its data is not valid"),  # mixed alphabets
        (image_part("data:image/png;base64,QUJD=QUJD"), "Image 1: its data is not valid"),
        (image_part("data:image/png;base64,é"), "Image 1: its data is not valid"),
        (image_part("data:image/png;base64,\ud800"), "Image 1: its data is not valid"),
        (image_part("data:image/png;base64"), "Image 1: its data is not valid"),
        (image_part("data:image/png;base64,"), "Image 1 is empty, so it was not sent."),
    ],
)
def test_an_image_that_cannot_be_sent_is_one_line(part: dict[str, Any], line: str) -> None:
    got, problems = attachments_from([text(), part], [])
    assert got == []
    assert len(problems) == 1 and problems[0].startswith(line)


def test_a_url_is_never_fetched(monkeypatch) -> None:
    import urllib.request

    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: pytest.fail("fetched"))
    got, problems = attachments_from([image_part("http://127.0.0.1:1/x.png")], [])
    assert got == [] and len(problems) == 1


def test_unknown_parts_are_named_text_parts_are_not() -> None:
    content = [text(), {"type": "input_text", "text": "x"}, {"type": "input_audio", "input_audio": {}}, "junk", 3]
    got, problems = attachments_from(content, [])
    assert got == []
    assert problems == ["A part of your message (input_audio) is not sent to the agent."]


def test_openai_file_parts() -> None:
    part = {"type": "file", "file": {"filename": "r.pdf", "file_data": data_url(PDF, "application/pdf")}}
    got, problems = attachments_from([part, {"type": "file", "file": {"file_id": "x"}}], [])
    assert got == [
        {"type": "file", "mimeType": "application/pdf", "fileName": "r.pdf", "content": base64.b64encode(PDF).decode()}
    ]
    assert problems == ["File 2: this file came without its data, so it was not sent."]


# ---- uploaded files


def test_an_upload_is_read_by_its_id_and_sent_as_a_file() -> None:
    item = upload("report.pdf", "application/pdf", size=len(PDF))
    calls: list[str] = []
    got, problems = attachments_from([text()], [item], read=reader({item["id"]: PDF}, calls))
    assert problems == []
    assert got == [
        {
            "type": "file",
            "mimeType": "application/pdf",
            "fileName": "report.pdf",
            "content": base64.b64encode(PDF).decode(),
        }
    ]
    assert calls == [item["id"]]
    assert_gateway_accepts(got)


def test_an_upload_is_an_image_if_its_bytes_are() -> None:
    item = upload("scan", "application/octet-stream")
    got, _ = attachments_from([], [item], read=reader({item["id"]: PNG}))
    assert [(a["type"], a["mimeType"], a["fileName"]) for a in got] == [("image", "image/png", "scan")]
    big = upload("huge.bin", "application/octet-stream")
    got, problems = attachments_from([], [big], read=reader({big["id"]: PNG + b"\0" * 100}), max_image_bytes=64)
    assert got == [] and problems == ["huge.bin is larger than the Gateway accepts for an image (0 MB)."]


def test_an_upload_claiming_to_be_an_image_but_not_one_is_left_out() -> None:
    svg, fake, renamed = upload("d.svg", "image/svg+xml"), upload("x.png", "text/plain"), upload("y.bmp", None)
    blobs = {svg["id"]: SVG, fake["id"]: b"hello", renamed["id"]: b"plain text"}
    got, problems = attachments_from([], [svg, fake, renamed], read=reader(blobs))
    assert got == []
    assert problems == [
        "d.svg: SVG images are not sent to the agent.",
        "x.png: this image format is not sent to the agent.",
        "y.bmp: this image format is not sent to the agent.",
    ]


def test_an_upload_without_a_type_goes_as_octet_stream() -> None:
    item = upload("data.bin", None)
    got, _ = attachments_from([], [item], read=reader({item["id"]: b"\x01\x02"}))
    assert got[0]["mimeType"] == "application/octet-stream" and got[0]["type"] == "file"


def test_raster_images_among_the_files_are_not_read() -> None:
    # They reach the content as image_url parts (utils/middleware.py:2124-2142); reading them too would send two.
    item = upload("a.png", "image/png")
    calls: list[str] = []
    got, problems = attachments_from([image_part(data_url(PNG))], [item], read=reader({item["id"]: PNG}, calls))
    assert calls == [] and len(got) == 1 and problems == []
    assert file_refs([item]) == []


def test_without_a_reader_files_are_named_not_sent() -> None:
    got, problems = attachments_from([], [upload("notes.txt", "text/plain")])
    assert got == [] and problems == ["notes.txt: files other than images are not sent to the agent here."]


@pytest.mark.parametrize("result", [None, "text", 12, RuntimeError("disk"), KeyError("x")])
def test_a_reader_that_fails_is_one_line(result: Any) -> None:
    def read(ref: FileRef, limit: int) -> Any:
        if isinstance(result, BaseException):
            raise result
        return result

    got, problems = attachments_from([], [upload("r.pdf", "application/pdf")], read=read)
    assert got == [] and problems == ["r.pdf: Open WebUI could not read this file, so it was not sent."]


def test_reference_kinds_and_bad_ids_are_lines_not_reads() -> None:
    files = [
        {"type": "collection", "name": "Handbook", "id": "k1"},
        {"type": "note", "name": "Todo"},
        {"type": "filesystem", "name": "x"},
        {"type": {"evil": 1}, "name": "y"},
        upload("../../etc/passwd", "text/plain", id="../../etc/passwd"),
        upload("noid.txt", "text/plain", id=None),
        "junk",
        None,
    ]
    calls: list[str] = []
    got, problems = attachments_from([], files, read=reader({}, calls))
    assert got == [] and calls == []
    assert problems == [
        "Handbook: this kind of attachment (collection) is not sent.",
        "Todo: this kind of attachment (note) is not sent.",
        "x: this kind of attachment (filesystem) is not sent.",
        "y: this kind of attachment (unknown) is not sent.",
        "../../etc/passwd: Open WebUI could not read this file, so it was not sent.",
        "noid.txt: Open WebUI could not read this file, so it was not sent.",
    ]


def test_file_refs_keep_no_path_and_only_sane_declared_values() -> None:
    item = upload("r.pdf", "Application/PDF; charset=binary", size=10)
    (ref,) = file_refs([item])
    assert ref == FileRef(id=item["id"], name="r.pdf", content_type="application/pdf", size=10)
    refs = file_refs([upload("x", "not a type", size=True), upload("y", ["a"], size="9")])
    assert [(r.content_type, r.size) for r in refs] == [("", None), ("", None)]


def test_message_files_is_the_user_messages_own() -> None:
    files = [upload("a.txt", "text/plain"), "junk"]
    assert message_files({"user_message": {"files": files}, "files": ["other"]}) == files[:1]
    for metadata in (None, {}, {"user_message": None}, {"user_message": {"files": "x"}}, {"files": files}, []):
        assert message_files(metadata) == []


# ---- limits


def test_image_limit_is_inclusive() -> None:
    at = PNG + b"\0" * (100 - len(PNG))
    got, problems = attachments_from([image_part(data_url(at))], [], max_image_bytes=100)
    assert len(got) == 1 and problems == []
    got, problems = attachments_from([image_part(data_url(at + b"\0"))], [], max_image_bytes=100)
    assert got == [] and problems == ["Image 1 is larger than the Gateway accepts for an image (0 MB)."]


def test_limits_read_as_the_user_reads_them() -> None:
    big = PNG + b"\0" * MAX_IMAGE_BYTES
    files = [upload("image.png", "image/png")]
    got, problems = attachments_from([image_part(data_url(big))], files)
    assert got == [] and problems == ["image.png is larger than the Gateway accepts for an image (6 MB)."]
    item = upload("video.mp4", "video/mp4", size=MAX_BYTES + 1)
    got, problems = attachments_from([], [item], read=lambda r, n: pytest.fail("read a file known to be too large"))
    assert problems == ["video.mp4 is larger than the Gateway accepts (18.6 MB)."]


def test_file_limit_applies_to_what_was_read_not_what_was_declared() -> None:
    item = upload("liar.txt", "text/plain", size=1)
    got, problems = attachments_from([], [item], read=reader({item["id"]: b"x" * 101}), max_bytes=100)
    assert got == [] and problems == ["liar.txt is larger than the Gateway accepts (0 MB)."]
    got, problems = attachments_from([], [item], read=reader({item["id"]: b"x" * 100}), max_bytes=100)
    assert len(got) == 1 and problems == []


def test_the_reader_is_given_the_limit() -> None:
    seen: list[int] = []

    def read(ref: FileRef, limit: int) -> bytes:
        seen.append(limit)
        return b"x"

    attachments_from([], [upload("a.txt", "text/plain")], read=read, max_bytes=1234)
    assert seen == [1234]


def test_a_huge_part_is_refused_from_its_length_alone(monkeypatch) -> None:
    monkeypatch.setattr(att, "_b64decode", lambda s: pytest.fail("decoded a part known to be too large"))
    monkeypatch.setattr(att.urllib.parse, "unquote_to_bytes", lambda s: pytest.fail("decoded"))
    huge = "data:image/png;base64," + "A" * 40_000_000
    got, problems = attachments_from([image_part(huge), image_part("data:image/png," + "%00" * 7_000_000)], [])
    assert got == []
    assert problems == [
        "Image 1 is larger than the Gateway accepts for an image (6 MB).",
        "Image 2 is larger than the Gateway accepts for an image (6 MB).",
    ]


def _peak(fn: Any) -> tuple[Any, int]:
    """``fn()``'s result and the peak of memory allocated while it ran (tracemalloc), in bytes."""
    import tracemalloc

    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_percent_encoded_payload_is_decoded_in_bounded_memory() -> None:
    """Issue 24 item 13: an 18 MB percent-encoded ``data:`` URL (6 MB once decoded, within the file limit) cost
    1.36 GB in Open WebUI's process (``unquote_to_bytes`` makes two objects per ``%XX``). Decoded a slice at a
    time it costs about its output: the 6 MB of bytes, their copy and their base64 (30 MB measured)."""
    url = "data:text/plain," + "%41" * 6_000_000
    (got, problems), peak = _peak(lambda: attachments_from([{"type": "file", "file": {"file_data": url}}], []))
    assert problems == [] and len(got) == 1
    assert base64.b64decode(got[0]["content"]) == b"A" * 6_000_000
    assert peak < 64_000_000, f"peak {peak / 1e6:.0f} MB"


def test_a_percent_encoded_payload_over_the_limit_is_refused_before_it_is_decoded() -> None:
    """The decoded size's lower bound comes from the encoded text alone (one byte per character, less two per
    ``%``): 7 MB without escapes is over the image limit and is refused with the module's line, nothing decoded.
    One whose bound fits but whose bytes do not (UTF-8 text: two bytes per character) stops as soon as the
    decoded bytes pass the limit."""
    url = "data:image/png," + "A" * 7_000_000
    (got, problems), peak = _peak(lambda: attachments_from([image_part(url)], []))
    assert got == [] and problems == ["Image 1 is larger than the Gateway accepts for an image (6 MB)."]
    assert peak < 1_000_000, f"peak {peak / 1e6:.1f} MB"

    wide = "data:image/png," + "é" * 4_000_000  # 4 M characters, 8 MB once decoded
    (got, problems), peak = _peak(lambda: attachments_from([image_part(wide)], []))
    assert got == [] and problems == ["Image 1 is larger than the Gateway accepts for an image (6 MB)."]
    assert peak < 16_000_000, f"peak {peak / 1e6:.1f} MB"


@pytest.mark.parametrize("chunk", [1, 2, 3, 4, 5, 7, 64])
def test_a_percent_encoded_payload_decodes_the_same_in_slices(monkeypatch, chunk: int) -> None:
    """A slice never ends inside an escape: the bytes are ``unquote_to_bytes``'s of the whole payload, for any
    slice length, malformed escapes included."""
    import urllib.parse

    monkeypatch.setattr(att, "_UNQUOTE_CHUNK", chunk)
    payload = "ab%41%4%%2g%e2%9c%93x%0A%%41é%ff%" * 3
    assert att._unquote_bounded(payload, 10_000) == urllib.parse.unquote_to_bytes(payload)
    assert att._unquote_bounded(payload, 10) is None


def test_all_attachments_together_fit_one_frame() -> None:
    blob = PNG + b"\0" * 2900  # 4 KB of base64 each
    content = [image_part(data_url(blob)) for _ in range(5)]
    got, problems = attachments_from(content, [], max_payload=3 * 4200 + 1000, reserve=1000)
    assert len(got) == 3
    assert problems == [
        f"Image {i} was not sent: with your other files the message is larger than the Gateway accepts at once (0 MB)."
        for i in (4, 5)
    ]
    # The defaults keep the Gateway's frame: 25 MB less its own 256 KB reserve.
    three = [image_part(data_url(PNG + b"\0" * 6_000_000)) for _ in range(4)]
    got, problems = attachments_from(three, [])
    assert len(got) == 3 and len(problems) == 1
    assert sum(len(a["content"]) for a in got) < att.MAX_PAYLOAD - att.FRAME_RESERVE


def test_problem_lines_are_capped() -> None:
    content = [image_part("https://x/y.png") for _ in range(1000)]
    got, problems = attachments_from(content, [])
    assert got == [] and len(problems) == MAX_PROBLEMS
    assert problems[-1] == f"... and {1000 - MAX_PROBLEMS + 1} more parts of your message were not sent."


# ---- names never carry data or break a line


def test_names_are_one_short_line_and_never_data() -> None:
    files = [
        upload("evil\nname\u2028with\x00controls" + "x" * 200 + ".txt", "text/plain"),
        upload(data_url(b"secret bytes", "text/plain"), "text/plain"),
        upload("C:\\Users\\me\\..\\secret.txt", "text/plain"),
    ]
    got, problems = attachments_from([], files, read=reader({f["id"]: b"hi" for f in files}), max_bytes=1)
    for line in problems:
        assert "\n" not in line and "\u2028" not in line and "\x00" not in line and "secret bytes" not in line
        assert "c2VjcmV0" not in line  # the base64 of "secret"
    assert problems[0].startswith("evil name with controls") and "…" in problems[0]
    assert problems[1].startswith("A file is larger")
    got, _ = attachments_from([], files[2:], read=reader({files[2]["id"]: b"hi"}))
    assert got[0]["fileName"] == "secret.txt"  # no folders reach the Gateway


def test_a_defect_costs_the_files_not_the_message(monkeypatch) -> None:
    monkeypatch.setattr(att, "_sniff_image", lambda data: 1 / 0)
    got, problems = attachments_from([image_part(data_url(PNG))], [])
    assert got == [] and problems == ["Some of your files could not be prepared for the agent and were not sent."]


# ---- hostile input never raises, and what is produced passes the Gateway's checks

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
payloads = st.one_of(
    st.sampled_from([PNG, GIF, JPEG, WEBP, HEIC, PDF, SVG, b"", b"x"]).map(lambda b: base64.b64encode(b).decode()),
    st.text(alphabet="ABCDabcd0123+/=-_ \n%", max_size=40),
    st.text(max_size=20),
)
parts = st.one_of(
    json_values,
    st.builds(
        lambda kind, mime, p, as_string: image_part(f"data:{mime};base64,{p}", as_string=as_string, kind=kind),
        st.sampled_from(["image_url", "input_image"]),
        st.sampled_from(["image/png", "image/svg+xml", "", "text/plain", "image/png;x=y"]),
        payloads,
        st.booleans(),
    ),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["image_url", "file", "text", "input_image"])},
        optional={
            "image_url": json_values,
            "file": json_values,
            "text": json_values,
        },
    ),
)
file_items = st.one_of(
    json_values,
    st.builds(
        lambda name, ctype, size, blob: (upload(name, ctype, size=size), blob),
        st.text(max_size=20),
        st.sampled_from(["text/plain", "image/png", "image/svg+xml", None, "application/pdf", 7]),
        st.one_of(st.none(), st.integers(-5, 10**9), st.text(max_size=3)),
        st.sampled_from([PNG, PDF, SVG, b"", b"hello", None]),
    ),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(content=st.one_of(json_values, st.lists(parts, max_size=6)), items=st.lists(file_items, max_size=5))
def test_hostile_input_never_raises_and_passes_the_gateway(content: Any, items: list[Any]) -> None:
    files = [i[0] if isinstance(i, tuple) else i for i in items]
    blobs = {i[0]["id"]: i[1] for i in items if isinstance(i, tuple) and i[1] is not None}
    got, problems = attachments_from(content, files, read=reader(blobs))
    assert isinstance(got, list) and isinstance(problems, list)
    assert all(isinstance(p, str) and "\n" not in p for p in problems)
    assert len(problems) <= MAX_PROBLEMS
    assert_gateway_accepts(got)
    for a in got:
        data = base64.b64decode(a["content"])
        if a["type"] == "image":
            assert att._sniff_image(data) == a["mimeType"]
        else:
            assert att._sniff_image(data) is None


# ---- reading a local file: only inside Open WebUI's upload folder


def test_read_upload_inside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "uploads"
    root.mkdir()
    (root / "id_a.txt").write_bytes(b"hello")
    assert read_upload(root / "id_a.txt", root=root, limit=10) == b"hello"
    assert read_upload(str(root / "id_a.txt"), root=str(root), limit=3) == b"hell"  # limit + 1: shows "too large"


def test_read_upload_refuses_everything_else(tmp_path: Path) -> None:
    root = tmp_path / "uploads"
    root.mkdir()
    secret = tmp_path / "secret"
    secret.write_bytes(b"token")
    (root / "link").symlink_to(secret)
    (root / "sub").mkdir()
    os.mkfifo(root / "fifo")
    (tmp_path / "uploads-evil").mkdir()
    (tmp_path / "uploads-evil" / "x").write_bytes(b"x")
    for path in (
        secret,
        root / ".." / "secret",
        root / "link",
        root / "sub",
        root,
        root / "fifo",  # must not block
        root / "missing",
        tmp_path / "uploads-evil" / "x",  # a sibling whose name starts like the root
        "",
        "\0",
    ):
        assert read_upload(path, root=root, limit=100) is None, path
    assert read_upload(root / "x", root=None, limit=1) is None  # type: ignore[arg-type]


# ---- the reader inside Open WebUI (its modules faked: this tier has no Open WebUI)


class FakeUser:
    model_fields: ClassVar[dict[str, None]] = {"id": None, "role": None, "name": None}

    def __init__(self, id: str, role: str = "user", name: str = "") -> None:
        self.id, self.role, self.name = id, role, name


def fake_open_webui(monkeypatch, upload_dir: Path, rows: dict[str, Any], access: set[str]) -> list[str]:
    fetched: list[str] = []

    class Files:
        @staticmethod
        async def get_file_by_id(file_id: str) -> Any:
            row = rows.get(file_id)
            if isinstance(row, BaseException):
                raise row
            return row

    async def has_access_to_file(file_id: str, access_type: str, user: Any) -> bool:
        assert access_type == "read" and isinstance(user, FakeUser)
        return file_id in access

    class Storage:
        @staticmethod
        def get_file(path: str) -> str:
            fetched.append(path)
            return path

    modules = {
        "open_webui": types.ModuleType("open_webui"),
        "open_webui.config": types.SimpleNamespace(UPLOAD_DIR=upload_dir),
        "open_webui.models": types.ModuleType("open_webui.models"),
        "open_webui.models.files": types.SimpleNamespace(Files=Files),
        "open_webui.models.users": types.SimpleNamespace(UserModel=FakeUser),
        "open_webui.storage": types.ModuleType("open_webui.storage"),
        "open_webui.storage.provider": types.SimpleNamespace(Storage=Storage),
        "open_webui.utils": types.ModuleType("open_webui.utils"),
        "open_webui.utils.access_control": types.ModuleType("open_webui.utils.access_control"),
        "open_webui.utils.access_control.files": types.SimpleNamespace(has_access_to_file=has_access_to_file),
    }
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    return fetched


def row(user_id: str, path: Path | str, size: int | None = None) -> Any:
    return types.SimpleNamespace(user_id=user_id, path=str(path), meta={"size": size} if size else {})


def test_owui_reader_reads_what_the_user_may_read_from_the_rows_path(monkeypatch, tmp_path: Path) -> None:
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    mine, shared, theirs, outside, broken, big = (upload(f"{n}.txt", "text/plain") for n in range(6))
    for item in (mine, shared, theirs):
        (uploads / f"{item['id']}_f.txt").write_bytes(item["name"].encode())
    (tmp_path / "secret").write_bytes(b"token")
    rows = {
        mine["id"]: row("me", uploads / f"{mine['id']}_f.txt"),
        shared["id"]: row("other", uploads / f"{shared['id']}_f.txt"),
        theirs["id"]: row("other", uploads / f"{theirs['id']}_f.txt"),
        outside["id"]: row("me", tmp_path / "secret"),  # a row pointing outside: still refused
        broken["id"]: RuntimeError("db down"),
        big["id"]: row("me", uploads / "big", size=MAX_BYTES + 1),
    }
    fetched = fake_open_webui(monkeypatch, uploads, rows, access={shared["id"]})
    files = [mine, shared, theirs, outside, broken, big]
    user = {"id": "me", "role": "user", "name": "Me", "valves": object()}
    read = asyncio.run(owui_file_reader(files, user))
    got, problems = attachments_from([], files, read=read)
    assert [base64.b64decode(a["content"]) for a in got] == [b"0.txt", b"1.txt"]
    assert problems == [f"{n}.txt: Open WebUI could not read this file, so it was not sent." for n in (2, 3, 4)] + [
        "5.txt: Open WebUI could not read this file, so it was not sent."
    ]
    assert str(uploads / "big") not in fetched  # too large: not fetched from remote storage


def test_owui_reader_admin_and_a_bad_user(monkeypatch, tmp_path: Path) -> None:
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    item = upload("a.txt", "text/plain")
    (uploads / "a").write_bytes(b"A")
    fake_open_webui(monkeypatch, uploads, {item["id"]: row("other", uploads / "a")}, access=set())
    read = asyncio.run(owui_file_reader([item], {"id": "root", "role": "admin"}))
    assert attachments_from([], [item], read=read)[0][0]["content"] == base64.b64encode(b"A").decode()
    read = asyncio.run(owui_file_reader([item], None))
    assert attachments_from([], [item], read=read)[0] == []


def test_a_message_without_its_image_parts_sends_its_images_from_its_files() -> None:
    """The message as the request named it (``pipe.request_messages``: Open WebUI's rebuilt history lost it) has
    no ``image_url`` parts: its images are taken from its files, an inline one from its ``data:`` URL with its name,
    an uploaded one read like any upload (an image by its bytes). With the parts expected, the same files give the
    names only, as before."""
    inline = {"type": "image", "url": data_url(PNG), "name": "cat.png"}
    uploaded = upload("dog.png", "image/png")
    calls: list[str] = []
    got, problems = attachments_from(
        "look", [inline, uploaded], read=reader({uploaded["id"]: PNG}, calls), images_in_content=False
    )
    assert problems == []
    assert [(a["type"], a["mimeType"], a["fileName"]) for a in got] == [
        ("image", "image/png", "cat.png"),
        ("image", "image/png", "dog.png"),
    ]
    assert calls == [uploaded["id"]]
    assert_gateway_accepts(got)
    got, problems = attachments_from("look", [inline, uploaded], read=reader({uploaded["id"]: PNG}))
    assert got == [] and problems == []

"""``owc.rules.media_policy``: what owc stores of a file the agent made, under which name, fetched from where, and
which HTTP answer it takes. Table-driven, cell by cell, then properties over any input (hypothesis)."""

from __future__ import annotations

import ast
import subprocess
import sys
import unicodedata
import urllib.parse
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from owc.rules.media_policy import (
    AUDIO_VIDEO_CAP,
    DEFAULT_DOCUMENT_CAP,
    DEFAULT_POLICY,
    DOWNLOAD_ROUTES,
    IMAGE_CAP,
    MAX_FILENAME_BYTES,
    MEDIA_TYPES,
    Allowed,
    MediaKind,
    MediaPolicy,
    Problem,
    Refused,
    UnsafeDownloadUrl,
    check_response,
    clean_name,
    download_url,
    format_size,
    normalize_mime,
    safe_filename,
    shown_name,
    shown_url,
)

from conftest import leaked, secret

ROOT = Path(__file__).resolve().parents[1]
MiB = 1024 * 1024
TICKET = secret("v1.eyJzY29wZSI6Im1hbmFnZWQifQ.hmac-0123456789abcdef")
OUTGOING = f"/api/chat/media/outgoing/agent%3Amain%3Aowc/6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f/full?mediaTicket={TICKET}"


def test_the_policy_is_pure() -> None:
    """Pure like the rest of ``owc.rules``: importing it loads no Trio and no shell (``tests/test_core_purity.py``
    lists the core modules; this one checks itself until it is listed there)."""
    code = (
        "import sys\nimport owc.rules.media_policy\n"
        "shells = ('trio', 'anyio', 'sqlalchemy', 'owc.gateway', 'owc.runs', 'owc.owui')\n"
        "bad = [m for m in shells if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
    tree = ast.parse((ROOT / "owc/rules/media_policy.py").read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= {"__future__", "enum", "re", "unicodedata", "urllib.parse", "collections.abc", "attrs"}


# ------------------------------------------------------------------------------------------------ types


@pytest.mark.parametrize(
    ("value", "normalized"),
    [
        ("image/png", "image/png"),
        ("IMAGE/PNG", "image/png"),
        (" image/png ; charset=binary", "image/png"),
        ("image/jpg", "image/jpeg"),
        ("audio/x-wav", "audio/wav"),
        ("audio/wave", "audio/wav"),
        ("audio/mp3", "audio/mpeg"),
        ("text/yaml", "application/yaml"),
        ("image/svg+xml", "image/svg+xml"),  # a type all the same: refused by the list, not here
        ("", None),
        ("png", None),
        ("image/", None),
        ("image/png\r\nx-evil: 1", None),
        ("image/pn g", None),
        (None, None),
        (12, None),
    ],
)
def test_normalize_mime(value, normalized) -> None:
    assert normalize_mime(value) == normalized


def test_the_allow_list() -> None:
    """Cell by cell: which types owc stores, of which kind. Not SVG, not HTML (script in Open WebUI's origin)."""
    kinds = {mime: t.kind for mime, t in MEDIA_TYPES.items()}
    assert {m for m, k in kinds.items() if k is MediaKind.IMAGE} == {
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
    }
    assert {m for m, k in kinds.items() if k is MediaKind.AUDIO} == {
        "audio/wav",
        "audio/mpeg",
        "audio/ogg",
        "audio/webm",
        "audio/mp4",
        "audio/aac",
        "audio/flac",
    }
    assert {m for m, k in kinds.items() if k is MediaKind.VIDEO} == {"video/mp4", "video/webm"}
    gateway_documents = {
        "application/json",
        "application/msword",
        "application/pdf",
        "application/vnd.ms-excel",
        "application/vnd.ms-powerpoint",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/x-cfb",
        "application/yaml",
        "application/zip",
        "text/csv",
        "text/html",
        "text/markdown",
        "text/plain",
    }  # 2026.9.6's MANAGED_DOCUMENT_MIME_TYPES
    assert {m for m, k in kinds.items() if k is MediaKind.DOCUMENT} == gateway_documents - {"text/html"}
    for refused in ("image/svg+xml", "text/html", "application/xhtml+xml", "application/xml", "image/bmp"):
        assert refused not in MEDIA_TYPES


# ------------------------------------------------------------------------------------------------ decide


@pytest.mark.parametrize(
    ("mime", "size", "label", "expected"),
    [
        # The measured blocks (docs/measured/media-2026.9.6.md section 3).
        ("image/png", 124, "chart.png", Allowed(MediaKind.IMAGE, "image/png", 124, "chart.png", 124)),
        ("audio/wav", 844, "tone.wav", Allowed(MediaKind.AUDIO, "audio/wav", 844, "tone.wav", 844)),
        ("application/pdf", 193, "report.pdf", Allowed(MediaKind.DOCUMENT, "application/pdf", 193, "report.pdf", 193)),
        ("text/markdown", 40, "notes.md", Allowed(MediaKind.DOCUMENT, "text/markdown", 40, "notes.md", 40)),
        ("text/csv", 40, "data.csv", Allowed(MediaKind.DOCUMENT, "text/csv", 40, "data.csv", 40)),
        # No size: the kind's cap; no label: the kind's name.
        ("image/jpeg", None, None, Allowed(MediaKind.IMAGE, "image/jpeg", IMAGE_CAP, "image.jpg", None)),
        ("video/mp4", None, "", Allowed(MediaKind.VIDEO, "video/mp4", AUDIO_VIDEO_CAP, "video.mp4", None)),
        ("audio/mpeg", None, "song.mp3", Allowed(MediaKind.AUDIO, "audio/mpeg", AUDIO_VIDEO_CAP, "song.mp3", None)),
        (
            "application/zip",
            None,
            "a.zip",
            Allowed(MediaKind.DOCUMENT, "application/zip", DEFAULT_DOCUMENT_CAP, "a.zip", None),
        ),
        # Aliases are stored under their canonical type.
        ("image/jpg", 10, "p.jpeg", Allowed(MediaKind.IMAGE, "image/jpeg", 10, "p.jpeg", 10)),
        ("audio/x-wav", 10, "t.wav", Allowed(MediaKind.AUDIO, "audio/wav", 10, "t.wav", 10)),
        # At the cap exactly: allowed; zero bytes: allowed (an empty file is a file).
        ("image/png", IMAGE_CAP, "x.png", Allowed(MediaKind.IMAGE, "image/png", IMAGE_CAP, "x.png", IMAGE_CAP)),
        ("text/plain", 0, "empty.txt", Allowed(MediaKind.DOCUMENT, "text/plain", 0, "empty.txt", 0)),
        # A label whose extension is not the type's gets the type's (the last extension is what counts).
        ("image/png", 10, "x.svg", Allowed(MediaKind.IMAGE, "image/png", 10, "x.svg.png", 10)),
        ("text/plain", 10, "page.html", Allowed(MediaKind.DOCUMENT, "text/plain", 10, "page.html.txt", 10)),
        ("text/plain", 10, "/etc/hostname", Allowed(MediaKind.DOCUMENT, "text/plain", 10, "hostname.txt", 10)),
    ],
)
def test_decide_allows(mime, size, label, expected) -> None:
    assert DEFAULT_POLICY.decide(mime, size, label) == expected


@pytest.mark.parametrize(
    ("mime", "size", "label", "reason"),
    [
        (
            "application/pdf",
            40 * MiB,
            "report.pdf",
            "report.pdf was not stored: it is 40 MiB, over owc's 32 MiB limit for documents",
        ),
        (
            "application/pdf",
            32 * MiB + 1,
            "report.pdf",
            "report.pdf was not stored: it is 33,554,433 bytes,"
            " over owc's 32 MiB (33,554,432 bytes) limit for documents",
        ),
        (
            "image/png",
            12 * MiB + 512 * 1024,
            "noise.png",
            "noise.png was not stored: it is 12.5 MiB, over owc's 12 MiB limit for images",
        ),
        ("audio/wav", 20 * MiB, "t.wav", "t.wav was not stored: it is 20 MiB, over owc's 16 MiB limit for audio files"),
        ("video/webm", 17 * MiB, None, "a video was not stored: it is 17 MiB, over owc's 16 MiB limit for videos"),
        (
            "image/svg+xml",
            100,
            "logo.svg",
            "logo.svg was not stored: owc does not store files of type image/svg+xml (an SVG image can carry script)",
        ),
        (
            "text/html",
            100,
            "page.html",
            "page.html was not stored: owc does not store files of type text/html"
            " (a web page would run its script inside Open WebUI)",
        ),
        (
            "application/octet-stream",
            5,
            "blob.bin",
            "blob.bin was not stored: owc does not store files of type application/octet-stream",
        ),
        (None, 5, "x.png", "x.png was not stored: the Gateway gave no valid file type for it"),
        ("image/png\r\nevil", 5, "x.png", "x.png was not stored: the Gateway gave no valid file type for it"),
        ("image/png", -1, "x.png", "x.png was not stored: the Gateway gave an invalid size for it"),
        ("image/png", True, "x.png", "x.png was not stored: the Gateway gave an invalid size for it"),
        ("image/png", 1.5, "x.png", "x.png was not stored: the Gateway gave an invalid size for it"),
        ("image/png", "12", "x.png", "x.png was not stored: the Gateway gave an invalid size for it"),
        (
            "image/svg+xml",
            1,
            None,
            "a file was not stored: owc does not store files of type image/svg+xml (an SVG image can carry script)",
        ),
        ("image/png", -1, "../../etc/passwd", "passwd was not stored: the Gateway gave an invalid size for it"),
    ],
)
def test_decide_refuses(mime, size, label, reason) -> None:
    assert DEFAULT_POLICY.decide(mime, size, label) == Refused(reason)


def test_the_document_cap_is_the_owners() -> None:
    policy = MediaPolicy(document_cap=4 * MiB)
    assert policy.decide("application/pdf", 4 * MiB, "a.pdf") == Allowed(
        MediaKind.DOCUMENT, "application/pdf", 4 * MiB, "a.pdf", 4 * MiB
    )
    assert policy.decide("application/pdf", 6 * MiB, "a.pdf") == Refused(
        "a.pdf was not stored: it is 6 MiB, over owc's 4 MiB limit for documents"
    )
    assert policy.cap_for(MediaKind.IMAGE) == IMAGE_CAP  # the Gateway's own: not the owner's to raise
    for bad in (0, -1, True, 1.5):
        with pytest.raises((ValueError, TypeError)):
            MediaPolicy(document_cap=bad)


def test_a_refusal_line_never_holds_a_control_character_or_a_path() -> None:
    reason = DEFAULT_POLICY.decide("image/svg+xml", 1, "/tmp/\x1b[31mred\u202egnp.svg\r\nX-Evil: 1")
    assert isinstance(reason, Refused)
    assert all(unicodedata.category(ch)[0] != "C" for ch in reason.reason)
    assert "/tmp" not in reason.reason


# ------------------------------------------------------------------------------------------------ names


@pytest.mark.parametrize(
    ("label", "mime", "name"),
    [
        ("chart.png", "image/png", "chart.png"),
        ("Photo.JPG", "image/jpeg", "Photo.jpg"),
        ("photo.jpeg", "image/jpg", "photo.jpeg"),
        ("../../etc/passwd", "text/plain", "passwd.txt"),
        ("/abs/x.png", "image/png", "x.png"),
        ("C:\\Users\\me\\x.png", "image/png", "x.png"),
        ("a\x00b.png", "image/png", "ab.png"),
        ("a\nb\tc.png", "image/png", "abc.png"),  # control characters go, they are not spaces
        ("a  \u3000 b.png", "image/png", "a b.png"),  # whitespace runs are one space
        (".bashrc", "text/plain", "bashrc.txt"),
        ("...", "text/plain", "document.txt"),
        ("..", "image/png", "image.png"),
        ("", "image/png", "image.png"),
        (None, "audio/wav", "audio.wav"),
        (42, "video/webm", "video.webm"),
        ("x.svg", "image/png", "x.svg.png"),
        ("x.", "image/png", "x.png"),
        (".png", "image/png", "png.png"),
        ("report", "application/pdf", "report.pdf"),
        ("résumé.pdf", "application/pdf", "résumé.pdf"),
        ("e\u0301t\u00e9.md", "text/markdown", "été.md"),  # NFKC: one form of the same name
        ("数据.csv", "text/csv", "数据.csv"),
        ("a\u202egnp.exe", "image/png", "agnp.exe.png"),  # a right-to-left override cannot disguise the extension
        ("zero\u200bwidth.png", "image/png", "zerowidth.png"),
        ("evil\uff0f..\uff0fx.png", "image/png", "x.png"),  # a fullwidth solidus is a slash once normalized
        ("\u2024\u2024", "image/png", "image.png"),  # a one-dot leader pair is ".."
        ('a<b>c:d"e|f?g*h.png', "image/png", "a_b_c_d_e_f_g_h.png"),
        ("Generated image: a cat", "image/png", "Generated image_ a cat.png"),
        ("tone.WAV", "audio/x-wav", "tone.wav"),
        ("notes.markdown", "text/markdown", "notes.markdown"),
        ("config.yml", "application/x-yaml", "config.yml"),
        ("old.doc", "application/x-cfb", "old.doc"),
    ],
)
def test_safe_filename(label, mime, name) -> None:
    assert safe_filename(label, mime) == name


def test_a_long_name_is_cut_in_its_stem() -> None:
    name = safe_filename("a" * 300 + ".png", "image/png")
    assert name == "a" * (MAX_FILENAME_BYTES - 4) + ".png"
    wide = safe_filename("数" * 300 + ".pdf", "application/pdf")  # 3 bytes a character: cut on a boundary
    assert wide.endswith(".pdf") and len(wide.encode()) <= MAX_FILENAME_BYTES and set(wide[:-4]) == {"数"}
    assert safe_filename("x" * 300, "image/png") == "x" * (MAX_FILENAME_BYTES - 4) + ".png"


def test_safe_filename_refuses_a_type_owc_does_not_store() -> None:
    with pytest.raises(ValueError):
        safe_filename("x.svg", "image/svg+xml")


def test_shown_name() -> None:
    assert shown_name("../../etc/passwd") == "passwd"
    assert shown_name("") == "a file"
    assert shown_name(None, "an image") == "an image"
    long = shown_name("b" * 300 + ".pdf")
    assert len(long) == 80 and long.endswith("…")


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 bytes"),
        (1, "1 byte"),
        (1023, "1023 bytes"),
        (1024, "1 KiB"),
        (1536, "1.5 KiB"),
        (MiB, "1 MiB"),
        (40 * MiB, "40 MiB"),
        (12 * MiB + MiB // 2, "12.5 MiB"),
    ],
)
def test_format_size(size, text) -> None:
    assert format_size(size) == text


# ------------------------------------------------------------------------------------------------ the URL


@pytest.mark.parametrize(
    ("ws_url", "relative", "url"),
    [
        ("ws://127.0.0.1:18789/", OUTGOING, f"http://127.0.0.1:18789{OUTGOING}"),
        ("ws://127.0.0.1:18789", OUTGOING, f"http://127.0.0.1:18789{OUTGOING}"),
        ("wss://gw.example/openclaw", OUTGOING, f"https://gw.example/openclaw{OUTGOING}"),
        ("wss://gw.example/openclaw/", OUTGOING, f"https://gw.example/openclaw{OUTGOING}"),
        ("WSS://GW.example:8443/a/b/", OUTGOING, f"https://gw.example:8443/a/b{OUTGOING}"),
        ("ws://[::1]:18789/", OUTGOING, f"http://[::1]:18789{OUTGOING}"),
        # The WebSocket URL's userinfo and query (credentials, maybe) never reach the fetch.
        ("ws://user:pw@gw.lan:18789/?token=abc", OUTGOING, f"http://gw.lan:18789{OUTGOING}"),
        (
            "ws://gw.lan:18789/",
            "/api/artifacts/download/conn-1/t0k3n",
            "http://gw.lan:18789/api/artifacts/download/conn-1/t0k3n",
        ),
        # Double-encoded dots are no traversal (the server decodes once: the segment is "a%2e%2e", then "a..").
        (
            "ws://h/",
            "/api/chat/media/outgoing/a%252e%252e/x/full",
            "http://h/api/chat/media/outgoing/a%252e%252e/x/full",
        ),
    ],
)
def test_download_url(ws_url, relative, url) -> None:
    assert download_url(ws_url, relative) == url


@pytest.mark.parametrize(
    ("relative", "why"),
    [
        ("http://evil/x", "scheme or a host"),
        ("https://evil/api/chat/media/outgoing/x", "scheme or a host"),
        ("//evil/x", "host of its own"),
        ("//evil/api/chat/media/outgoing/x", "host of its own"),
        ("api/chat/media/outgoing/x", "scheme or a host"),
        ("/api/other", "not one of the Gateway's download routes"),
        ("/api/chat/media/outgoingx/y", "not one of the Gateway's download routes"),
        ("/__openclaw__/assistant-media?source=/etc/passwd", "not one of the Gateway's download routes"),
        ("/API/chat/media/outgoing/x", "not one of the Gateway's download routes"),
        ("/api/chat/media/outgoing/", "names no file"),
        ("/api/chat/media/outgoing/../../x", ". or .. segment"),
        ("/api/chat/media/outgoing/a/./b", ". or .. segment"),
        ("/api/chat/media/outgoing/a/..", ". or .. segment"),
        ("/api/chat/media/outgoing/%2e%2e/%2e%2e/x", ". or .. segment"),
        ("/api/chat/media/outgoing/%2E%2E/x", ". or .. segment"),
        ("/api/chat/media/outgoing/.%2e/x", ". or .. segment"),
        ("/api/chat/media/outgoing/%252e%252e/x", ". or .. segment"),  # decoded twice over
        ("/api/chat/media/outgoing/a%2f..%2fb", ". or .. segment"),
        ("/api/chat/media/outgoing/a%5c..%5cb", "encoded backslash"),
        ("/api/chat/media/outgoing/a%00b", "encoded backslash or control"),
        ("/api/chat/media/outgoing/a%0d%0aX-Evil:%201", "encoded backslash or control"),
        ("/api/chat/media/outgoing/a%ffb", "not UTF-8"),
        ("/api/chat/media/outgoing/a\\..\\b", "backslash"),
        ("\\\\evil\\x", "backslash"),
        ("/api/chat/media/outgoing/a//b", "empty path segment"),
        ("/api/chat/media/outgoing/a\r\nHost: evil", "control"),
        ("/api/chat/media/outgoing/a b", "space"),
        ("/api/chat/media/outgoing/é", "non-ASCII"),
        ("/api/chat/media/outgoing/a#frag", "fragment"),
        ("", "empty"),
        (None, "empty"),
        ("/api/chat/media/outgoing/" + "a" * 5000, "too long"),
    ],
)
def test_download_url_refuses(relative, why) -> None:
    with pytest.raises(UnsafeDownloadUrl, match=why.replace(".", r"\.").replace("(", r"\(")) as info:
        download_url("ws://127.0.0.1:18789/", relative)
    assert not leaked(str(info.value))


@pytest.mark.parametrize(
    ("ws_url", "why"),
    [
        ("http://127.0.0.1:18789/", "not ws:// or wss://"),
        ("ftp://h/", "not ws:// or wss://"),
        ("ws:///x", "no host"),
        ("ws://h:99999/", "invalid host or port"),
        ("ws://h /", "plain ASCII"),
        ("ws://h/a/../b", "not a plain path"),
    ],
)
def test_download_url_refuses_a_gateway_url(ws_url, why) -> None:
    with pytest.raises(UnsafeDownloadUrl, match=why):
        download_url(ws_url, OUTGOING)


def test_a_refusal_never_quotes_the_ticket() -> None:
    for relative in (OUTGOING.replace("/full", "/../full"), "http://evil" + OUTGOING, OUTGOING + "#x"):
        with pytest.raises(UnsafeDownloadUrl) as info:
            download_url("ws://h/", relative)
        assert TICKET not in str(info.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"http://127.0.0.1:18789{OUTGOING}", "http://127.0.0.1:18789/api/chat/media/outgoing/…"),
        (f"https://gw.example/openclaw{OUTGOING}", "https://gw.example/openclaw/api/chat/media/outgoing/…"),
        ("http://h:1/api/artifacts/download/conn/t0k3n-secret", "http://h:1/api/artifacts/download/…"),
        ("http://u:p@h/elsewhere?x=1", "http://h/…"),
    ],
)
def test_shown_url(url, shown) -> None:
    assert shown_url(url) == shown


# ------------------------------------------------------------------------------------------------ the answer

PNG_HEAD = [("content-type", "image/png"), ("content-length", "124")]


@pytest.mark.parametrize(
    ("status", "headers", "expect", "cap", "problem"),
    [
        (200, PNG_HEAD, "image/png", 124, None),
        (200, [(b"Content-Type", b"image/png"), (b"Content-Length", b"124")], "image/png", 124, None),
        (200, [("content-type", "IMAGE/PNG; charset=binary"), ("content-length", "1")], "image/png", 124, None),
        (200, [("content-type", "image/jpg"), ("content-length", "1")], "image/jpeg", 124, None),
        (200, [("content-type", "image/jpeg"), ("content-length", "1")], "image/jpg", 124, None),
        (200, [("content-type", "audio/x-wav"), ("content-length", "1")], "audio/wav", 124, None),
        (200, [("content-type", "image/png"), ("transfer-encoding", "chunked")], "image/png", 124, None),
        (200, [*PNG_HEAD, ("content-encoding", "identity")], "image/png", 124, None),
        (200, [("content-type", "image/png"), ("content-length", "0")], "image/png", 0, None),
        # Redirects: never followed.
        (301, [("location", "http://evil/")], "image/png", 124, Problem.REDIRECT),
        (302, [("location", "/elsewhere")], "image/png", 124, Problem.REDIRECT),
        (307, [], "image/png", 124, Problem.REDIRECT),
        (308, [], "image/png", 124, Problem.REDIRECT),
        # The ticket: refused or expired (ask for a new one, once).
        (401, [], "image/png", 124, Problem.TICKET),
        (403, [], "image/png", 124, Problem.TICKET),
        (404, [], "image/png", 124, Problem.TICKET),
        (410, [], "image/png", 124, Problem.TICKET),
        # Any other status.
        (206, PNG_HEAD, "image/png", 124, Problem.STATUS),
        (204, [], "image/png", 124, Problem.STATUS),
        (202, [("content-type", "application/json")], "audio/wav", 124, Problem.STATUS),  # "preparing"
        (500, [], "image/png", 124, Problem.STATUS),
        (429, [], "image/png", 124, Problem.STATUS),
        # The type.
        (200, [("content-type", "text/html"), ("content-length", "1")], "image/png", 124, Problem.WRONG_TYPE),
        (200, [("content-type", "image/svg+xml"), ("content-length", "1")], "image/png", 124, Problem.WRONG_TYPE),
        (200, [("content-length", "1")], "image/png", 124, Problem.WRONG_TYPE),
        (200, [*PNG_HEAD, ("content-type", "image/png")], "image/png", 124, Problem.WRONG_TYPE),  # two
        (200, [("content-type", "image/png"), ("content-length", "1")], "image/svg+xml\r\n", 124, Problem.WRONG_TYPE),
        # Encodings: never asked for.
        (200, [*PNG_HEAD, ("content-encoding", "gzip")], "image/png", 124, Problem.ENCODED),
        (200, [*PNG_HEAD, ("content-encoding", "identity, br")], "image/png", 124, Problem.ENCODED),
        (200, [*PNG_HEAD, ("content-encoding", "")], "image/png", 124, Problem.ENCODED),
        # The length.
        (200, [("content-type", "image/png"), ("content-length", "125")], "image/png", 124, Problem.TOO_LARGE),
        (200, [("content-type", "image/png"), ("content-length", "1, 1")], "image/png", 124, None),
        (200, [("content-type", "image/png"), ("content-length", "1, 2")], "image/png", 124, Problem.UNFRAMED),
        (200, [("content-type", "image/png"), ("content-length", "-1")], "image/png", 124, Problem.UNFRAMED),
        (200, [("content-type", "image/png"), ("content-length", "1e3")], "image/png", 124, Problem.UNFRAMED),
        (200, [("content-type", "image/png")], "image/png", 124, Problem.UNFRAMED),
    ],
)
def test_check_response(status, headers, expect, cap, problem) -> None:
    bad = check_response(status, headers, expect_mime=expect, cap=cap)
    assert (bad.problem if bad is not None else None) is problem
    if bad is not None:
        assert bad.status == status and "\n" not in bad.line and "\r" not in bad.line


@pytest.mark.parametrize(
    ("status", "headers", "line"),
    [
        (302, [], "the Gateway answered with a redirect (HTTP 302), which owc does not follow"),
        (404, [], "the Gateway refused the download ticket or it has expired (HTTP 404)"),
        (500, [], "the Gateway answered HTTP 500 instead of the file"),
        (
            200,
            [("content-type", "text/html; charset=utf-8"), ("content-length", "1")],
            "the Gateway sent text/html where it had announced image/png",
        ),
        (200, [("content-length", "1")], "the Gateway sent no type where it had announced image/png"),
        (
            200,
            [("content-type", "<script>"), ("content-length", "1")],
            "the Gateway sent an unreadable type where it had announced image/png",
        ),
        (
            200,
            [*PNG_HEAD, ("content-encoding", "gzip")],
            "the Gateway sent it encoded (gzip), which owc does not accept",
        ),
        (
            200,
            [("content-type", "image/png"), ("content-length", str(40 * MiB))],
            "the Gateway announced 40 MiB, over the 124 bytes owc accepts for it",
        ),
    ],
)
def test_check_response_lines(status, headers, line) -> None:
    bad = check_response(status, headers, expect_mime="image/png", cap=124)
    assert bad is not None and bad.line == line


# ------------------------------------------------------------------------------------------------ properties


ALLOWED_MIMES = sorted(MEDIA_TYPES) + ["image/jpg", "audio/x-wav"]


@settings(max_examples=400, deadline=None)
@given(label=st.one_of(st.none(), st.text(max_size=400)), mime=st.sampled_from(ALLOWED_MIMES))
def test_any_label_gives_a_harmless_name(label, mime) -> None:
    name = safe_filename(label, mime)
    assert name and not name.startswith(".") and not name.endswith((" ", "."))
    assert not any(ch in name for ch in '/\\<>:"|?*')
    assert all(unicodedata.category(ch)[0] != "C" for ch in name)
    assert name not in (".", "..")
    assert len(name.encode("utf-8")) <= MAX_FILENAME_BYTES
    ext = name.rpartition(".")[2]
    media = MEDIA_TYPES[normalize_mime(mime)]
    assert ext in media.extensions
    assert safe_filename(name, mime) == name  # a stored name stays itself
    assert clean_name(clean_name(label)) == clean_name(label)


@settings(max_examples=400, deadline=None)
@given(
    mime=st.one_of(st.none(), st.sampled_from(ALLOWED_MIMES + ["image/svg+xml", "text/html"]), st.text(max_size=30)),
    size=st.one_of(st.none(), st.integers(min_value=-10, max_value=200 * MiB)),
    label=st.one_of(st.none(), st.text(max_size=200)),
)
def test_any_block_is_decided(mime, size, label) -> None:
    verdict = DEFAULT_POLICY.decide(mime, size, label)
    if isinstance(verdict, Allowed):
        assert verdict.mime in MEDIA_TYPES
        assert verdict.cap <= DEFAULT_POLICY.cap_for(verdict.kind)
        assert size is None or verdict.cap == size
        assert verdict.filename == safe_filename(label, verdict.mime)
    else:
        assert " was not stored: " in verdict.reason
        assert all(unicodedata.category(ch)[0] != "C" for ch in verdict.reason)
        assert "/" not in verdict.reason.split(" was not stored: ")[0]


PATH_PIECES = st.sampled_from(
    [
        "a",
        "full",
        "..",
        ".",
        "%2e",
        "%2E",
        "%25",
        "2e",
        "%2f",
        "%5c",
        "/",
        "//",
        "\\",
        "?",
        "#",
        "%00",
        "\r\n",
        " ",
        "é",
        "http:",
        "api",
        "/api/chat/media/outgoing/",
        "/api/artifacts/download/",
        "/api/other/",
    ]
)


@settings(max_examples=1000, deadline=None)
@given(pieces=st.lists(PATH_PIECES, max_size=12), prefix=st.sampled_from(["", "/openclaw", "/a/b"]))
def test_any_relative_url_stays_on_a_download_route(pieces, prefix) -> None:
    relative = "".join(pieces)
    ws_url = f"wss://gw.example:8443{prefix}/"
    try:
        url = download_url(ws_url, relative)
    except UnsafeDownloadUrl:
        return
    origin = f"https://gw.example:8443{prefix}"
    assert url.startswith(origin + "/") and url[len(origin) :] == relative
    path = urllib.parse.urlsplit(url).path
    assert path.startswith(tuple(prefix + route for route in DOWNLOAD_ROUTES))
    for _ in range(4):
        assert ".." not in path.split("/") and "." not in path.split("/") and "\\" not in path
        path = urllib.parse.unquote(path)


@settings(max_examples=300, deadline=None)
@given(length=st.integers(min_value=0, max_value=2**40), cap=st.integers(min_value=0, max_value=2**40))
def test_a_length_over_the_cap_is_always_refused(length, cap) -> None:
    bad = check_response(
        200, [("content-type", "image/png"), ("content-length", str(length))], expect_mime="image/png", cap=cap
    )
    assert (bad is not None and bad.problem is Problem.TOO_LARGE) == (length > cap)

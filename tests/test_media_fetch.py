"""``owc.gateway.media_fetch``: the one GET of a ticket URL, against a real HTTP server on 127.0.0.1 written here with
Trio (plain and TLS: a trustme CA, and a certificate pin), answering canned responses byte for byte. Timed cases run
on Trio's MockClock (autojump): a hung or trickling server costs no real second."""

from __future__ import annotations

import functools
import hashlib
import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import h11
import pytest
import trio
import trustme

from owc import __version__
from owc.gateway import GatewayConfig
from owc.gateway.media_fetch import (
    MEDIA_FETCH_TIMEOUT,
    FetchBroken,
    FetchRedirected,
    FetchRefused,
    FetchTimedOut,
    FetchTooLarge,
    FetchUnreachable,
    FetchWrongType,
    MediaFetchError,
    fetch_media,
    gateway_tls,
)
from owc.rules.media_policy import download_url

from conftest import secret

MiB = 1024 * 1024
TICKET = secret("v1.eyJzY29wZSI6Im1hbmFnZWQtb3V0Z29pbmctaW1hZ2UifQ.c2lnbmF0dXJlLTAxMjM0NTY3ODk")
RELATIVE = f"/api/chat/media/outgoing/agent%3Amain%3Aowc/6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f/full?mediaTicket={TICKET}"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4

Stream = trio.SocketStream | trio.SSLStream[trio.SocketStream]
Respond = Callable[[Stream, "Served"], Awaitable[None]]


@attrs.define
class Served:
    """What the test server saw: each request (method, target, headers), and how many body bytes it got out."""

    requests: list[h11.Request] = attrs.Factory(list)
    connections: int = 0
    sent: int = 0
    errors: list[str] = attrs.Factory(list)

    def headers(self, index: int = 0) -> dict[str, str]:
        return {k.decode().lower(): v.decode() for k, v in self.requests[index].headers}


def head(status: int, *headers: tuple[str, str], reason: str = "X") -> bytes:
    lines = [f"HTTP/1.1 {status} {reason}", *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def canned(raw: bytes, *, close: bool = True) -> Respond:
    """A server that answers ``raw`` as it is and closes."""

    async def respond(stream: Stream, served: Served) -> None:
        await stream.send_all(raw)
        served.sent += len(raw)

    return respond


def ok(body: bytes = PNG, mime: str = "image/png", *extra: tuple[str, str]) -> Respond:
    return canned(head(200, ("Content-Type", mime), ("Content-Length", str(len(body))), *extra) + body)


async def _read_request(stream: Stream, served: Served) -> bool:
    conn = h11.Connection(h11.SERVER)
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await stream.receive_some(65536)
            if not data:
                return False
            conn.receive_data(data)
        elif isinstance(event, h11.Request):
            served.requests.append(event)
        elif isinstance(event, h11.EndOfMessage):
            return True


@asynccontextmanager
async def gateway(respond: Respond, ssl_context: ssl.SSLContext | None = None) -> AsyncIterator[tuple[str, Served]]:
    """A real server on 127.0.0.1 (TLS with ``ssl_context``): ``(its WebSocket URL, what it saw)``."""
    served = Served()

    async def handler(stream: Stream) -> None:
        served.connections += 1
        try:
            if await _read_request(stream, served):
                await respond(stream, served)
        except (trio.BrokenResourceError, trio.ClosedResourceError, ssl.SSLError, h11.ProtocolError) as exc:
            served.errors.append(type(exc).__name__)
        finally:
            await trio.aclose_forcefully(stream)

    async with trio.open_nursery() as nursery:
        if ssl_context is None:
            serve = functools.partial(trio.serve_tcp, handler, 0, host="127.0.0.1")
        else:
            serve = functools.partial(
                trio.serve_ssl_over_tcp, handler, 0, ssl_context, host="127.0.0.1", https_compatible=True
            )
        listeners = await nursery.start(serve)
        sock = listeners[0].socket if ssl_context is None else listeners[0].transport_listener.socket
        port = sock.getsockname()[1]
        yield f"{'wss' if ssl_context else 'ws'}://127.0.0.1:{port}/", served
        nursery.cancel_scope.cancel()


async def fetch(ws_url: str, *, cap: int = 1 * MiB, mime: str = "image/png", **kwargs) -> bytes:
    kwargs.setdefault("ssl_context", None)
    return await fetch_media(download_url(ws_url, RELATIVE), cap=cap, expect_mime=mime, **kwargs)


# ------------------------------------------------------------------------------------------------ the request


async def test_a_200_of_the_announced_type_gives_its_bytes(caplog) -> None:
    with caplog.at_level(logging.INFO, logger="owc.gateway"):
        async with gateway(ok()) as (ws_url, served):
            assert await fetch(ws_url) == PNG
    port = ws_url.rsplit(":", 1)[1].rstrip("/")
    [request] = served.requests
    assert request.method == b"GET"
    assert request.target.decode() == RELATIVE  # the ticket goes, in the query, as the Gateway gave it
    assert request.http_version == b"1.1"
    assert served.headers() == {
        "host": f"127.0.0.1:{port}",
        "user-agent": f"owc/{__version__}",
        "accept": "image/png",
        "accept-encoding": "identity",
        "connection": "close",
    }  # no Authorization, no Cookie, no Range: the ticket is the only credential
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("gateway.media_fetch")]
    assert line.startswith(
        f"gateway.media_fetch url=http://127.0.0.1:{port}/api/chat/media/outgoing/… status=200 bytes={len(PNG)} ms="
    )
    assert line.endswith(" outcome=ok") and TICKET not in line and "agent%3Amain" not in line


async def test_the_url_is_resolved_beneath_a_proxy_path_prefix() -> None:
    async with gateway(ok()) as (ws_url, served):
        assert await fetch(ws_url + "openclaw/") == PNG
    assert served.requests[0].target.decode() == "/openclaw" + RELATIVE


@pytest.mark.parametrize(
    ("served_type", "expect"),
    [
        ("image/png", "image/png"),
        ("IMAGE/PNG; charset=binary", "image/png"),
        ("image/jpg", "image/jpeg"),
        ("audio/x-wav", "audio/wav"),
        ("application/pdf", "application/pdf"),
    ],
)
async def test_the_type_may_be_written_otherwise(served_type, expect) -> None:
    async with gateway(ok(PNG, served_type)) as (ws_url, _):
        assert await fetch(ws_url, mime=expect) == PNG


async def test_a_chunked_body_within_the_cap() -> None:
    body = head(200, ("Content-Type", "image/png"), ("Transfer-Encoding", "chunked"))
    for i in range(0, len(PNG), 100):
        piece = PNG[i : i + 100]
        body += f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    async with gateway(canned(body + b"0\r\n\r\n")) as (ws_url, _):
        assert await fetch(ws_url, cap=len(PNG)) == PNG


async def test_an_empty_file_and_a_body_exactly_at_the_cap() -> None:
    async with gateway(ok(b"", "text/plain")) as (ws_url, _):
        assert await fetch(ws_url, cap=0, mime="text/plain") == b""
    async with gateway(ok()) as (ws_url, _):
        assert await fetch(ws_url, cap=len(PNG)) == PNG


async def test_a_100_continue_before_the_answer_is_passed_over() -> None:
    raw = head(100, reason="Continue") + head(200, ("Content-Type", "image/png"), ("Content-Length", "3")) + b"abc"
    async with gateway(canned(raw)) as (ws_url, _):
        assert await fetch(ws_url) == b"abc"


# ------------------------------------------------------------------------------------------------ refused answers


async def _refused(respond: Respond, **kwargs) -> tuple[MediaFetchError, Served]:
    async with gateway(respond) as (ws_url, served):
        with pytest.raises(MediaFetchError) as info:
            await fetch(ws_url, **kwargs)
    assert TICKET not in str(info.value) and "\n" not in str(info.value)
    return info.value, served


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_a_redirect_is_not_followed(status) -> None:
    error, served = await _refused(canned(head(status, ("Location", "http://127.0.0.1:9/x"), ("Content-Length", "0"))))
    assert isinstance(error, FetchRedirected) and error.status == status
    assert not error.new_ticket and not error.retryable
    assert served.connections == 1 and len(served.requests) == 1
    assert str(error) == f"the Gateway answered with a redirect (HTTP {status}), which owc does not follow"


@pytest.mark.parametrize("status", [401, 403, 404, 410])
async def test_a_refused_or_expired_ticket_asks_for_a_new_one(status) -> None:
    body = b'{"error":{"message":"Unauthorized","type":"unauthorized"}}'
    raw = head(status, ("Content-Type", "application/json"), ("Content-Length", str(len(body)))) + body
    error, _ = await _refused(canned(raw))
    assert isinstance(error, FetchRefused) and error.status == status
    assert error.new_ticket and not error.retryable
    assert str(error) == f"the Gateway refused the download ticket or it has expired (HTTP {status})"


@pytest.mark.parametrize(("status", "retryable"), [(500, True), (503, True), (429, True), (206, False), (400, False)])
async def test_other_statuses_are_refused(status, retryable) -> None:
    error, _ = await _refused(canned(head(status, ("Content-Length", "0"))))
    assert isinstance(error, FetchRefused) and error.status == status
    assert error.retryable is retryable and not error.new_ticket


@pytest.mark.parametrize(
    ("headers", "line"),
    [
        ((("Content-Type", "text/html"),), "the Gateway sent text/html where it had announced image/png"),
        ((), "the Gateway sent no type where it had announced image/png"),
        (
            (("Content-Type", "image/png"), ("Content-Encoding", "gzip")),
            "the Gateway sent it encoded (gzip), which owc does not accept",
        ),
    ],
)
async def test_a_wrong_type_or_an_encoding_is_refused(headers, line) -> None:
    raw = head(200, *headers, ("Content-Length", str(len(PNG)))) + PNG
    error, _ = await _refused(canned(raw))
    assert isinstance(error, FetchWrongType) and str(error) == line


def _endless(chunked: bool, total: int = 64 * MiB) -> Respond:
    """A server with a body far larger than any cap (announced or chunked), sending until the client leaves."""

    async def respond(stream: Stream, served: Served) -> None:
        if chunked:
            await stream.send_all(head(200, ("Content-Type", "image/png"), ("Transfer-Encoding", "chunked")))
        else:
            await stream.send_all(head(200, ("Content-Type", "image/png"), ("Content-Length", str(total))))
        piece = b"x" * 65536
        while served.sent < total:
            frame = f"{len(piece):x}\r\n".encode() + piece + b"\r\n" if chunked else piece
            await stream.send_all(frame)
            served.sent += len(piece)

    return respond


async def test_an_announced_length_over_the_cap_is_refused_before_the_body() -> None:
    error, served = await _refused(_endless(chunked=False), cap=1000)
    assert isinstance(error, FetchTooLarge)
    assert str(error) == "the Gateway announced 64 MiB, over the 1000 bytes owc accepts for it"
    assert served.sent < 64 * MiB  # owc left: the server could not push it all into the socket


async def test_a_chunked_body_over_the_cap_is_cut_off() -> None:
    error, served = await _refused(_endless(chunked=True), cap=1000)
    assert isinstance(error, FetchTooLarge)
    assert str(error) == "the Gateway sent more than the 1000 bytes owc accepts for it"
    assert served.sent < 64 * MiB


async def test_a_body_longer_than_the_declared_size_is_too_large() -> None:
    """The cap is the block's own ``sizeBytes`` when it is smaller than the kind's: one byte more is refused."""
    error, _ = await _refused(ok(), cap=len(PNG) - 1)
    assert isinstance(error, FetchTooLarge)


# ------------------------------------------------------------------------------------------------ broken answers


@pytest.mark.parametrize(
    ("raw", "line"),
    [
        # Closed early: fewer bytes than announced.
        (
            head(200, ("Content-Type", "image/png"), ("Content-Length", "1000")) + b"0123456789",
            "the Gateway's answer broke off before the whole file came",
        ),
        # Closed inside a chunked body.
        (
            head(200, ("Content-Type", "image/png"), ("Transfer-Encoding", "chunked")) + b"64\r\n0123",
            "the Gateway's answer broke off before the whole file came",
        ),
        # A chunk size that is no number.
        (
            head(200, ("Content-Type", "image/png"), ("Transfer-Encoding", "chunked")) + b"zz\r\n0123\r\n",
            "the Gateway's answer broke off before the whole file came",
        ),
        # Closed without a word.
        (b"", "the Gateway closed the connection without answering"),
        # Closed inside the head.
        (b"HTTP/1.1 200 OK\r\nContent-Type: ima", "the Gateway's answer was not a valid HTTP response"),
        # Not HTTP at all.
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "the Gateway's answer was not a valid HTTP response"),
        # No framing: a cut connection would look like the end of the file.
        (
            head(200, ("Content-Type", "image/png")) + PNG,
            "the Gateway's answer gave no length (a cut connection could not be told from the end of the file)",
        ),
        # A transfer encoding h11 does not speak.
        (
            head(200, ("Content-Type", "image/png"), ("Transfer-Encoding", "gzip, chunked")) + b"0\r\n\r\n",
            "the Gateway's answer was not a valid HTTP response",
        ),
    ],
)
async def test_a_broken_answer_is_refused(raw, line) -> None:
    error, _ = await _refused(canned(raw))
    assert isinstance(error, FetchBroken) and error.retryable and str(error) == line


async def test_a_head_too_long_is_refused() -> None:
    raw = head(200, ("Content-Type", "image/png"), *[(f"X-Pad-{i}", "y" * 100) for i in range(400)])
    error, _ = await _refused(canned(raw))
    assert isinstance(error, FetchBroken)


async def test_nothing_listening_is_unreachable() -> None:
    sock = trio.socket.socket()
    await sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # bound, never listening, closed: the port refuses
    with pytest.raises(FetchUnreachable) as info:
        await fetch(f"ws://127.0.0.1:{port}/")
    assert info.value.retryable and str(info.value).startswith("owc could not connect to the Gateway")


# ------------------------------------------------------------------------------------------------ the timer


async def test_a_server_that_never_answers_times_out(autojump_clock) -> None:
    async def silent(stream: Stream, served: Served) -> None:
        await trio.sleep_forever()

    start = trio.current_time()
    error, _ = await _refused(silent)
    assert isinstance(error, FetchTimedOut) and error.retryable
    assert trio.current_time() - start == pytest.approx(MEDIA_FETCH_TIMEOUT)
    assert str(error) == f"the Gateway did not send the file within {MEDIA_FETCH_TIMEOUT:g} s"


async def test_a_trickling_server_times_out_on_the_whole_fetch(autojump_clock) -> None:
    """One byte a second: every read makes progress, but the whole fetch is bounded."""

    async def trickle(stream: Stream, served: Served) -> None:
        await stream.send_all(head(200, ("Content-Type", "image/png"), ("Content-Length", "100000")))
        while True:
            await trio.sleep(1)
            await stream.send_all(b"x")
            served.sent += 1

    start = trio.current_time()
    error, served = await _refused(trickle, timeout=30)
    assert isinstance(error, FetchTimedOut)
    assert trio.current_time() - start == pytest.approx(30)
    assert 25 <= served.sent <= 30


async def test_a_timeout_is_logged_without_the_ticket(autojump_clock, caplog) -> None:
    async def silent(stream: Stream, served: Served) -> None:
        await trio.sleep_forever()

    with caplog.at_level(logging.INFO, logger="owc.gateway"):
        await _refused(silent, timeout=5)
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("gateway.media_fetch")]
    assert line.endswith("status=- bytes=0 ms=5000 outcome=FetchTimedOut") and TICKET not in line


# ------------------------------------------------------------------------------------------------ TLS


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def cert(ca: trustme.CA) -> trustme.LeafCert:
    return ca.issue_cert("127.0.0.1")


@pytest.fixture
def server_tls(cert: trustme.LeafCert) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(context)
    return context


def _pin(cert: trustme.LeafCert) -> str:
    der = ssl.PEM_cert_to_DER_cert(cert.cert_chain_pems[0].bytes().decode())
    return ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())  # as openssl prints it


async def test_https_with_the_gateways_ca_file(ca, server_tls, tmp_path: Path) -> None:
    ca_file = tmp_path / "gateway-ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    async with gateway(ok(), server_tls) as (ws_url, served):
        context, pin = gateway_tls(ws_url, GatewayConfig(ca_file=ca_file))
        assert context is not None and pin is None
        assert await fetch(ws_url, ssl_context=context, pin_sha256=pin) == PNG
    assert served.requests[0].target.decode() == RELATIVE


async def test_https_with_the_pin(cert, server_tls) -> None:
    async with gateway(ok(), server_tls) as (ws_url, _):
        context, pin = gateway_tls(ws_url, GatewayConfig(pin_sha256=_pin(cert)))
        assert context is not None and pin is not None
        assert await fetch(ws_url, ssl_context=context, pin_sha256=pin) == PNG


async def test_a_wrong_pin_is_refused(ca, server_tls) -> None:
    other = ca.issue_cert("127.0.0.1")  # signed by the same CA, but not the pinned certificate
    async with gateway(ok(), server_tls) as (ws_url, served):
        context, pin = gateway_tls(ws_url, GatewayConfig(pin_sha256=_pin(other)))
        with pytest.raises(FetchUnreachable) as info:
            await fetch(ws_url, ssl_context=context, pin_sha256=pin)
    assert not info.value.retryable
    assert str(info.value) == "the Gateway's TLS certificate was refused (not the pinned one)"
    assert served.requests == []  # nothing was sent to the wrong server, the ticket least of all


async def test_an_untrusted_certificate_is_refused(server_tls) -> None:
    async with gateway(ok(), server_tls) as (ws_url, served):
        context, pin = gateway_tls(ws_url, GatewayConfig())  # the system's CAs only
        with pytest.raises(FetchUnreachable) as info:
            await fetch(ws_url, ssl_context=context, pin_sha256=pin)
    assert not info.value.retryable and "certificate" in str(info.value)
    assert served.requests == []


async def test_plain_http_and_tls_are_never_mixed(server_tls) -> None:
    """An https URL without the Gateway's context (or http with one) is the caller's bug: never a downgrade."""
    async with gateway(ok(), server_tls) as (ws_url, served):
        with pytest.raises(ValueError):
            await fetch(ws_url, ssl_context=None)
    with pytest.raises(ValueError):
        await fetch_media(
            "http://127.0.0.1:9/api/chat/media/outgoing/x",
            ssl_context=ssl.create_default_context(),
            cap=1,
            expect_mime="image/png",
        )
    assert served.connections == 0
    assert gateway_tls("ws://127.0.0.1:1/", GatewayConfig()) == (None, None)


@pytest.mark.parametrize("mime", ["", "png", "image/png\r\nX-Evil: 1"])
async def test_the_expected_type_must_be_a_type(mime) -> None:
    with pytest.raises(ValueError):
        await fetch_media("http://127.0.0.1:9/api/chat/media/outgoing/x", ssl_context=None, cap=1, expect_mime=mime)


@pytest.mark.parametrize(
    "url",
    ["ftp://h/x", "http://u:p@h/x", "http:///x", "http://h/x#frag", "http://h/x y", "http://h/é"],
)
async def test_only_a_plain_http_url_is_fetched(url) -> None:
    with pytest.raises(ValueError):
        await fetch_media(url, ssl_context=None, cap=1, expect_mime="image/png")

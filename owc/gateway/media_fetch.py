"""The one HTTP GET owc makes: a managed file's bytes from the Gateway's ticket URL (issue 28).

OpenClaw 2026.9.6 has no RPC that returns a managed file's bytes over the WebSocket: ``artifacts.download`` answers
a Gateway-relative URL holding a 5-minute ticket, and the bytes come from one GET of it on the Gateway's own HTTP
origin (docs/measured/media-2026.9.6.md, sections 0.6, 5 and 10). This module is that GET and nothing more:

* the URL is ``owc.rules.media_policy.download_url`` of the Gateway's answer (the origin and path prefix of the
  WebSocket URL, one of the two download routes); what the answer must be is ``check_response`` there;
* the same TLS trust as the WebSocket (``gateway_tls``: the CA file or the certificate pin of the Gateway settings,
  through ``owc.gateway.admission``, with the pin checked after the TLS handshake exactly as the WebSocket does);
* no credential but the ticket: no ``Authorization`` (the shared token works there too, but must not travel where
  the ticket suffices; a device token is not accepted there), no cookie; no redirect followed; no ``Range``;
  ``Accept-Encoding: identity``; ``Connection: close`` (one request per connection: nothing to pool);
* at most ``cap`` body bytes kept: a ``content-length`` over it is refused before the body, and a body that runs
  past it (chunked, or longer than announced) is refused the moment it does; once the head is read, each read asks
  for no more than what is left under the cap plus one byte;
* one transport timer, ``MEDIA_FETCH_TIMEOUT``, bounding the whole fetch (a hung or trickling server);
* HTTP/1.1 through h11 (owc's WebSocket handshake already speaks it), over ``trio.open_tcp_stream``.

Errors are ``MediaFetchError`` subclasses, each with a line a person may read (never the URL: its query, or the last
segment of an ``/api/artifacts/download/`` path, is the ticket) and what the caller may do: ``new_ticket`` (ask
``artifacts.download`` again, once) or ``retryable`` (the same ticket may work later). Each fetch logs one line,
``gateway.media_fetch``, with ``shown_url`` of the URL (origin and route only).
"""

from __future__ import annotations

import logging
import ssl
import urllib.parse

import attrs
import h11
import trio

from owc import __version__
from owc.gateway.admission import Admission, AdmissionSettings, check_pin
from owc.gateway.url import redact_url
from owc.rules.media_policy import Problem, body_too_large, check_response, normalize_mime, shown_url

log = logging.getLogger("owc.gateway")

#: The fetch's one timer: connecting, TLS, the request and the whole body, in seconds on Trio's clock. A bound on a
#: hung or trickling server, never a decision about a server that answers: 32 MiB (the default document cap) in
#: 120 s needs about 2.2 Mbit/s, far under a LAN or a loopback Gateway. A fetch that hits it may be repeated (the
#: ticket lives 5 minutes; past them the caller asks for a new one).
MEDIA_FETCH_TIMEOUT = 120.0

#: How much one read asks for (as the WebSocket's ``RECEIVE_SIZE``); once the body has begun, never more than what
#: is left under the cap plus one byte.
RECEIVE_SIZE = 64 * 1024
#: The longest answer head (status line and headers) owc reads: the Gateway's is under 1 KiB.
MAX_HEAD = 16 * 1024


class MediaFetchError(Exception):
    """A fetch that gave no file. ``str()`` is one line for a person (the caller puts it after "<name> was not
    stored: "); it names the status, the type or the size, never the URL. ``new_ticket``: ask
    ``artifacts.download`` for a new URL and fetch once more; ``retryable``: the same URL may work later."""

    new_ticket: bool = False
    retryable: bool = False


class FetchRefused(MediaFetchError):
    """The Gateway answered a status other than 200 and not a redirect. 401, 403, 404 and 410 mean the ticket was
    refused or has expired (``new_ticket``); a 5xx or 429 is a Gateway not ready (``retryable``)."""

    def __init__(self, status: int, line: str) -> None:
        super().__init__(line)
        self.status = status
        self.new_ticket = status in (401, 403, 404, 410)
        self.retryable = status >= 500 or status == 429


class FetchRedirected(MediaFetchError):
    """A 3xx: owc follows no redirect (the ticket would be sent where the Gateway's answer did not say)."""

    def __init__(self, status: int, line: str) -> None:
        super().__init__(line)
        self.status = status


class FetchTooLarge(MediaFetchError):
    """The answer announced, or its body ran to, more than the cap."""


class FetchWrongType(MediaFetchError):
    """The answer's ``content-type`` is not the announced one, or it came encoded (``content-encoding``)."""


class FetchUnreachable(MediaFetchError):
    """No connection: refused, no route, a name that does not resolve, or a TLS handshake that failed (an
    untrusted certificate, not the pinned one). Retryable unless the certificate was refused: retrying cannot
    change a certificate."""

    def __init__(self, line: str, *, retryable: bool = True) -> None:
        super().__init__(line)
        self.retryable = retryable


class FetchTimedOut(MediaFetchError):
    """The whole fetch did not finish within its timeout (``MEDIA_FETCH_TIMEOUT`` by default)."""

    retryable = True

    def __init__(self, timeout: float) -> None:
        super().__init__(f"the Gateway did not send the file within {timeout:g} s")
        self.timeout = timeout


class FetchBroken(MediaFetchError):
    """The answer was not a whole HTTP message: the connection closed early (before the answer, or before the
    length its head announced), the head was malformed or too long, or the body had no framing at all (so a
    truncated file could not be told from a whole one). Retryable: a Gateway restarting ends connections so."""

    retryable = True


@attrs.define
class _Progress:
    """What one fetch has seen so far, for its log line whatever way it ends."""

    status: int | None = None
    received: int = 0


def gateway_tls(gateway_url: str, settings: AdmissionSettings) -> tuple[ssl.SSLContext | None, str | None]:
    """The TLS context and pin the WebSocket to ``gateway_url`` uses with ``settings`` (a ``GatewayConfig``), for
    the fetch from its origin: ``(None, None)`` for ``ws://``; for ``wss://`` the caller's ``ssl_context``, else
    one trusting the system's CAs and ``ca_file``, or (with a pin) checking nothing but the pin."""
    admission = Admission(redact_url(gateway_url), settings)
    return admission.tls_context(gateway_url), admission.pin


def _target(url: str) -> tuple[str, str, int, str, bool]:
    """``(host header, host to connect to, port, request target, https)`` of an absolute ``http(s)://`` URL;
    ``ValueError`` for anything else (a caller's bug: ``download_url`` makes these)."""
    if not url.isascii() or any(ord(ch) <= 0x20 or ord(ch) == 0x7F for ch in url):
        raise ValueError("fetch_media: the URL is not plain ASCII")
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc or parts.fragment:
        raise ValueError("fetch_media: not an http(s) URL with a host and no user or fragment")
    port = parts.port or (443 if scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.netloc, parts.hostname, port, target, scheme == "https"


async def fetch_media(
    url: str,
    *,
    ssl_context: ssl.SSLContext | None,
    pin_sha256: str | None = None,
    cap: int,
    expect_mime: str,
    timeout: float = MEDIA_FETCH_TIMEOUT,
) -> bytes:
    """The body of one GET of ``url`` (``download_url``'s result), when it is a 200 of type ``expect_mime`` of at
    most ``cap`` bytes; else a ``MediaFetchError``. ``ssl_context`` and ``pin_sha256``: ``gateway_tls`` of the
    Gateway settings (an ``https`` URL needs a context, an ``http`` one takes none: ``ValueError`` otherwise, so a
    mismatch never silently downgrades). All of it within ``timeout`` seconds. Logs one line."""
    host_header, host, port, target, https = _target(url)
    if https != (ssl_context is not None):
        raise ValueError("fetch_media: an https URL needs the Gateway's TLS context, an http URL none")
    if cap < 0:
        raise ValueError("fetch_media: cap must not be negative")
    mime = normalize_mime(expect_mime)
    if mime is None:
        raise ValueError("fetch_media: expect_mime is not a type")
    shown = shown_url(url)
    started = trio.current_time()
    seen = _Progress()
    outcome = "cancelled"
    try:
        with trio.fail_after(timeout):
            body = await _fetch(host_header, host, port, target, ssl_context, pin_sha256, cap, mime, seen)
        outcome = "ok"
        return body
    except trio.TooSlowError:
        outcome = FetchTimedOut.__name__
        raise FetchTimedOut(timeout) from None
    except MediaFetchError as exc:
        outcome = type(exc).__name__
        raise
    finally:
        log.log(
            logging.INFO if outcome == "ok" else logging.WARNING,
            "gateway.media_fetch url=%s status=%s bytes=%d ms=%d outcome=%s",
            shown,
            seen.status if seen.status is not None else "-",
            seen.received,
            round((trio.current_time() - started) * 1000),
            outcome,
        )


async def _connect(
    host: str, port: int, ssl_context: ssl.SSLContext | None, pin_sha256: str | None
) -> trio.SocketStream | trio.SSLStream[trio.SocketStream]:
    """TCP, and TLS with its handshake done and the pin checked (as the WebSocket connects), or
    ``FetchUnreachable``. No stream is left open when it raises."""
    try:
        tcp = await trio.open_tcp_stream(host, port)
    except OSError as exc:
        raise FetchUnreachable(f"owc could not connect to the Gateway ({type(exc).__name__})") from None
    if ssl_context is None:
        return tcp
    stream = trio.SSLStream(tcp, ssl_context, server_hostname=host, https_compatible=True)
    try:
        await stream.do_handshake()
        if pin_sha256 is not None:
            check_pin(stream, pin_sha256)
    except BaseException as exc:
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(stream)
        # trio reports a failed handshake as BrokenResourceError from the ssl error; the pin check raises it itself.
        cause = exc.__cause__ if isinstance(exc, trio.BrokenResourceError) else exc
        if isinstance(cause, ssl.SSLCertVerificationError):
            why = getattr(cause, "verify_message", None) or "not the pinned one"
            raise FetchUnreachable(f"the Gateway's TLS certificate was refused ({why})", retryable=False) from None
        if isinstance(exc, (ssl.SSLError, trio.BrokenResourceError)):
            raise FetchUnreachable("the TLS handshake with the Gateway failed") from None
        raise
    return stream


async def _fetch(
    host_header: str,
    host: str,
    port: int,
    target: str,
    ssl_context: ssl.SSLContext | None,
    pin_sha256: str | None,
    cap: int,
    expect_mime: str,
    seen: _Progress,
) -> bytes:
    """The GET over a connection of its own: the body, or a ``MediaFetchError``."""
    stream = await _connect(host, port, ssl_context, pin_sha256)
    try:
        conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
        request = h11.Request(
            method="GET",
            target=target,
            headers=[
                ("Host", host_header),
                ("User-Agent", f"owc/{__version__}"),
                ("Accept", expect_mime),
                ("Accept-Encoding", "identity"),
                ("Connection", "close"),
            ],
        )
        try:
            await stream.send_all(conn.send(request) + (conn.send(h11.EndOfMessage()) or b""))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise FetchBroken("the Gateway closed the connection before the request was sent") from None
        return await _read(stream, conn, cap, expect_mime, seen)
    finally:
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(stream)


async def _read(
    stream: trio.SocketStream | trio.SSLStream[trio.SocketStream],
    conn: h11.Connection,
    cap: int,
    expect_mime: str,
    seen: _Progress,
) -> bytes:
    """The answer: its head checked (``check_response``) before any of the body is kept, then the body: never
    more than ``cap`` bytes of it kept, and once the head is in, never more than ``cap + 1`` asked for."""
    chunks: list[bytes] = []
    heard = False  # any byte of an answer at all
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError:
            if not heard:
                raise FetchBroken("the Gateway closed the connection without answering") from None
            if seen.status is None:
                raise FetchBroken("the Gateway's answer was not a valid HTTP response") from None
            raise FetchBroken("the Gateway's answer broke off before the whole file came") from None
        if event is h11.NEED_DATA:
            want = RECEIVE_SIZE if seen.status is None else max(1, min(RECEIVE_SIZE, cap + 1 - seen.received))
            try:
                data = await stream.receive_some(want)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            heard = heard or bool(data)
            conn.receive_data(data)
            continue
        if isinstance(event, h11.InformationalResponse):
            continue  # a 100 Continue: the answer follows
        if isinstance(event, h11.Response):
            seen.status = event.status_code
            bad = check_response(event.status_code, event.headers, expect_mime=expect_mime, cap=cap)
            if bad is not None:
                raise _error(bad.problem, bad.line, event.status_code)
            continue
        if isinstance(event, h11.Data):
            seen.received += len(event.data)
            if seen.received > cap:
                raise FetchTooLarge(body_too_large(cap))
            chunks.append(bytes(event.data))
            continue
        if isinstance(event, h11.EndOfMessage):
            return b"".join(chunks)
        raise FetchBroken("the Gateway closed the connection without answering")  # h11's ConnectionClosed


def _error(problem: Problem, line: str, status: int) -> MediaFetchError:
    """The error for an answer ``check_response`` refused."""
    if problem is Problem.REDIRECT:
        return FetchRedirected(status, line)
    if problem in (Problem.TICKET, Problem.STATUS):
        return FetchRefused(status, line)
    if problem in (Problem.WRONG_TYPE, Problem.ENCODED):
        return FetchWrongType(line)
    if problem is Problem.TOO_LARGE:
        return FetchTooLarge(line)
    return FetchBroken(line)

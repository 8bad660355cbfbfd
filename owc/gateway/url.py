"""Credentials in URLs: what owc logs and prints never holds them, and ``owc run`` refuses them.

A Gateway URL may carry a secret in its userinfo (``ws://user:token@host/``) or its query
(``ws://host/?token=...``), a database URL its password (``postgresql://owc:pw@db/webui``). Every URL owc
writes to a log line, stdout or an error message goes through ``redact_url`` first: the userinfo becomes
``***`` and the value of every query parameter whose name looks like a credential becomes ``***``. Pure (no
Trio), so the CLI, the connection and the tests share one rule.

``parse_gateway_url`` turns what a person pastes as "the Gateway URL" (``gateway.lan``, ``http://10.0.0.5:18789``,
``"wss://gw.example/openclaw"``) into the ``ws://`` / ``wss://`` URL owc connects to, or refuses it with a message
that names where the value came from and holds the redacted value only.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse

from owc.gateway.errors import GatewayError

#: A query parameter is a credential when its name (lower case, without ``-`` and ``_``) contains one of
#: these. Broad on purpose: hiding a harmless value costs a less precise log line, showing a secret costs the
#: secret.
CREDENTIAL_WORDS = ("token", "password", "passwd", "pwd", "secret", "key", "auth", "credential", "signature", "sig")

REDACTED = "***"


class InvalidGatewayUrl(GatewayError, ValueError):
    """The Gateway URL cannot work whatever the Gateway does (not ``ws://`` / ``wss://``, no host): final, never
    retried. Its message holds the redacted URL only."""


def is_credential_name(name: str) -> bool:
    norm = name.lower().replace("-", "").replace("_", "")
    return any(word in norm for word in CREDENTIAL_WORDS)


def redact_url(url: str) -> str:
    """``url`` with its userinfo and credential query values replaced by ``***`` (the rest kept, so a log line
    still says which host and path). A string that does not parse as a URL is redacted whole unless it holds
    neither ``@`` nor ``=``."""
    # The userinfo first, on the text itself; then the query and the fragment of what is left, replaced in the
    # text too (``urlunsplit`` would turn ``sqlite:////abs`` into ``sqlite://abs``).
    span = _userinfo_span(url)
    out = url if span is None else url[: span[0]] + REDACTED + url[span[1] :]
    try:
        parts = urllib.parse.urlsplit(out)
    except ValueError:  # an invalid IPv6 literal: say nothing about a content that could be a secret
        return out if ("@" not in out and "=" not in out) else "<unparsable url>"
    changes = []
    if parts.query:
        query = "&".join(_redact_pair(pair) for pair in parts.query.split("&"))
        changes.append(("?" + parts.query, "?" + query))
    if parts.fragment and ("=" in parts.fragment or "@" in parts.fragment):
        changes.append(("#" + parts.fragment, "#" + REDACTED))  # some tools put an access token there
    for old, new in changes:
        if old == new:
            continue
        if old not in out:  # urlsplit dropped characters (tabs, newlines) on the way: show nothing of it
            return "<unparsable url>"
        out = out.replace(old, new, 1)
    return out


def _userinfo_span(url: str) -> tuple[int, int] | None:
    """Where the userinfo is (from after ``//`` to its last ``@``), read more loosely than ``urlsplit``: a
    password with a raw ``#`` or ``/`` in it (which the RFC wants percent-encoded) still counts as userinfo
    whole, never as a fragment or a path that would be shown. Only a ``?`` ends the search (a query may hold
    an ``@``)."""
    start = url.find("//")
    if start < 0 or not url[:start].rstrip(":").replace("+", "").replace("-", "").replace(".", "").isalnum():
        return None
    start += 2
    end = url.find("?", start)
    at = url.rfind("@", start, end if end >= 0 else len(url))
    return (start, at) if at >= 0 else None


def _redact_pair(pair: str) -> str:
    name, sep, value = pair.partition("=")
    if sep and value and is_credential_name(urllib.parse.unquote_plus(name)):
        return f"{name}={REDACTED}"
    return pair


def url_credentials(url: str) -> list[str]:
    """What in ``url`` looks like a credential, in words (``["a user:password part", "query parameter
    'token'"]``); empty when nothing does. Names only, never the values."""
    found = []
    if _userinfo_span(url) is not None:
        found.append("a user:password part (user@host)")
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return found
    for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        if value and is_credential_name(name):
            found.append(f"query parameter {name!r}")
    return found


def check_gateway_url(url: str) -> urllib.parse.SplitResult:
    """The parsed URL when it can reach a Gateway (``ws://`` or ``wss://`` with a host and a valid port), else
    ``InvalidGatewayUrl``: retrying cannot fix an ``http://`` URL, so it is final."""
    shown = redact_url(url)
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number in range
    except ValueError:  # not its text: it quotes the port, which may be part of a password with a raw '#'
        raise InvalidGatewayUrl(f"gateway url {shown}: not a valid URL (host or port)") from None
    if parts.scheme not in ("ws", "wss"):
        scheme = f"{parts.scheme}://" if parts.scheme else "no scheme"
        raise InvalidGatewayUrl(f"gateway url {shown}: {scheme} is not ws:// or wss:// (the Gateway's WebSocket)")
    if not parts.hostname:
        raise InvalidGatewayUrl(f"gateway url {shown}: no host")
    return parts


#: The OpenClaw Gateway's default port: its HTTP and its one WebSocket (at ``/``) share it.
DEFAULT_GATEWAY_PORT = 18789

#: What a refusal offers instead: one of each accepted shape.
GATEWAY_URL_EXAMPLES = "gateway.lan, gateway.lan:18789, ws://10.0.0.5:18789/ or wss://gateway.example/openclaw"

#: The schemes a pasted value may have, and the one owc connects with: the Gateway's HTTP and WebSocket share a
#: port, so the page's URL is the socket's URL with the WebSocket scheme of the same security.
_SCHEMES = {"ws": "ws", "wss": "wss", "http": "ws", "https": "wss"}

#: Pairs people paste around a value: quotes from a shell or a config file, angle brackets from a mail, backticks
#: from Markdown.
_WRAPPERS = (('"', '"'), ("'", "'"), ("<", ">"), ("`", "`"))

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
#: A known scheme with its ``//`` missing (``ws:/gw``, ``https:gw``): told as such, not as a bad port.
_SCHEME_WITHOUT_SLASHES = re.compile(r"(?i)(wss?|https?):(?!//|\d)")
#: A host name as DNS and ``/etc/hosts`` know it (lower case by then); anything else is a typo or a paste error.
_HOST_NAME = re.compile(r"[a-z0-9._~-]+")


class _Refusal(Exception):
    """Why a pasted value is refused, in words that quote none of it (``parse_gateway_url`` adds the redacted
    value and the source)."""


def parse_gateway_url(text: str, *, source: str) -> str:
    """The ``ws://`` or ``wss://`` URL a pasted Gateway URL means, or ``InvalidGatewayUrl`` naming ``source`` (the
    Valve or the CLI flag the value came from), what is wrong and what a valid value looks like.

    The rules, so that what a person copies from the Gateway's docs, its dashboard or a proxy's config works:

    - Surrounding whitespace, quotes, angle brackets and backticks go; whitespace or a control character inside
      is refused (``urlsplit`` would drop a tab or a newline silently), and so is a non-ASCII character (a host
      name goes in its ``xn--`` form, a path percent-encoded).
    - ``ws://`` and ``wss://`` are kept, ``http://`` becomes ``ws://`` and ``https://`` ``wss://`` on the same
      port (the Gateway serves its dashboard and its WebSocket on one port, and OpenClaw's own
      ``isSecureWebSocketUrl`` reads ``http:`` as ``ws:`` and ``https:`` as ``wss:`` the same way). Nothing is
      ever downgraded: ``https://`` never becomes ``ws://``. The scheme is lower-cased, and so is the host. Any
      other scheme (``ftp://``, ``file://``, ``postgresql://``) is refused.
    - A bare host (``gateway.lan``, ``10.0.0.5:1234``, ``[::1]``, ``localhost``) is the Gateway itself: ``ws://``
      (the Gateway speaks plain WebSocket unless ``gateway.tls.enabled``; a ``ws://`` URL to its TLS port fails
      within the opening handshake's bound and is reported) and port 18789 unless one is given. A bare IPv6
      address without brackets (``::1``, ``fe80::1``) is put in brackets, and so cannot carry a port: every
      colon is the address's.
    - A URL with a scheme and no port keeps the scheme's default (80 for ``ws://``, 443 for ``wss://``): such a
      URL usually names a reverse proxy or Tailscale Serve, not the Gateway's own port. Evidence: OpenClaw's CLI
      (``src/gateway/connection-details.ts``) connects to ``--url`` / ``OPENCLAW_GATEWAY_URL`` /
      ``gateway.remote.url`` exactly as given, so a ``wss://`` URL without a port goes to 443, as its remote
      examples do (``wss://<name>.ts.net``; the Tailscale docs open ``https://<magicdns>/``). OpenClaw's macOS app
      (``GatewayRemoteConfig.normalizeGatewayUrl``) agrees for ``wss://`` (443) but gives a port-less ``ws://``
      18789, and accepts ``ws://`` to loopback only; owc follows the CLI and every WebSocket client, so that a
      plain reverse proxy on port 80 stays reachable, and adds 18789 only where no scheme was typed.
    - ``ws://`` to a public host is not refused here (OpenClaw's CLI refuses it without
      ``OPENCLAW_ALLOW_INSECURE_PRIVATE_WS``): whether plain text may leave the LAN is the caller's policy.
    - An empty port (``gateway.lan:``) counts as none; a port that is not a number from 1 to 65535 is refused,
      and so is an IPv6 address without brackets after a scheme (``ws://::1/`` is ambiguous).
    - The path is kept (a proxy may mount the Gateway under ``/openclaw``), an empty one becomes ``/``; the
      query is kept, the fragment dropped (it never reaches the server).
    - A user:password part or a credential in the query is kept, not refused: ``url_credentials`` and its
      callers refuse it with their own message. An ``@`` after a ``/`` or ``#`` (a password with a raw one) is
      refused: ``urlsplit`` would read another host than ``redact_url`` hides. Every message here holds
      ``redact_url`` of the value only, never a part ``urlsplit`` cut out of it.

    The result passes ``check_gateway_url`` and parses to itself.
    """
    pasted = _unwrap(text)
    bare = _SCHEME.match(pasted) is None
    try:
        return _parse(pasted, bare)
    except _Refusal as exc:
        what = f"{source} is empty" if not pasted else f"{source} {_shown(pasted, bare)!r} {exc}"
        raise InvalidGatewayUrl(f"{what}; a valid value looks like {GATEWAY_URL_EXAMPLES}") from None


def _parse(pasted: str, bare: bool) -> str:
    """``parse_gateway_url`` on the unwrapped value, refusing with ``_Refusal``."""
    if not pasted:
        raise _Refusal("is empty")
    if any(ch.isspace() or not ch.isprintable() for ch in pasted):
        raise _Refusal("has a space or a control character in it")
    if not pasted.isascii():
        raise _Refusal("has a non-ASCII character (write a host name in its xn-- form, percent-encode a path)")
    if bare:
        if _SCHEME_WITHOUT_SLASHES.match(pasted):
            raise _Refusal("lacks the // after its scheme (ws://host/)")
        scheme, url = "ws", "ws://" + _bracket_bare_ipv6(pasted)
    else:
        scheme, url = _websocket_scheme(pasted), pasted
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # never its text: it quotes the host, which may be part of a password with a raw '#'
        raise _Refusal("is not a valid URL (its host or port)") from None
    userinfo, at, hostport = parts.netloc.rpartition("@")
    span = _userinfo_span(url)
    if span is not None and url[span[0] : span[1]] != userinfo:
        raise _Refusal("has a / or # before its @ (in a user or password, write them %2F and %23)")
    host = _host(hostport, parts.hostname)
    port = _port(hostport)
    if port is None and bare:
        port = DEFAULT_GATEWAY_PORT
    netloc = f"{userinfo}{at}{host}" + ("" if port is None else f":{port}")
    return f"{scheme}://{netloc}{parts.path or '/'}" + (f"?{parts.query}" if parts.query else "")


def _unwrap(text: str) -> str:
    """``text`` without surrounding whitespace and the quotes or brackets around it, however many pairs."""
    out = text.strip()
    while len(out) >= 2 and any(out[0] == left and out[-1] == right for left, right in _WRAPPERS):
        out = out[1:-1].strip()
    return out


def _shown(pasted: str, bare: bool) -> str:
    """What a message may show of the value: redacted as the URL it stands for, so a bare ``user:pw@host``
    (which ``redact_url`` alone would read as a scheme and a path) hides its password too."""
    if not bare:
        return redact_url(pasted)
    return redact_url("ws://" + pasted).removeprefix("ws://")


def _websocket_scheme(url: str) -> str:
    """The WebSocket scheme for ``url``'s own (``http`` -> ``ws``, ``https`` -> ``wss``), else ``_Refusal``."""
    typed = url.partition("://")[0]
    scheme = _SCHEMES.get(typed.lower())
    if scheme is None:
        raise _Refusal(f"has the scheme {typed}://, not ws://, wss://, http:// or https://")
    return scheme


def _bracket_bare_ipv6(value: str) -> str:
    """``value`` (no scheme) with a bare IPv6 address as its host put in brackets (``fe80::1/x`` ->
    ``[fe80::1]/x``); a host with two colons or more that is no IPv6 address is ``_Refusal``."""
    cut = min((i for i in (value.find(ch) for ch in "/?#") if i >= 0), default=len(value))
    userinfo, at, host = value[:cut].rpartition("@")
    if "[" in host or host.count(":") < 2:
        return value
    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        raise _Refusal("is neither host, host:port nor an IPv6 address") from None
    return f"{userinfo}{at}[{host}]{value[cut:]}"


def _host(hostport: str, hostname: str | None) -> str:
    """The host as the result writes it (lower case, an IPv6 address in brackets), from the netloc's host part
    and ``urlsplit``'s ``hostname``; ``_Refusal`` when there is none or it cannot be a host."""
    if not hostport.startswith("[") and hostport.count(":") >= 2:
        raise _Refusal("has more than one colon after its host (an IPv6 address goes in brackets: ws://[::1]/)")
    if not hostname:
        raise _Refusal("has no host")
    if hostport.startswith("["):
        try:
            ipaddress.IPv6Address(hostname)
        except ValueError:
            raise _Refusal("has a bracketed host that is not an IPv6 address") from None
        return f"[{hostname}]"
    if not _HOST_NAME.fullmatch(hostname):
        raise _Refusal("has a host with a character no host name has")
    return hostname


def _port(hostport: str) -> int | None:
    """The port written after the host (``None`` for none or an empty one), else ``_Refusal`` for one that is
    not a number from 1 to 65535. Read from the text: ``urlsplit`` takes port 0 and, on old Pythons, ``+1``."""
    after_host = hostport.rpartition("]")[2] if hostport.startswith("[") else hostport
    if hostport.startswith("[") and after_host and not after_host.startswith(":"):
        raise _Refusal("has something other than :port after its bracketed host")
    digits = after_host.partition(":")[2]
    if not digits:
        return None
    if not (digits.isascii() and digits.isdigit() and 1 <= int(digits) <= 65535):
        raise _Refusal("has a port that is not a number from 1 to 65535")
    return int(digits)

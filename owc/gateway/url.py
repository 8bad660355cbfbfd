"""Credentials in URLs: what owc logs and prints never holds them, and ``owc run`` refuses them.

A Gateway URL may carry a secret in its userinfo (``ws://user:token@host/``) or its query
(``ws://host/?token=...``), a database URL its password (``postgresql://owc:pw@db/webui``). Every URL owc
writes to a log line, stdout or an error message goes through ``redact_url`` first: the userinfo becomes
``***`` and the value of every query parameter whose name looks like a credential becomes ``***``. Pure (no
Trio), so the CLI, the connection and the tests share one rule.
"""

from __future__ import annotations

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

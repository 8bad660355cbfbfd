"""``parse_gateway_url``: what a person pastes as the Gateway URL becomes the ``ws://`` / ``wss://`` URL owc
connects to, or a refusal that names where the value came from, says what is wrong and what would do, and shows
the value redacted only."""

from __future__ import annotations

import pytest

from owc.gateway.url import (
    DEFAULT_GATEWAY_PORT,
    InvalidGatewayUrl,
    check_gateway_url,
    parse_gateway_url,
    redact_url,
    url_credentials,
)

from conftest import leaked, secret

SECRET = secret("s3cr3t-value")
SOURCE = "the GATEWAY_URL Valve"

#: (pasted, what owc connects to)
ACCEPTED = [
    # A bare host is the Gateway itself: plain WebSocket on its default port.
    ("gateway.lan", "ws://gateway.lan:18789/"),
    ("10.0.0.5", "ws://10.0.0.5:18789/"),
    ("localhost", "ws://localhost:18789/"),
    ("gateway.lan:18789", "ws://gateway.lan:18789/"),
    ("gateway.lan:1234", "ws://gateway.lan:1234/"),
    ("Gateway.LAN", "ws://gateway.lan:18789/"),
    ("gateway.lan:", "ws://gateway.lan:18789/"),  # an empty port is none
    ("gateway.lan/openclaw", "ws://gateway.lan:18789/openclaw"),
    ("gateway.lan?x=1", "ws://gateway.lan:18789/?x=1"),
    ("10.0.0.5:18789/openclaw/?x=1#top", "ws://10.0.0.5:18789/openclaw/?x=1"),
    # IPv6: bracketed with or without a port; bare, every colon is the address's.
    ("[::1]", "ws://[::1]:18789/"),
    ("[::1]:", "ws://[::1]:18789/"),
    ("[fe80::1]:1234", "ws://[fe80::1]:1234/"),
    ("[2001:DB8::1]:443/openclaw", "ws://[2001:db8::1]:443/openclaw"),
    ("[fe80::1%25eth0]:1234", "ws://[fe80::1%25eth0]:1234/"),
    ("::1", "ws://[::1]:18789/"),
    ("fe80::1", "ws://[fe80::1]:18789/"),
    ("fe80::1:1234", "ws://[fe80::1:1234]:18789/"),
    ("2001:db8::1/openclaw", "ws://[2001:db8::1]:18789/openclaw"),
    ("ws://[::1]:18789", "ws://[::1]:18789/"),
    ("http://[::1]:18789/", "ws://[::1]:18789/"),
    # ws:// and wss:// as they are; no port keeps the scheme's default (a proxy, Tailscale Serve).
    ("ws://127.0.0.1:18789", "ws://127.0.0.1:18789/"),
    ("ws://127.0.0.1:18789/", "ws://127.0.0.1:18789/"),
    ("ws://gateway.lan", "ws://gateway.lan/"),
    ("wss://gw.example", "wss://gw.example/"),
    ("wss://gw.tail1234.ts.net/", "wss://gw.tail1234.ts.net/"),
    ("WSS://GW.Example.COM/OpenClaw", "wss://gw.example.com/OpenClaw"),  # the path keeps its case
    ("Ws://gw:1/", "ws://gw:1/"),
    ("ws://gw:65535/", "ws://gw:65535/"),
    ("ws://gw:018789/", "ws://gw:18789/"),
    ("ws://gw?x=1", "ws://gw/?x=1"),
    ("ws://gw/openclaw?x=1&y=2#frag", "ws://gw/openclaw?x=1&y=2"),
    # http(s):// becomes ws(s):// on the same port: never a downgrade.
    ("http://10.0.0.5:18789", "ws://10.0.0.5:18789/"),
    ("http://gateway.lan", "ws://gateway.lan/"),
    ("https://gw.example", "wss://gw.example/"),
    ("HTTPS://gw.example:8443/openclaw/", "wss://gw.example:8443/openclaw/"),
    (f"http://127.0.0.1:18789/#token={SECRET}", "ws://127.0.0.1:18789/"),  # the dashboard's link: fragment gone
    # What people paste around it.
    ("  gateway.lan \n", "ws://gateway.lan:18789/"),
    ('"ws://gw:1/"', "ws://gw:1/"),
    ("'gateway.lan'", "ws://gateway.lan:18789/"),
    ("<https://gw.example/>", "wss://gw.example/"),
    ("`gateway.lan:1234`", "ws://gateway.lan:1234/"),
    (' " <ws://gw/> " ', "ws://gw/"),
    # Credentials are kept (url_credentials and its callers refuse them), never dropped silently.
    (f"ws://owc:{SECRET}@gw/?token={SECRET}", f"ws://owc:{SECRET}@gw/?token={SECRET}"),
    (f"owc:{SECRET}@gateway.lan", f"ws://owc:{SECRET}@gateway.lan:18789/"),
    (f"https://{SECRET}@gw.example/openclaw", f"wss://{SECRET}@gw.example/openclaw"),
]

#: (pasted, what the message says is wrong)
REFUSED = [
    ("", "is empty"),
    ("  \n", "is empty"),
    ('""', "is empty"),
    ("<>", "is empty"),
    ("ftp://gw/", "has the scheme ftp://"),
    ("file:///etc/passwd", "has the scheme file://"),
    (f"postgresql://owc:{SECRET}@db/webui", "has the scheme postgresql://"),
    (f"FTP://owc:{SECRET}@gw/?token={SECRET}", "has the scheme FTP://"),
    ("ws:///openclaw", "has no host"),
    ("http://", "has no host"),
    ("ws://:18789/", "has no host"),
    (f"ws://owc:{SECRET}@/", "has no host"),
    ("/openclaw", "has no host"),
    (":18789", "has no host"),
    ("gateway.lan:abc", "has a port that is not a number from 1 to 65535"),
    ("gateway.lan:65536", "has a port that is not a number from 1 to 65535"),
    ("ws://gw:0/", "has a port that is not a number from 1 to 65535"),
    ("ws://gw:+1/", "has a port that is not a number from 1 to 65535"),
    ("ws://gw:-1/", "has a port that is not a number from 1 to 65535"),
    (f"ws://gw:99999/?token={SECRET}", "has a port that is not a number from 1 to 65535"),
    (f"owc:{SECRET}@gateway.lan:abc", "has a port that is not a number from 1 to 65535"),
    ("ws://[::1]:80x/", "has a port that is not a number from 1 to 65535"),
    ("ws://[::1]x/", "has something other than :port after its bracketed host"),
    ("gateway .lan", "has a space or a control character in it"),
    (f"ws://gw/?token={SECRET} x", "has a space or a control character in it"),
    (f"ws://gw\t/?token={SECRET}", "has a space or a control character in it"),
    ("ws://gate\nway/", "has a space or a control character in it"),
    ("gäteway.lan", "has a non-ASCII character"),
    ("ws://gw:１２/", "has a non-ASCII character"),
    ("ws://::1/", "has more than one colon after its host"),
    ("ws://fe80::1:18789/", "has more than one colon after its host"),
    ("fe80::1::2", "is neither host, host:port nor an IPv6 address"),
    (f"owc:{SECRET}@fe80::zz", "is neither host, host:port nor an IPv6 address"),
    ("[fe80::zz]", "is not a valid URL (its host or port)"),
    ("ws://[10.0.0.1]/", "is not a valid URL (its host or port)"),
    ("ws://[::1/", "is not a valid URL (its host or port)"),
    ("ws://gate_way!/", "has a host with a character no host name has"),
    (f"ws://owc:pa#{SECRET}@gw/", "has a / or # before its @"),
    (f"ws://owc:1234/{SECRET}@gw/", "has a / or # before its @"),
    ("ws:/gw", "lacks the // after its scheme"),
    ("https:gw.example", "lacks the // after its scheme"),
]


def _ids(table: list[tuple[str, str]]) -> list[str]:
    """Test ids that show the redacted value (a test id is printed), a bare value redacted as the URL it stands
    for (``redact_url`` alone reads ``user:pw@host`` as a scheme and a path)."""
    return [repr(redact_url(p) if "://" in p else redact_url("ws://" + p).removeprefix("ws://")) for p, _ in table]


@pytest.mark.parametrize(("pasted", "url"), ACCEPTED, ids=_ids(ACCEPTED))
def test_a_pasted_gateway_url_becomes_the_url_owc_connects_to(pasted: str, url: str) -> None:
    assert parse_gateway_url(pasted, source=SOURCE) == url


@pytest.mark.parametrize(("pasted", "url"), ACCEPTED, ids=_ids(ACCEPTED))
def test_the_result_is_a_fixed_point_that_check_gateway_url_accepts(pasted: str, url: str) -> None:
    once = parse_gateway_url(pasted, source=SOURCE)
    assert parse_gateway_url(once, source=SOURCE) == once
    parts = check_gateway_url(once)
    assert parts.scheme in ("ws", "wss") and parts.hostname and not parts.fragment
    if pasted.strip(" \n'\"<>`").lower().startswith(("https://", "wss://")):
        assert parts.scheme == "wss"  # never a downgrade


@pytest.mark.parametrize(("pasted", "why"), REFUSED, ids=_ids(REFUSED))
def test_a_value_that_cannot_be_a_gateway_url_is_refused_with_its_source_and_no_secret(pasted: str, why: str) -> None:
    with pytest.raises(InvalidGatewayUrl) as info:
        parse_gateway_url(pasted, source=SOURCE)
    message = str(info.value)
    assert message.startswith(f"{SOURCE} ") and why in message
    assert "a valid value looks like gateway.lan" in message
    assert SECRET not in message and not leaked(message)
    # Nothing chained that could quote the value: urlsplit's own errors name the host or the port.
    assert info.value.__cause__ is None and info.value.__suppress_context__


@pytest.mark.parametrize(
    ("pasted", "shown"),
    [
        (f"ftp://owc:{SECRET}@gw/", "'ftp://***@gw/'"),
        (f"ws://gw:99999/?token={SECRET}&x=1", "'ws://gw:99999/?token=***&x=1'"),
        (f"owc:{SECRET}@gateway.lan:abc", "'***@gateway.lan:abc'"),  # bare: redacted as the URL it stands for
        (f"ws://owc:pa#{SECRET}@gw/", "'ws://***@gw/'"),
        ("gateway.lan:abc", "'gateway.lan:abc'"),
    ],
    ids=["scheme", "query", "bare-userinfo", "raw-hash", "plain"],
)
def test_the_refusal_shows_the_value_redacted(pasted: str, shown: str) -> None:
    with pytest.raises(InvalidGatewayUrl) as info:
        parse_gateway_url(pasted, source="--gateway-url")
    assert str(info.value).startswith(f"--gateway-url {shown} ")


@pytest.mark.parametrize("source", ["the GATEWAY_URL Valve", "--gateway-url", "OWC_GATEWAY_URL"])
def test_the_refusal_names_the_source_it_is_given(source: str) -> None:
    with pytest.raises(InvalidGatewayUrl, match=f"^{source} is empty; a valid value looks like "):
        parse_gateway_url(" ", source=source)
    with pytest.raises(InvalidGatewayUrl, match=f"^{source} 'ftp://gw/' has the scheme ftp://"):
        parse_gateway_url("ftp://gw/", source=source)


def test_credentials_are_kept_for_the_callers_refusal_and_redacted_when_shown() -> None:
    url = parse_gateway_url(f"owc:{SECRET}@gateway.lan/?token={SECRET}", source=SOURCE)
    assert url_credentials(url) == ["a user:password part (user@host)", "query parameter 'token'"]
    assert redact_url(url) == "ws://***@gateway.lan:18789/?token=***"


def test_a_bare_host_gets_the_gateway_port_and_a_scheme_its_own_default() -> None:
    assert check_gateway_url(parse_gateway_url("gateway.lan", source=SOURCE)).port == DEFAULT_GATEWAY_PORT == 18789
    assert check_gateway_url(parse_gateway_url("wss://gw.example", source=SOURCE)).port is None  # 443
    assert check_gateway_url(parse_gateway_url("ws://gw.example", source=SOURCE)).port is None  # 80

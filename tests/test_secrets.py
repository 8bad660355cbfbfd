"""Credentials never reach a log line or the output: URLs are redacted (``owc.gateway.url``), token files are
written exclusively and read with a warning (``owc.tokenfile``), and the suite's own guard (conftest) sees
leaks."""

from __future__ import annotations

import logging
import os
import ssl
import stat
from pathlib import Path

import pytest
import trio
import trustme

from owc.gateway import GatewayClient, GatewayConfig, open_gateway_connection
from owc.gateway.url import InvalidGatewayUrl, check_gateway_url, redact_url, url_credentials
from owc.runtime import RuntimeConfig
from owc.sim import open_simulator
from owc.tokenfile import TokenFileError, read_token_file, write_new_token_file

from conftest import TOKEN, leaked, secret

URL_PASSWORD = secret("url-password-7d1f0c2a")
URL_TOKEN = secret("url-query-token-5b9e44e1")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("ws://127.0.0.1:18789/", "ws://127.0.0.1:18789/"),
        (f"ws://owc:{URL_PASSWORD}@gw.example:443/", "ws://***@gw.example:443/"),
        (f"wss://{URL_TOKEN}@gw.example/", "wss://***@gw.example/"),
        (f"ws://gw/?token={URL_TOKEN}&x=1", "ws://gw/?token=***&x=1"),
        (
            f"ws://gw/?access_token={URL_TOKEN}&api-key=k&Password=p",
            "ws://gw/?access_token=***&api-key=***&Password=***",
        ),
        (f"ws://gw/?session=abc&auth={URL_TOKEN}", "ws://gw/?session=abc&auth=***"),
        (f"ws://gw/#access_token={URL_TOKEN}", "ws://gw/#***"),
        # A raw '#' or '/' in a password (the RFC wants it percent-encoded) is still the userinfo, not shown.
        (f"ws://owc:pa#{URL_PASSWORD}@gw/", "ws://***@gw/"),
        (f"ws://owc:pa/{URL_PASSWORD}@gw/x?token={URL_TOKEN}", "ws://***@gw/x?token=***"),
        (f"postgresql+psycopg://owc:{URL_PASSWORD}@db:5432/webui", "postgresql+psycopg://***@db:5432/webui"),
        ("sqlite:////var/lib/webui.db", "sqlite:////var/lib/webui.db"),  # unchanged, slashes and all
        (f"ws://gw/?to\tken={URL_TOKEN}", "<unparsable url>"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert not leaked(redact_url(url))


def test_url_credentials_name_what_is_there_and_never_the_value() -> None:
    found = url_credentials(f"ws://owc:{URL_PASSWORD}@gw/?token={URL_TOKEN}&limit=5")
    assert found == ["a user:password part (user@host)", "query parameter 'token'"]
    assert url_credentials("ws://127.0.0.1:18789/?limit=5") == []


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:18789/", "http:// is not ws:// or wss://"),
        ("127.0.0.1:18789", "is not ws:// or wss://"),
        ("ws:///path", "no host"),
        (f"ws://owc:pa#{URL_PASSWORD}@gw/", "not a valid URL"),  # the port's text would be part of the password
    ],
)
def test_a_gateway_url_that_cannot_work_is_invalid(url: str, why: str) -> None:
    with pytest.raises(InvalidGatewayUrl) as info:
        check_gateway_url(url)
    assert why in str(info.value) and not leaked(str(info.value))


async def test_an_http_url_is_final_and_never_retried(autojump_clock) -> None:
    """Before: ``gateway.connect_failed ... not a ws:// or wss:// url`` and a reconnect, forever."""
    client = GatewayClient("http://127.0.0.1:9/", TOKEN)
    with pytest.raises(InvalidGatewayUrl), trio.fail_after(60):  # virtual seconds: a regression retries in vain
        await client.run()
    assert client.attempts == 0 and trio.current_time() == 0


async def test_credentials_in_the_client_url_are_redacted_in_its_logs(autojump_clock, caplog) -> None:
    """Before: every ``gateway.*`` line showed ``url=ws://owc:<password>@...?token=<token>``."""
    caplog.set_level(logging.DEBUG, logger="owc")
    async with open_simulator(token=TOKEN) as sim:
        url = f"ws://owc:{URL_PASSWORD}@127.0.0.1:{sim.port}/?token={URL_TOKEN}"
        client = GatewayClient(url, TOKEN)
        async with trio.open_nursery() as nursery:
            await nursery.start(client.run)
            first = await client.wait_connection()
            sim.disconnect()  # a close and a reconnect: more gateway.* lines carrying the url
            await client.wait_connection(newer_than=first)
            client.stop()
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("owc.gateway")]
    shown = f"url=ws://***@127.0.0.1:{sim.port}/?token=***"
    assert any("gateway.hello" in line and shown in line for line in lines), lines
    assert any("gateway.closed" in line and shown in line for line in lines), lines
    assert any("gateway.reconnecting" in line and shown in line for line in lines), lines
    assert not any(leaked(line) for line in lines)
    assert not leaked(repr(client)) and not leaked(repr(RuntimeConfig(url=url, token=TOKEN)))


async def test_an_upper_case_wss_url_is_tls_too(autojump_clock) -> None:
    """Before: ``WSS://`` passed the scheme check (parsed lower case) but the TLS choice compared the text, so
    owc spoke plain TCP, token included, to a TLS port (and retried forever)."""
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    async with open_simulator(token=TOKEN, ssl_context=server_ctx) as sim:
        url = f"WSS://127.0.0.1:{sim.port}/"
        async with open_gateway_connection(url, TOKEN, config=GatewayConfig(ssl_context=client_ctx)) as client:
            with trio.fail_after(60):
                conn = await client.wait_connection()
            assert conn.boot_id == sim.boot_id


# ---------------------------------------------------------------------------------------------- token files


def test_a_new_token_file_is_0600_even_over_an_old_0644_one(tmp_path: Path) -> None:
    """Before: ``O_CREAT | O_TRUNC`` kept an existing file's mode (0644 stayed 0644)."""
    path = tmp_path / "owc-sim.token"
    path.write_text("old\n")
    path.chmod(0o644)
    write_new_token_file(path, "new-token")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == "new-token\n"


@pytest.mark.parametrize("dangling", [False, True])
def test_a_planted_symlink_is_never_followed(tmp_path: Path, dangling: bool) -> None:
    """Before: the token was written through the link, into its target (created if absent)."""
    target = tmp_path / "elsewhere"
    if not dangling:
        target.write_text("keep\n")
    link = tmp_path / "owc-sim.token"
    link.symlink_to(target)
    with pytest.raises(TokenFileError, match="symbolic link"):
        write_new_token_file(link, "new-token")
    assert link.is_symlink()
    if dangling:
        assert not target.exists()
    else:
        assert target.read_text() == "keep\n"


def test_a_directory_in_the_way_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "owc-sim.token"
    path.mkdir()
    with pytest.raises(TokenFileError, match="not a regular file"):
        write_new_token_file(path, "new-token")


def test_reading_a_token_file_warns_about_its_mode_and_links(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(f"  {TOKEN}\n")
    path.chmod(0o600)
    assert read_token_file(path).value == TOKEN and read_token_file(path).warnings == ()
    path.chmod(0o640)
    (warning,) = read_token_file(path).warnings
    assert "accessible by group or others (mode 0640)" in warning and not leaked(warning)
    path.chmod(0o600)
    link = tmp_path / "link"
    link.symlink_to(path)
    (warning,) = read_token_file(link).warnings
    assert "symbolic link" in warning
    assert TOKEN not in repr(read_token_file(path))


@pytest.mark.parametrize(
    ("content", "why"), [(None, "no such file"), ("  \n", "empty"), (b"\xff\xfe", "not UTF-8"), ("dir", "directory")]
)
def test_an_unusable_token_file_is_one_clear_error(tmp_path: Path, content, why: str) -> None:
    path = tmp_path / "token"
    if content == "dir":
        path.mkdir()
        why = "not a regular file"
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(TokenFileError, match=why):
        read_token_file(path)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_token_file_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN)
    path.chmod(0)
    with pytest.raises(TokenFileError, match="permission denied"):
        read_token_file(path)


def test_the_guard_knows_every_device_secret_owc_stores(tmp_path: Path) -> None:
    """The suite-wide guard registers a device's private key and device token when owc writes them, so a log
    line or an output holding either fails the test that produced it (a key or token unknown to the guard
    would pass unseen)."""
    import base64

    from owc import device

    identity = device.load_or_create(tmp_path / "dev")
    record = device._record(identity)  # the guard's hook wraps this
    seed = device.b64url_decode(record["ed25519_seed"])
    assert leaked(f"a key {seed.hex()} in a line") and leaked(base64.b64encode(seed).decode())
    assert leaked(record["ed25519_seed"]) and not leaked(identity.device_id) and not leaked(identity.public_key_b64)
    issued = "device-token-issued-by-a-gateway-0042"
    assert not leaked(issued)
    device.set_device_token(tmp_path / "dev", issued)
    assert leaked(f"token={issued}")

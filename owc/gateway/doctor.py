"""``owc doctor``: one connect to the Gateway, and what it says about owc's access, in a person's words.

A Gateway on another host is where set-up goes wrong (issue 15): the port is closed, the certificate is not the
pinned one, the token is wrong, the device waits for approval, the device was approved with too few scopes. Each
of these is a different fix on a different machine, so the report names the step that failed and the fix:

* **reachable**: TCP, TLS and the WebSocket handshake (and which of them failed);
* **authenticated**: the Gateway answered ``connect`` with ``hello-ok`` (else its refusal code);
* **paired**: the device's state: paired (a device token is stored), waiting for approval (the command to run
  on the Gateway host, with the request id), not needed (the Gateway let owc in as its local backend), or no
  device (token only);
* **scopes** granted, and what a missing one disables (without ``operator.admin`` owc works, but cannot stop a run
  another client started: a note, not a problem); **protocol**, the server's version and its **boot id**.

It connects once, through ``GatewayClient.probe`` (the very handshake ``owc run`` does, so a device token issued
now is stored as it would be then), and never prints a token or a key: only codes, ids and names.
"""

from __future__ import annotations

import ssl
from typing import Any

import attrs
import trio
from trio_websocket import ConnectionClosed, HandshakeError

from owc import device
from owc.gateway.connection import GatewayClient, GatewayConfig
from owc.gateway.errors import GatewayError, MissingScopes, NotAWebSocket, Refused
from owc.gateway.url import InvalidGatewayUrl
from owc.protocol import ProtocolError
from owc.protocol.handshake import OWC_SCOPES, missing_scopes_text, scopes_missing


@attrs.frozen
class DoctorReport:
    """What one connect found. ``problem`` is the first thing to fix (None when owc is fully usable)."""

    url: str
    reachable: bool
    authenticated: bool
    paired: str
    device_id: str | None = None
    scopes: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    protocol: int | None = None
    server_version: str | None = None
    boot_id: str | None = None
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None

    def lines(self) -> list[str]:
        def yes(flag: bool) -> str:
            return "yes" if flag else "no"

        out = [
            f"gateway:       {self.url}",
            f"reachable:     {yes(self.reachable)}",
            f"authenticated: {yes(self.authenticated)}",
            f"paired:        {self.paired}",
        ]
        if self.device_id is not None:
            out.append(f"device id:     {self.device_id}")
        if self.authenticated:
            granted = ", ".join(self.scopes) if self.scopes else "none"
            out.append(f"scopes:        {granted}" + (f" (missing {', '.join(self.missing)})" if self.missing else ""))
            if self.missing and self.ok:
                out.append(f"note:          {missing_scopes_text(self.missing)}")
            out.append(f"protocol:      {self.protocol}")
            out.append(f"server:        {self.server_version or 'unknown'}")
            out.append(f"boot id:       {self.boot_id or 'unknown'}")
        out.append(f"status:        {'ok' if self.ok else 'PROBLEM: ' + str(self.problem)}")
        return out


async def diagnose(url: str, token: str, config: GatewayConfig | None = None) -> DoctorReport:
    """Connect once and report. Raises only ``InvalidGatewayUrl`` (nothing to connect to); every other
    failure is the report's ``problem`` (an unusable device folder too: no connect is tried then)."""
    config = config or GatewayConfig()
    client = GatewayClient(url, token, config=config)
    try:
        identity = await _identity(config)
    except device.DeviceIdentityError as exc:  # nothing was tried: the device is presented at the connect
        return DoctorReport(
            url=client.url, reachable=False, authenticated=False, paired="unknown (the device folder)", problem=str(exc)
        )
    device_id = identity.device_id if identity is not None else None
    base: dict[str, Any] = {"url": client.url, "device_id": device_id}
    no_device = "no device (the shared token alone: enough only on the Gateway's own loopback)"
    try:
        hello = await client.probe()
    except InvalidGatewayUrl:
        raise
    except MissingScopes as exc:
        return DoctorReport(
            reachable=True,
            authenticated=True,
            paired=no_device if identity is None else "yes",
            missing=exc.missing,
            scopes=tuple(s for s in OWC_SCOPES if s not in exc.missing),
            problem=str(exc),
            **base,
        )
    except Refused as exc:
        if client.pairing is not None:
            return DoctorReport(
                reachable=True,
                authenticated=False,
                paired=f"waiting for approval: {client.pairing}",
                problem="the device waits to be approved on the Gateway host (see paired)",
                **base,
            )
        problem = exc.refusal.line  # the table the Pipe and ``owc run`` say it with (``owc.protocol.refusals``)
        if exc.error.detail_code == "AUTH_DEVICE_TOKEN_MISMATCH":
            problem += " (run owc doctor again to ask for pairing)"
        paired = no_device if identity is None else "unknown (refused before pairing was checked)"
        return DoctorReport(reachable=True, authenticated=False, paired=paired, problem=problem, **base)
    except (OSError, HandshakeError, ConnectionClosed, trio.TooSlowError, trio.BrokenResourceError) as exc:
        return DoctorReport(
            reachable=False, authenticated=False, paired="unknown", problem=_unreachable(exc, config), **base
        )
    except (ProtocolError, GatewayError) as exc:
        return DoctorReport(
            reachable=True, authenticated=False, paired="unknown", problem=f"not an OpenClaw Gateway? {exc}", **base
        )
    if identity is None:
        paired = no_device
    else:
        assert config.device_dir is not None
        stored = await trio.to_thread.run_sync(device.load, config.device_dir)
        if stored is not None and stored.device_token is not None:
            paired = "yes (its device token is stored)"
        else:
            paired = "not needed (the Gateway let owc in as its local backend, without pairing)"
    missing = scopes_missing(hello)
    return DoctorReport(
        reachable=True,
        authenticated=True,
        paired=paired,
        scopes=hello.auth_scopes,
        missing=missing,
        protocol=hello.protocol,
        server_version=hello.server_version,
        boot_id=hello.boot_id,
        problem=client.limited if missing else None,
        **base,
    )


async def _identity(config: GatewayConfig) -> device.DeviceIdentity | None:
    if config.device_dir is None:
        return None
    return await trio.to_thread.run_sync(device.load_or_create, config.device_dir)


def _unreachable(exc: BaseException, config: GatewayConfig) -> str:
    if isinstance(exc, trio.BrokenResourceError) and exc.__cause__ is not None:
        exc = exc.__cause__  # trio's TLS stream reports a failed handshake so, the SSL error as its cause
    if isinstance(exc, trio.TooSlowError):
        return f"no answer within {config.connect_timeout:g} s (a firewall, or ws:// to a TLS port?)"
    if isinstance(exc, ssl.SSLError) or "certificate" in str(exc).lower():
        return f"TLS failed: {exc} (the CA file or the pinned fingerprint: --ca-file, --tls-pin)"
    if isinstance(exc, NotAWebSocket):
        return str(exc)  # its one line: the status and reason, never the page
    if isinstance(exc, HandshakeError):
        return f"the WebSocket handshake failed: {exc} (is this the Gateway's port and path?)"
    if isinstance(exc, ConnectionClosed):
        return "the connection was closed before the Gateway spoke (ws:// to a TLS port, or a proxy?)"
    return f"cannot connect: {exc}"

"""A device client speaking raw frames, for the simulator's device tests and the conformance tier that drives the real
Gateway with the same helpers (``tests/test_sim_device.py``, ``tests/test_realgw_device_conformance.py``). Devices
sign with owc's own ``DeviceIdentity``; the Gateway (real or simulated) verifies independently."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import orjson
from trio_websocket import open_websocket_url

from owc.device import DeviceIdentity

from conftest import secret
from rawclient import RawClient

READ_WRITE = ("operator.read", "operator.write")
ADMIN = (*READ_WRITE, "operator.admin")
BACKEND = ("gateway-client", "backend")
CLI = ("cli", "cli")


@attrs.frozen
class Answer:
    """One ``connect``: the response frame and, when refused, the close that followed."""

    response: dict[str, Any]
    close: tuple[int | None, str | None] | None = None

    @property
    def ok(self) -> bool:
        return self.response.get("ok") is True

    @property
    def error(self) -> dict[str, Any]:
        return self.response.get("error") or {}

    @property
    def details(self) -> dict[str, Any]:
        return self.error.get("details") or {}

    @property
    def auth(self) -> dict[str, Any]:
        return (self.response.get("payload") or {}).get("auth") or {}

    def shape(self) -> tuple[Any, ...]:
        """What owc depends on in a refusal: the code, ``details.code`` / ``reason``, the set of ``details`` keys
        and the close code (or, admitted, the auth method, scopes and whether a device token came)."""
        if self.ok:
            return ("hello", self.auth.get("method"), tuple(self.auth.get("scopes") or ()), "deviceToken" in self.auth)
        close = self.close[0] if self.close else None
        keys = tuple(sorted(self.details))
        return (self.error.get("code"), self.details.get("code"), self.details.get("reason"), keys, close)


def _flip(signature: str) -> str:
    raw = bytearray(base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)))
    raw[0] ^= 1
    return base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()


def connect_params(
    identity: DeviceIdentity | None,
    challenge: dict[str, Any],
    *,
    auth: dict[str, str],
    scopes: Sequence[str] = READ_WRITE,
    client: tuple[str, str] = BACKEND,
    skew_ms: int = 0,
    tamper: bool = False,
    sign_auth: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A ``connect``'s params, signed by ``identity`` over the challenge (``skew_ms`` moves ``signedAt``;
    ``sign_auth`` signs as if that ``auth`` were sent; ``tamper`` flips a bit of the signature)."""
    params: dict[str, Any] = {
        "minProtocol": 4,
        "maxProtocol": 4,
        "client": {"id": client[0], "version": "test", "platform": "linux", "mode": client[1]},
        "role": "operator",
        "scopes": list(scopes),
        "auth": dict(auth),
    }
    if identity is not None:
        signed = {**params, "auth": dict(sign_auth if sign_auth is not None else auth)}
        block = identity.sign_connect_params(
            signed, nonce=challenge["nonce"], signed_at_ms=int(challenge["ts"]) + skew_ms
        )
        if tamper:
            block["signature"] = _flip(block["signature"])
        params["device"] = block
    return params


@asynccontextmanager
async def device_connection(
    url: str, identity: DeviceIdentity | None, *, origin: str | None = None, **kw: Any
) -> AsyncIterator[tuple[Answer, RawClient]]:
    """Connect (with ``origin`` as the ``Origin`` header) and keep the connection for the block."""
    headers = [(b"Origin", origin.encode())] if origin else None
    async with open_websocket_url(url, extra_headers=headers, max_message_size=32 * 1024 * 1024) as ws:
        client = RawClient(ws)
        challenge = orjson.loads(await ws.get_message())
        assert challenge["event"] == "connect.challenge", challenge
        req_id = await client.send("connect", connect_params(identity, challenge["payload"], **kw))
        response = await client.response(req_id)
        answer = Answer(client.frames[-1])
        if not response.ok:
            answer = Answer(client.frames[-1], await client.closed())
        if answer.auth.get("deviceToken"):
            secret(answer.auth["deviceToken"])
        yield answer, client


async def attempt(url: str, identity: DeviceIdentity | None, **kw: Any) -> Answer:
    async with device_connection(url, identity, **kw) as (answer, _):
        return answer

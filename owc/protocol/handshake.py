"""The handshake: ``connect.challenge`` -> ``connect`` request -> ``hello-ok``.

owc connects as ``client.id = "gateway-client"``, ``mode = "backend"`` with the shared token: the one client shape
the Gateway lets in on loopback without a device identity and with its scopes kept (reference section 6); on
another host the connect also carries owc's signed device (``owc/device.py``). It declares ``caps:
["tool-events"]`` so the runs it starts stream their tool calls to it as ``agent`` events, and asks exactly the
scopes it uses (``OWC_SCOPES``, each with what it is for): a device asking more than it was approved for is sent
back to pairing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from owc.protocol import fields as f
from owc.protocol.errors import ProtocolError
from owc.protocol.frames import DEFAULT_MAX_PAYLOAD

PROTOCOL_VERSION = 4
CLIENT_ID = "gateway-client"
CLIENT_MODE = "backend"
ROLE = "operator"
#: What each scope owc asks for is used for, in the words a missing-scope report gives (issue 15): exactly these.
#: ``sessions.patch`` with only ``key`` and ``model`` needs ``operator.write``, not admin (2026.9.6,
#: ``resolveSessionsPatchRequiredScope``). ``operator.admin`` is for Stop: the Gateway lets a client without it abort
#: only runs with no owner or sent by its own connection or device (``canRequesterAbortChatRun``,
#: ``chat-abort-runtime-B6OgOyLI.mjs:39-52``; measured: owc's Stop of a run another client sent was refused
#: ``INVALID_REQUEST unauthorized`` without it), and Open WebUI's Stop is for any run shown in a chat.
SCOPE_USES: dict[str, str] = {
    "operator.read": "seeing the agent's sessions and runs (sessions.list, sessions.subscribe, chat.history)",
    "operator.write": "sending user turns (chat.send), Stop (chat.abort) and choosing a model (sessions.patch)",
    "operator.admin": "stopping a run another client started (chat.abort of a run owc did not send)",
}
OWC_SCOPES: tuple[str, ...] = tuple(SCOPE_USES)
DEFAULT_SCOPES = OWC_SCOPES
DEFAULT_CAPS: tuple[str, ...] = ("tool-events",)
#: ``TICK_INTERVAL_MS`` in the 2026.9.6 code (the shipped docs say 15000; the code and the live hello say 30000).
DEFAULT_TICK_INTERVAL_MS = 30_000
DEFAULT_MAX_BUFFERED_BYTES = 52_428_800


@attrs.frozen
class ConnectChallenge:
    nonce: str
    ts: int | None
    capabilities: tuple[str, ...] = ()


@attrs.frozen
class ConnectParams:
    """The ``connect`` request's params. ``token`` is excluded from ``repr`` so it never reaches a log."""

    token: str = attrs.field(repr=False)
    client_version: str
    platform: str = "linux"
    scopes: tuple[str, ...] = DEFAULT_SCOPES
    caps: tuple[str, ...] = DEFAULT_CAPS
    min_protocol: int = PROTOCOL_VERSION
    max_protocol: int = PROTOCOL_VERSION
    client_id: str = CLIENT_ID
    mode: str = CLIENT_MODE
    role: str = ROLE
    locale: str | None = None
    user_agent: str | None = None
    instance_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        client: dict[str, Any] = {
            "id": self.client_id,
            "version": self.client_version,
            "platform": self.platform,
            "mode": self.mode,
        }
        if self.instance_id is not None:
            client["instanceId"] = self.instance_id
        out: dict[str, Any] = {
            "minProtocol": self.min_protocol,
            "maxProtocol": self.max_protocol,
            "client": client,
            "role": self.role,
            "scopes": list(self.scopes),
            "caps": list(self.caps),
            "auth": {"token": self.token},
        }
        if self.locale is not None:
            out["locale"] = self.locale
        if self.user_agent is not None:
            out["userAgent"] = self.user_agent
        return out


@attrs.frozen
class Policy:
    tick_interval_ms: int = DEFAULT_TICK_INTERVAL_MS
    max_payload: int = DEFAULT_MAX_PAYLOAD
    max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES


@attrs.frozen
class HelloOk:
    """What owc keeps of ``hello-ok``. ``boot_id`` changes on every Gateway boot: a changed boot id after a
    reconnect means the Gateway restarted (the owner rule and link rule E depend on it)."""

    protocol: int
    boot_id: str | None
    server_version: str | None
    conn_id: str | None
    policy: Policy
    auth_method: str | None = None
    auth_role: str | None = None
    auth_scopes: tuple[str, ...] = ()
    methods: frozenset[str] = frozenset()
    #: ``snapshot.uptimeMs``: how long this boot of the Gateway had run when it answered (2026.9.6 sends it).
    uptime_ms: int | None = None
    #: The Gateway's wall clock as it built the snapshot: its own presence entry's ``ts`` (``reason: "self"``),
    #: which 2026.9.6 sets to ``Date.now()`` right before it reads ``uptimeMs`` (``listSystemPresence`` then
    #: ``process.uptime()`` in ``buildGatewaySnapshot``). None when absent.
    snapshot_ts: int | None = None
    #: When this boot began on the Gateway's own clock (``boot_started_at``), set by the connection, which holds
    #: the challenge's ``ts``. None when the Gateway did not say.
    booted_at_ms: int | None = None
    raw: Any = attrs.field(default=None, repr=False, eq=False)


def parse_challenge(payload: f.JSONObject) -> ConnectChallenge:
    where = "connect.challenge"
    caps = f.opt_str_list(payload, "capabilities", where) or ()
    return ConnectChallenge(
        nonce=f.req_str(payload, "nonce", where), ts=f.opt_int(payload, "ts", where), capabilities=caps
    )


def parse_hello_ok(payload: object) -> HelloOk:
    """Parse a successful ``connect`` response payload.

    ``server`` is required. ``type`` must be ``"hello-ok"`` when present and ``policy`` falls back to the
    Gateway's documented constants when absent: one recorded frame (``frames_stop.jsonl``) was trimmed by
    the recorder to ``{server}``, and owc would rather run on the known constants than refuse such a hello.
    """
    where = "hello-ok"
    d = f.obj(payload, where)
    kind = d.get("type")
    if kind is not None and kind != "hello-ok":
        raise ProtocolError("connect response payload has a type other than the expected 'hello-ok'")
    server = f.opt_obj(d, "server", where)
    if server is None:
        raise ProtocolError("hello-ok lacks required field 'server'")
    policy_d = f.opt_obj(d, "policy", where) or {}
    policy = Policy(
        tick_interval_ms=f.opt_int(policy_d, "tickIntervalMs", "hello-ok.policy") or DEFAULT_TICK_INTERVAL_MS,
        max_payload=f.opt_int(policy_d, "maxPayload", "hello-ok.policy") or DEFAULT_MAX_PAYLOAD,
        max_buffered_bytes=f.opt_int(policy_d, "maxBufferedBytes", "hello-ok.policy") or DEFAULT_MAX_BUFFERED_BYTES,
    )
    if policy.tick_interval_ms <= 0 or policy.max_payload <= 0:
        raise ProtocolError("hello-ok.policy values must be positive")
    auth = f.opt_obj(d, "auth", where) or {}
    features = f.opt_obj(d, "features", where) or {}
    # Read leniently: the figure only sharpens one judgement (``boot_started_at``), so a snapshot that lacks it or
    # holds something else costs that, not the connection.
    snapshot = d.get("snapshot")
    uptime = snapshot.get("uptimeMs") if isinstance(snapshot, dict) else None
    if isinstance(uptime, bool) or not isinstance(uptime, int):
        uptime = None
    presence = snapshot.get("presence") if isinstance(snapshot, dict) else None
    own = [p.get("ts") for p in presence or () if isinstance(p, dict) and p.get("reason") == "self"]
    snapshot_ts = own[0] if len(own) == 1 and isinstance(own[0], int) and not isinstance(own[0], bool) else None
    return HelloOk(
        protocol=f.opt_int(d, "protocol", where) or PROTOCOL_VERSION,
        boot_id=f.opt_str(server, "bootId", "hello-ok.server"),
        server_version=f.opt_str(server, "version", "hello-ok.server"),
        conn_id=f.opt_str(server, "connId", "hello-ok.server"),
        policy=policy,
        auth_method=f.opt_str(auth, "method", "hello-ok.auth"),
        auth_role=f.opt_str(auth, "role", "hello-ok.auth"),
        auth_scopes=f.opt_str_list(auth, "scopes", "hello-ok.auth") or (),
        methods=frozenset(f.opt_str_list(features, "methods", "hello-ok.features") or ()),
        uptime_ms=uptime if uptime is not None and uptime >= 0 else None,
        snapshot_ts=snapshot_ts,
        raw=d,
    )


def boot_started_at(now_ts: int | None, uptime_ms: int | None) -> int | None:
    """When the Gateway's boot began, on the Gateway's own clock: its wall clock ``now_ts`` less the hello's
    ``uptimeMs``. Both come from the one process, so no host's clock is compared with another's. ``now_ts`` is
    the snapshot's own time (``HelloOk.snapshot_ts``, read with the uptime: exact within the rounding of a
    millisecond; measured on 2026.9.6, two connections 75 ms apart gave one boot within 1 ms), else the
    challenge's ``ts``, read as the socket opened, before the uptime: the handshake's length then makes the result
    early, never late, which is the side a caller relying on "after the boot" wants (it then keeps its hold, as it
    would without the figure). None when either is missing.

    What it is for: a session row whose run ended before this time (``updatedAt``) was not the boot's restart
    recovery, which starts after the boot (``RunTable._decide_unterminated``; fuzz seed 141731)."""
    if now_ts is None or uptime_ms is None:
        return None
    return now_ts - uptime_ms


def scopes_missing(hello: HelloOk, needed: Sequence[str] = OWC_SCOPES) -> tuple[str, ...]:
    """Scopes owc needs that the Gateway did not grant (a client without a device identity is let in with
    ``scopes: []`` and fails later with FORBIDDEN; owc checks at once instead)."""
    return tuple(s for s in needed if s not in hello.auth_scopes)


def missing_scopes_text(missing: Sequence[str]) -> str:
    """What granting fewer scopes disables, in one sentence: ``"the Gateway did not grant operator.write, which
    owc needs for sending user turns (...): those are off"``. Names scopes only, never a credential."""
    uses = "; ".join(f"{scope} for {SCOPE_USES.get(scope, 'what owc does')}" for scope in missing)
    return f"the Gateway did not grant {', '.join(missing)}, which owc needs: {uses}"

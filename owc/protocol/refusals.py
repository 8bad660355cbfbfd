"""Every way the Gateway refuses owc's connect, and the one line that says what happened and how to fix it.

One table for every place that tells a person (issue 25, item 4): the reply to a message sent in Open WebUI, the
model picker's name, owc's log line, ``owc run``'s exit line and ``owc doctor``'s problem. They differ only in where
the setting to change lives (a Pipe valve, an environment variable, a command-line option), which the caller names
with ``SettingNames``; the words and the fix come from here, so the Pipe and the CLI say the same thing.

The refusals, read in the real Gateway 2026.9.6 (``connect-error-details-HKRZ1hRc.mjs``, ``message-handler-
D5c0StBB.mjs:670-700, 1030-1070``; reference ``gateway-2026.9.6.md`` sections 1.2, 1.3, 6; ``frames_auth.jsonl``):
the top-level ``code`` is mostly ``INVALID_REQUEST``, the cause is ``details.code``:

* ``AUTH_TOKEN_MISMATCH`` (a wrong token; ``authReason: token_mismatch``, close 1008), and its kin
  ``AUTH_TOKEN_MISSING``, ``AUTH_PASSWORD_MISMATCH``, ``AUTH_UNAUTHORIZED``, ``AUTH_REQUIRED``;
* ``AUTH_TOKEN_NOT_CONFIGURED``: the Gateway itself has no token set;
* ``AUTH_RATE_LIMITED``: after 10 failed sign-ins in 60 s from one address (loopback exempt) the Gateway refuses it
  for 5 minutes, ``retryable: true`` with ``retryAfterMs``;
* ``PAIRING_REQUIRED`` (code ``NOT_PAIRED`` with ``details.requestId``): a device to approve on the Gateway host;
* ``DEVICE_IDENTITY_REQUIRED`` / ``CONTROL_UI_DEVICE_IDENTITY_REQUIRED`` (``NOT_PAIRED`` without a request): the
  Gateway lets in only a device from here, and owc connected without one;
* ``AUTH_DEVICE_TOKEN_MISMATCH``: a device token the Gateway no longer knows (owc drops it and asks to pair again);
* ``AUTH_SCOPE_MISMATCH`` / ``MISSING_SCOPE``, and a hello-ok without ``operator.read`` (owc's ``MissingScopes``);
* ``PROTOCOL_MISMATCH`` (close 1002, ``details.expectedProtocol``);
* ``UNAVAILABLE`` (``gateway starting; retry shortly``, ``retryAfterMs: 500``, close 1013): not a refusal to fix,
  a Gateway still starting; said so, and retried.

Pure: no I/O, no Trio; never a token (the lines hold codes, ids, setting names and the Gateway's own message only
where nothing better is known).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import attrs

from owc.protocol.errors import ErrorShape
from owc.protocol.handshake import PROTOCOL_VERSION, missing_scopes_text


@attrs.frozen
class SettingNames:
    """Where a person changes each setting, in the words of the place owc runs. ``token``: where the token owc
    used came from and where a right one goes; ``device``: how owc gets a device identity."""

    token: str
    device: str
    #: The short name in the model picker (a model's name must stay short).
    token_short: str
    device_short: str


#: ``owc run`` / ``owc doctor`` (the token's source is filled in by the CLI: ``--token-file FILE`` or the variable).
CLI = SettingNames(
    token="--token-file FILE (or OWC_GATEWAY_TOKEN)",
    device="--device-dir DIR (not --no-device)",
    token_short="--token-file",
    device_short="--device-dir",
)


def cli_names(token_source: str) -> SettingNames:
    """``owc run`` / ``owc doctor`` names, with where the token came from: a token file's path or ``$VARIABLE``."""
    if token_source.startswith("$"):
        token = f"{token_source} (or a file passed with --token-file)"
    else:
        token = f"the token file {token_source} (--token-file)"
    return attrs.evolve(CLI, token=token)


#: owc inside Open WebUI: the Pipe's valves first, Open WebUI's environment second (``owc/owui/process.py``).
PIPE = SettingNames(
    token="the OpenClaw Pipe's GATEWAY_TOKEN valve (Admin Panel > Functions > OpenClaw > Valves)",
    device="the OpenClaw Pipe's DEVICE_DIR valve (a folder, not 'off')",
    token_short="GATEWAY_TOKEN valve",
    device_short="DEVICE_DIR valve",
)


def pipe_names(token_source: str) -> SettingNames:
    """Open WebUI's names, with where the token came from (``owc/owui/process.py``: ``GATEWAY_TOKEN``,
    ``GATEWAY_TOKEN_FILE``, ``OWC_GATEWAY_TOKEN``, ``OWC_GATEWAY_TOKEN_FILE``): the valve wins over the environment,
    so the valve is always where a right token can go."""
    if token_source == "GATEWAY_TOKEN_FILE":
        token = (
            "the file the OpenClaw Pipe's GATEWAY_TOKEN_FILE valve names (or the GATEWAY_TOKEN valve: Admin Panel >"
            " Functions > OpenClaw > Valves)"
        )
        return attrs.evolve(PIPE, token=token, token_short="GATEWAY_TOKEN_FILE valve")
    if token_source.startswith("OWC_"):
        token = f"{PIPE.token}, or {token_source} in Open WebUI's environment (where owc read it from)"
        return attrs.evolve(PIPE, token=token)
    return PIPE


class Kind(enum.Enum):
    """A refusal, by what a person must do about it."""

    TOKEN = "token"  # a wrong or missing token: change owc's token setting
    GATEWAY_HAS_NO_TOKEN = "gateway-has-no-token"  # the Gateway's config: set gateway.auth.token there
    RATE_LIMITED = "rate-limited"  # too many failed sign-ins: wait, and fix the token
    PAIRING = "pairing"  # approve owc's device on the Gateway host
    DEVICE_REQUIRED = "device-required"  # give owc a device identity
    DEVICE_TOKEN = "device-token"  # a device token the Gateway forgot: pair again
    SCOPES = "scopes"  # approve the device with owc's scopes
    PROTOCOL = "protocol"  # the Gateway and owc speak different protocols
    STARTING = "starting"  # the Gateway is starting: nothing to fix
    OTHER = "other"  # anything else: the Gateway's own words


_TOKEN_CODES = frozenset(
    {"AUTH_TOKEN_MISMATCH", "AUTH_TOKEN_MISSING", "AUTH_PASSWORD_MISMATCH", "AUTH_UNAUTHORIZED", "AUTH_REQUIRED"}
)
_DEVICE_REQUIRED_CODES = frozenset({"DEVICE_IDENTITY_REQUIRED", "CONTROL_UI_DEVICE_IDENTITY_REQUIRED"})
_SCOPE_CODES = frozenset({"AUTH_SCOPE_MISMATCH", "MISSING_SCOPE"})


def kind_of(error: ErrorShape) -> Kind:
    """Which refusal the Gateway's ``ErrorShape`` is (its ``details.code`` first, then its ``code``)."""
    detail = error.detail_code
    details = error.details if isinstance(error.details, dict) else {}
    if detail in _TOKEN_CODES:
        return Kind.TOKEN
    if detail == "AUTH_TOKEN_NOT_CONFIGURED":
        return Kind.GATEWAY_HAS_NO_TOKEN
    if detail == "AUTH_RATE_LIMITED":
        return Kind.RATE_LIMITED
    if detail == "PAIRING_REQUIRED" or (error.code == "NOT_PAIRED" and details.get("requestId")):
        return Kind.PAIRING
    if detail in _DEVICE_REQUIRED_CODES or error.code == "NOT_PAIRED":
        return Kind.DEVICE_REQUIRED
    if detail == "AUTH_DEVICE_TOKEN_MISMATCH":
        return Kind.DEVICE_TOKEN
    if detail in _SCOPE_CODES:
        return Kind.SCOPES
    if detail == "PROTOCOL_MISMATCH":
        return Kind.PROTOCOL
    if error.code == "UNAVAILABLE":
        return Kind.STARTING
    return Kind.OTHER


@attrs.frozen
class Refusal:
    """A refusal explained: ``what`` happened (with the Gateway's code), ``fix`` (what to do, naming the setting or
    the command), ``short`` (the picker's few words). ``retryable``: owc keeps trying by itself."""

    kind: Kind
    code: str
    what: str
    fix: str
    short: str
    retryable: bool = False

    @property
    def line(self) -> str:
        """The log's, the CLI's and ``owc doctor``'s line."""
        return f"{self.what}: {self.fix}"

    @property
    def reply(self) -> str:
        """The line a person who sent a message reads instead of a reply."""
        return f"{self.what}, so your message was not sent: {self.fix}."


def _seconds(ms: int | None) -> str:
    if ms is None or ms <= 0:
        return "a while"
    seconds = -(-ms // 1000)  # rounded up
    return f"{seconds} s" if seconds < 120 else f"{-(-seconds // 60)} min"


def explain(
    error: ErrorShape,
    names: SettingNames,
    *,
    device_id: str | None = None,
    retryable: bool | None = None,
) -> Refusal:
    """The one line for the Gateway's refusal ``error``. ``device_id``: owc's device, when it connected as one (the
    pairing and scope lines name it). ``retryable``: whether owc retries (else the Gateway's own flag)."""
    kind = kind_of(error)
    code = error.detail_code or error.code
    details = error.details if isinstance(error.details, dict) else {}
    device = f"owc's device {device_id[:16]}..." if device_id else "owc's device"
    again = error.retryable if retryable is None else retryable
    if kind is Kind.TOKEN:
        what = f"The OpenClaw Gateway refused owc's token ({code})"
        fix = f"put the Gateway's token (gateway.auth.token on the Gateway host) in {names.token}"
        short = f"wrong token: see {names.token_short}"
    elif kind is Kind.GATEWAY_HAS_NO_TOKEN:
        what = f"The OpenClaw Gateway has no token configured ({code})"
        fix = f"set gateway.auth.token on the Gateway host, and the same token in {names.token}"
        short = "the Gateway has no token set"
    elif kind is Kind.RATE_LIMITED:
        what = f"The OpenClaw Gateway refuses owc after too many failed sign-ins from this host ({code})"
        fix = f"owc tries again in {_seconds(error.retry_after_ms)}; meanwhile check the token in {names.token}"
        short = f"too many failed sign-ins: see {names.token_short}"
    elif kind is Kind.PAIRING:
        request = details.get("requestId")
        request_text = request if isinstance(request, str) and request else "<request id>"
        what = f"{device} waits to be approved on the OpenClaw Gateway's host ({code})"
        fix = (
            f"run `openclaw devices approve {request_text}` there (`openclaw devices list` shows the request);"
            " owc connects once it is approved"
        )
        short = "approve owc's device on the Gateway host"  # the command and its request id: in the reply
    elif kind is Kind.DEVICE_REQUIRED:
        what = f"The OpenClaw Gateway lets in only a paired device from here ({code})"
        fix = f"give owc a device folder in {names.device}, then approve the device on the Gateway host"
        short = f"needs a device: see {names.device_short}"
    elif kind is Kind.DEVICE_TOKEN:
        what = f"The OpenClaw Gateway no longer knows {device}'s token ({code})"
        fix = (
            "owc dropped it and asks to be paired again: approve the new request on the Gateway host"
            " (`openclaw devices list`)"
        )
        short = "device forgotten: approve it again"
    elif kind is Kind.SCOPES:
        missing = details.get("missingScope")
        scope = f" {missing}" if isinstance(missing, str) and missing else ""
        what = f"The OpenClaw Gateway did not grant owc the scope{scope} it needs ({code})"
        fix = f"approve {device} with owc's scopes on the Gateway host (`openclaw devices list`)"
        short = "scopes missing: approve the device's scopes"
    elif kind is Kind.PROTOCOL:
        expected = details.get("expectedProtocol")
        speaks = f"protocol {expected}" if isinstance(expected, int) else "another protocol"
        what = f"The OpenClaw Gateway speaks {speaks}, owc protocol {PROTOCOL_VERSION} ({code})"
        fix = f"run a Gateway that speaks protocol {PROTOCOL_VERSION} (OpenClaw 2026.9), or an owc release made for it"
        short = f"Gateway protocol is not {PROTOCOL_VERSION}"
    elif kind is Kind.STARTING:
        what = f"The OpenClaw Gateway is still starting ({code})"
        fix = "owc connects as soon as it is ready; send your message again in a moment"
        short = "Gateway starting"
    else:
        what = f"The OpenClaw Gateway refused owc's connection ({code}: {error.message[:200]})"
        fix = "the Gateway's log says why"
        short = f"refused: {code}"
    return Refusal(kind=kind, code=code, what=what, fix=fix, short=short, retryable=again)


def explain_missing_scopes(missing: Sequence[str], names: SettingNames, *, device_id: str | None = None) -> Refusal:
    """The line for a hello-ok without the scopes owc cannot work without (``operator.read``): which are missing,
    what that turns off, and how to grant them (the device's approval; without a device, giving owc one)."""
    text = missing_scopes_text(tuple(missing))
    if device_id is None:
        fix = (
            "a Gateway on another host (or behind a proxy that adds an Origin header) trusts only a paired device:"
            f" give owc a device folder in {names.device}"
        )
        short = f"no scopes: see {names.device_short}"
    else:
        fix = (
            f"approve owc's device {device_id[:16]}... with these scopes on the Gateway host (`openclaw devices list`)"
        )
        short = "scopes missing: approve the device's scopes"
    what = "The OpenClaw Gateway let owc in without the scopes it needs (MISSING_SCOPE): " + text
    return Refusal(kind=Kind.SCOPES, code="MISSING_SCOPE", what=what, fix=fix, short=short)

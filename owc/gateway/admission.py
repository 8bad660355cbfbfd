"""Admission: what owc presents and checks to be let into a Gateway, apart from the pump that carries it.

A connect attempt is admitted in steps, each a policy of its own and none of them the connection's business
(``owc.gateway.connection`` pumps frames; it asks this module at each step):

* TLS: the context a ``wss://`` URL gets (a CA file, or a certificate pin instead of the chain and names) and the
  pin's check once the TLS handshake is done (``parse_pin``, ``check_pin``);
* the device: owc's identity (``owc/device.py``), the signed ``device`` proof and device token ``connect``
  carries, the token the Gateway issues once it is paired, and the token dropped when the Gateway no longer knows it;
* the refusal: which refusals retrying cannot fix, and the line a person is told (pairing: the exact command);
* the scopes granted: what their absence disables, said once at the hello rather than on the first call.

Why its own module: this policy (issue 26, "carve and name") was a quarter of ``connection.py`` and changes for its
own reasons (a Gateway release's pairing rules, TLS settings), not the pump's. It never imports the connection:
the client hands it the URL it may show and its settings (``GatewayConfig`` satisfies ``AdmissionSettings``).
"""

from __future__ import annotations

import hashlib
import logging
import ssl
from pathlib import Path
from typing import Any, Protocol

import attrs
import trio

from owc import device
from owc.gateway.errors import MissingScopes, Refused
from owc.gateway.url import check_gateway_url
from owc.protocol import HelloOk, ProtocolError, Response, refusals
from owc.protocol.handshake import missing_scopes_text, parse_challenge, scopes_missing
from owc.protocol.refusals import SettingNames

log = logging.getLogger("owc.gateway")

#: Refusals that retrying cannot fix (reference section 6).
PERMANENT_DETAIL_CODES = frozenset(
    {"AUTH_TOKEN_MISMATCH", "PROTOCOL_MISMATCH", "DEVICE_IDENTITY_REQUIRED", "CONTROL_UI_DEVICE_IDENTITY_REQUIRED"}
)
PERMANENT_CODES = frozenset({"NOT_PAIRED", "FORBIDDEN"})


class AdmissionSettings(Protocol):
    """The settings admission reads (``GatewayConfig`` has them all)."""

    @property
    def ssl_context(self) -> ssl.SSLContext | None: ...

    @property
    def ca_file(self) -> Path | None: ...

    @property
    def pin_sha256(self) -> str | None: ...

    @property
    def device_dir(self) -> Path | None: ...

    @property
    def names(self) -> SettingNames: ...


@attrs.frozen
class Admission:
    """The admission policy for the client's current settings. The client builds one where it asks (a cheap
    value), so a ``reconfigure`` is seen at the next step exactly as when this policy read the client itself.
    ``url``: the URL as it may be shown (credentials redacted), the one every log line names."""

    url: str
    settings: AdmissionSettings = attrs.field(repr=False)

    # ------------------------------------------------------------------ TLS

    def tls_context(self, url: str) -> ssl.SSLContext | None:
        """The TLS context for ``url`` (the real one: only its scheme is read), None for ``ws://``."""
        if check_gateway_url(url).scheme != "wss":  # the parsed scheme: ``WSS://`` is TLS too
            return None
        cfg = self.settings
        if cfg.ssl_context is not None:
            return cfg.ssl_context
        context = ssl.create_default_context(cafile=str(cfg.ca_file) if cfg.ca_file is not None else None)
        if cfg.pin_sha256 is not None:
            # The pin is the check (``check_pin``, after the TLS handshake): the chain and the names are not asked for.
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context  # otherwise: verifies certificates and host names; never a silent downgrade to ws://

    @property
    def pin(self) -> str | None:
        """The pin to check after the TLS handshake: none when the caller gave its own ``ssl_context``."""
        cfg = self.settings
        return cfg.pin_sha256 if cfg.ssl_context is None else None

    # ------------------------------------------------------------------ the device

    async def identity(self) -> device.DeviceIdentity | None:
        """owc's device identity (made on first use), or None without a ``device_dir``: token only."""
        folder = self.settings.device_dir
        if folder is None:
            return None
        return await trio.to_thread.run_sync(device.load_or_create, folder)

    async def paired(self, identity: device.DeviceIdentity, payload: Any) -> None:
        """Keep the device token the Gateway issued (``hello-ok.auth.deviceToken``) for the next connects."""
        auth = payload.get("auth") if isinstance(payload, dict) else None
        token = auth.get("deviceToken") if isinstance(auth, dict) else None
        if isinstance(token, str) and token and token != identity.device_token:
            assert self.settings.device_dir is not None
            await trio.to_thread.run_sync(device.set_device_token, self.settings.device_dir, token)
            log.info(
                "gateway.device_paired url=%s device=%s (its device token is stored)", self.url, identity.device_id
            )

    async def refused(self, refused: Refused, identity: device.DeviceIdentity | None) -> Refused:
        """A refusal about the device: pairing is a person's step on the Gateway host, so owc says exactly which
        and keeps retrying on its backoff (connecting as soon as it is approved); a device token the Gateway no
        longer knows (revoked, removed) is dropped, and the next connect asks for pairing again. Every refusal
        leaves with its line in this client's words (``refused.refusal``); a pairing one is what the client keeps
        in ``GatewayClient.pairing``."""
        await self._device_refusal(refused, identity)
        refused.refusal = refusals.explain(
            refused.error,
            self.settings.names,
            device_id=identity.device_id if identity is not None else None,
            retryable=refused.retryable,
        )
        return refused

    async def _device_refusal(self, refused: Refused, identity: device.DeviceIdentity | None) -> None:
        if identity is None:
            return
        error = refused.error
        details = error.details if isinstance(error.details, dict) else {}
        if error.detail_code == "PAIRING_REQUIRED" or (error.code == "NOT_PAIRED" and details.get("requestId")):
            if identity.device_token is not None:
                # A device removed or revoked on the Gateway host: owc sends the shared token too, so the Gateway
                # answers with a new pairing request (measured on 2026.9.6: reason not-paired after ``devices
                # remove``, role-upgrade after ``revoke``), never AUTH_DEVICE_TOKEN_MISMATCH. The stored token is
                # dead: drop it (approval issues a new one in hello-ok) rather than keep sending and exporting it.
                await self._drop_device_token(identity, f"the Gateway asks to pair again: {details.get('reason')}")
            request = details.get("requestId")
            log.error(
                "gateway.pairing_required url=%s device=%s request=%s: approve this device on the Gateway host with"
                " `openclaw devices approve %s` (`openclaw devices list` shows it); owc connects once it is approved",
                self.url,
                identity.device_id,
                request,
                request,
            )
            refused.retryable = True  # a person approves it: owc connects on its backoff, no restart
        elif error.detail_code == "AUTH_DEVICE_TOKEN_MISMATCH" and identity.device_token is not None:
            await self._drop_device_token(identity, "the Gateway no longer knows it: pairing again")
            refused.retryable = True

    async def _drop_device_token(self, identity: device.DeviceIdentity, why: str) -> None:
        assert self.settings.device_dir is not None
        await trio.to_thread.run_sync(device.set_device_token, self.settings.device_dir, None)
        log.warning("gateway.device_token_dropped url=%s device=%s (%s)", self.url, identity.device_id, why)

    # ------------------------------------------------------------------ the scopes

    def check_scopes(self, hello: HelloOk, identity: device.DeviceIdentity | None) -> str | None:
        """Say at once what the granted scopes disable, rather than fail on the first call. Without
        ``operator.read`` nothing works: ``MissingScopes``, final. Without ``operator.write`` owc still shows the
        agent's runs; what needs it is refused with the returned text (user turns: ``Runtime.user_turn``). Without
        ``operator.admin`` only a Stop of another client's run fails (a warning now, the Gateway's refusal then)."""
        missing = scopes_missing(hello) if hello.auth_role is not None else ()
        if not missing:
            return None
        device_id = identity.device_id if identity is not None else None
        refusal = refusals.explain_missing_scopes(missing, self.settings.names, device_id=device_id)
        if "operator.read" in missing:
            raise MissingScopes(missing, refusal)
        text = f"{missing_scopes_text(missing)}: {refusal.fix}."
        log.log(
            logging.ERROR if "operator.write" in missing else logging.WARNING,
            "gateway.scopes_missing url=%s missing=%s: %s",
            self.url,
            ",".join(missing),
            text,
        )
        return text if "operator.write" in missing else None


def present_device(body: dict[str, Any], identity: device.DeviceIdentity, challenge: Any) -> None:
    """Add what the device presents to the ``connect`` params ``body``: its device token (once paired) and the
    signed ``device`` proof over the challenge's nonce and ``ts``."""
    if identity.device_token is not None:
        body["auth"]["deviceToken"] = identity.device_token
    signed = parse_challenge(challenge)
    if signed.ts is None:
        raise ProtocolError("connect.challenge without a ts to sign")
    nonce, ts = signed.nonce, signed.ts
    body["device"] = identity.sign_connect_params(body, nonce=nonce, signed_at_ms=ts)


def connect_refused(frame: Response, close_code: int | None) -> Refused:
    """The ``connect`` refusal ``frame`` as ``Refused``, retryable or not by its codes."""
    if frame.error is None:
        raise ProtocolError("connect refused without an error")
    refused = Refused(frame.error, close_code)
    if frame.error.detail_code in PERMANENT_DETAIL_CODES or frame.error.code in PERMANENT_CODES:
        refused.retryable = False
    elif frame.error.detail_code == "AUTH_RATE_LIMITED":
        # Too many failed sign-ins from this address (10 in 60 s: locked out 5 min): ``INVALID_REQUEST`` with
        # ``retryable`` and ``retryAfterMs`` (2026.9.6, ``message-handler-D5c0StBB.mjs:1059-1063``). It passes:
        # retried no sooner than the Gateway says, never a final refusal (``owc run`` went on exiting 4 for it).
        refused.retryable = True
    elif frame.error.code == "INVALID_REQUEST":
        refused.retryable = False  # invalid connect params / bad handshake: owc's own bug, not transient
    return refused


def parse_pin(text: str | None) -> str | None:
    """A certificate pin as people paste it (``AB:CD:...`` from ``openssl x509 -fingerprint -sha256``, or plain
    hex, any case) as 64 lower-case hex digits; ``ValueError`` for anything else, so a typo is a configuration
    error at start and not a refused certificate on every connect. None or blank: no pin."""
    if text is None or not text.strip():
        return None
    raw = text.strip()
    if "=" in raw:  # ``sha256 Fingerprint=AB:CD:...`` pasted whole
        raw = raw.rsplit("=", 1)[1]
    hexed = raw.replace(":", "").replace(" ", "").lower()
    if len(hexed) != 64 or any(c not in "0123456789abcdef" for c in hexed):
        raise ValueError("a TLS pin is the certificate's SHA-256 fingerprint: 64 hex digits (colons allowed)")
    return hexed


def check_pin(stream: trio.SSLStream[trio.SocketStream], pin_sha256: str) -> None:
    """The Gateway's certificate is the pinned one (SHA-256 of its DER form, as ``openssl x509 -fingerprint
    -sha256`` prints it), else the connection is refused as a bad certificate (retrying will not help)."""
    der = stream.getpeercert(binary_form=True)
    want = pin_sha256
    got = hashlib.sha256(der).hexdigest() if der else ""
    if got != want:
        raise ssl.SSLCertVerificationError(f"the Gateway's certificate is not the pinned one (its SHA-256 is {got})")

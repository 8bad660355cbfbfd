"""owc's device identity for a Gateway on another host: an Ed25519 key pair, the signed ``device`` proof of a
``connect`` request, and the device token the Gateway hands out once the device is paired.

Why: without a ``device`` object the Gateway clears a client's self-declared scopes unless it is a loopback
``gateway-client``/``backend`` (reference ``gateway-2026.9.6.md`` §6), so a Gateway on another host needs one. The
formats below are the Gateway's own, read in its installed dist (``openclaw@2026.9.6``,
``node_modules/openclaw/dist``); every signature this module makes is checked by the dist's own verification code
in ``tests/test_device.py`` (``tests/realgw/verify_device.mjs``).

* Key: Ed25519 (``ed25519-signature-De1Kepnz.mjs:3-5``: 32-byte raw keys; SPKI prefix ``302a300506032b6570032100``).
* ``device.id`` = lowercase hex SHA-256 of the raw 32-byte public key (``device-identity-B_zMrBd6.mjs:461-470``:
  ``crypto.createHash("sha256").update(raw).digest("hex")``). The server recomputes it from ``publicKey`` and
  rejects a mismatch, "device identity mismatch" (``message-handler-D5c0StBB.mjs:890-894``).
* ``device.publicKey`` = the raw 32 bytes, base64url *without* padding: the Gateway's own client sends
  ``publicKeyRawBase64UrlFromPem(...)`` (``client-CpsABkfT.mjs:1303``; ``ed25519-signature-De1Kepnz.mjs:6-8,118-120``
  ``buf.toString("base64url")``, which never pads). The server also accepts PEM or padded/standard base64
  (``ed25519-signature-De1Kepnz.mjs:15-20,134-141``), but normalises to this form (``message-handler:921``).
* ``device.signature`` = the Ed25519 signature (``crypto.sign(null, utf8(payload), key)``) of the payload's UTF-8
  bytes, base64url without padding (``ed25519-signature-De1Kepnz.mjs:130-133``); verified with
  ``crypto.verify(null, payload, key, base64UrlDecode(sig))`` (``ed25519-signature-De1Kepnz.mjs:142-157``).
* ``device.signedAt`` = an integer of milliseconds, within 120 s of the server's clock
  (``message-handler-D5c0StBB.mjs:849,895-899``); the Gateway's client signs the challenge's ``ts``
  (``client-CpsABkfT.mjs:926`` ``signedAtMs: challengeTs ?? Date.now()``).
* ``device.nonce`` = the ``connect.challenge`` nonce, trimmed and compared exactly (``message-handler:900-908``).
* The signed payload, v3 (``device-auth-na9vtJo1.mjs:23-41``)::

      v3|deviceId|clientId|clientMode|role|scopes.join(",")|String(signedAtMs)|token ?? ""|nonce|platform|deviceFamily

  where ``platform`` and ``deviceFamily`` pass through ``normalizeDeviceMetadataForAuth``
  (``device-auth-na9vtJo1.mjs:2-7``): not a string (absent) -> ``""``; else trimmed, and only ASCII ``A-Z``
  lowercased. An absent ``deviceFamily`` is therefore the empty string, and the payload always has 11 fields.
* The server rebuilds that string from the connect params it received (``node-connect-reconcile-D2OfynQl.mjs:93-114``):
  ``client.id``, ``client.mode``, ``client.platform``, ``client.deviceFamily``, ``role`` (default ``"operator"``,
  ``message-handler:600``) and ``scopes`` (as sent, not sorted; ``[]`` when absent, ``message-handler:608``), and the
  token ``auth.token ?? auth.deviceToken ?? auth.bootstrapToken ?? null`` (``node-connect-reconcile:83-85``). It
  tries v3, then the legacy v2 (the same without platform and deviceFamily); owc signs v3 only.
  ``DeviceIdentity.sign_connect_params`` takes every one of those from the params themselves, so they cannot drift.

Storage: one JSON file, ``<state_dir>/device.json`` (folder 0700, file 0600), holding the raw 32-byte Ed25519
seed (base64url) and the device token; it is written atomically (a temporary file in the same folder, fsync,
``os.replace``, fsync of the folder), so a crash leaves either the old file or the new one. Nothing here ever logs,
reprs or puts into an error message the key or the token; a corrupt file is reported by its path only.
``export_identity`` is the exception by design: its text *is* the secret (key and device token), for moving the
identity into a rebuilt container; treat it like a password.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import stat
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

log = logging.getLogger(__name__)

#: The identity file's name inside the state folder.
FILE_NAME = "device.json"
#: The format the file (and an export) carries, so a later owc can tell an old file from a corrupt one.
FORMAT = "owc-device-identity"
VERSION = 1
#: The server's accepted clock skew for ``device.signedAt`` (``message-handler-D5c0StBB.mjs:849``).
SIGNATURE_SKEW_MS = 120_000
#: A device file larger than this is not one (it holds a few hundred bytes).
MAX_FILE_BYTES = 65_536
#: A temporary file older than this is a crashed writer's leftover (it holds a key): removed on load.
STALE_TEMP_S = 300.0

_SEED_BYTES = 32
_B64URL = re.compile(r"[A-Za-z0-9_-]+")
#: What JavaScript's ``String.prototype.trim`` removes (WhiteSpace + LineTerminator), which is not Python's
#: ``str.strip()`` set (that one also strips U+001C-U+001F and U+0085, and keeps U+FEFF).
_JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_OPEN_READ = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)


class DeviceIdentityError(Exception):
    """The device identity cannot be loaded, stored or imported; the message names the file and the reason in
    one line, never its content."""


# --- the pure part: encodings and the signed payload ---------------------------------------------------------


def b64url(data: bytes) -> str:
    """Base64url without padding: Node's ``Buffer.toString("base64url")``, the Gateway's encoding for keys and
    signatures."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """The inverse of ``b64url``, strict (only the base64url alphabet, no padding), for owc's own file."""
    if not isinstance(text, str) or not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not unpadded base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def normalize_device_metadata(value: object) -> str:
    """``normalizeDeviceMetadataForAuth`` (``device-auth-na9vtJo1.mjs:2-7``): not a string -> ``""``; else
    JavaScript-trimmed with only ASCII ``A-Z`` lowercased (``"İOS"`` keeps its ``İ``)."""
    if not isinstance(value, str):
        return ""
    return value.strip(_JS_WHITESPACE).translate(_ASCII_LOWER)


def v3_payload(
    *,
    device_id: str,
    client_id: str,
    client_mode: str,
    role: str,
    scopes: Sequence[str],
    signed_at_ms: int,
    token: str | None,
    nonce: str,
    platform: str | None,
    device_family: str | None,
) -> str:
    """The string a device signs, ``buildDeviceAuthPayloadV3`` (``device-auth-na9vtJo1.mjs:23-41``) to the byte.

    ``token`` is the one the server will pick from ``auth`` (``signature_token``), ``None`` when there is none;
    ``platform`` / ``device_family`` are what ``client`` carries (``None`` when absent)."""
    if isinstance(scopes, str):
        raise TypeError("scopes must be a sequence of scope names, not one string")
    if isinstance(signed_at_ms, bool) or not isinstance(signed_at_ms, int):
        raise TypeError("signed_at_ms must be an integer of milliseconds")
    return "|".join(
        [
            "v3",
            device_id,
            client_id,
            client_mode,
            role,
            ",".join(scopes),
            str(signed_at_ms),
            "" if token is None else token,
            nonce,
            normalize_device_metadata(platform),
            normalize_device_metadata(device_family),
        ]
    )


def signature_token(auth: Mapping[str, Any] | None) -> str | None:
    """The token the server puts into the payload it verifies: ``auth.token ?? auth.deviceToken ??
    auth.bootstrapToken ?? null`` (``node-connect-reconcile-D2OfynQl.mjs:83-85``; ``??`` skips only absent/null,
    so an empty string counts)."""
    if not auth:
        return None
    for key in ("token", "deviceToken", "bootstrapToken"):
        value = auth.get(key)
        if value is not None:
            return str(value)
    return None


def device_id_of(public_key_raw: bytes) -> str:
    """``device.id``: lowercase hex SHA-256 of the raw 32-byte public key (``device-identity-B_zMrBd6.mjs:461-470``)."""
    return hashlib.sha256(public_key_raw).hexdigest()


def _public_raw(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _seed_bytes(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())


@attrs.frozen(repr=False)
class DeviceIdentity:
    """An Ed25519 device key, its derived id and public key, and the device token the Gateway issued to it (if any).

    The private key stays inside: it is in no public attribute, not in ``repr`` / ``str``, and not compared
    (the id, derived from it, is). Build one with ``generate()`` or ``from_seed()``; ``with_device_token``
    returns a copy with another token. ``device_token`` is readable (it goes into ``auth.deviceToken``) but, being a
    credential, never shown either."""

    _key: Ed25519PrivateKey = attrs.field(alias="key", eq=False)
    device_token: str | None = attrs.field(default=None, kw_only=True)
    device_id: str = attrs.field(init=False)
    #: The raw public key, unpadded base64url: ``device.publicKey`` as the Gateway expects it.
    public_key_b64: str = attrs.field(init=False)

    @device_id.default
    def _device_id(self) -> str:
        return device_id_of(_public_raw(self._key))

    @public_key_b64.default
    def _public_key_b64(self) -> str:
        return b64url(_public_raw(self._key))

    @classmethod
    def generate(cls) -> DeviceIdentity:
        """A new random identity (no device token yet)."""
        return cls(key=Ed25519PrivateKey.generate())

    @classmethod
    def from_seed(cls, seed: bytes, device_token: str | None = None) -> DeviceIdentity:
        """The identity of a raw 32-byte Ed25519 private key (seed): how the file stores it, and how a test pins it."""
        if not isinstance(seed, bytes | bytearray) or len(seed) != _SEED_BYTES:
            raise ValueError(f"an Ed25519 seed is {_SEED_BYTES} bytes")
        return cls(key=Ed25519PrivateKey.from_private_bytes(bytes(seed)), device_token=device_token)

    def with_device_token(self, token: str | None) -> DeviceIdentity:
        """The same key with ``token`` as its device token (``None``: forget it)."""
        return DeviceIdentity(key=self._key, device_token=token)

    def sign(self, payload: str) -> str:
        """``signDevicePayload`` (``ed25519-signature-De1Kepnz.mjs:130-133``): Ed25519 over the UTF-8 bytes,
        unpadded base64url."""
        return b64url(self._key.sign(payload.encode("utf-8")))

    def sign_connect(
        self,
        *,
        client_id: str,
        client_mode: str,
        role: str,
        scopes: Sequence[str],
        signed_at_ms: int,
        token: str | None,
        nonce: str,
        platform: str | None,
        device_family: str | None = None,
    ) -> dict[str, Any]:
        """The ``device`` object of a ``connect`` request's params: ``{id, publicKey, signature, signedAt, nonce}``.

        ``signed_at_ms`` and ``nonce`` are the ``connect.challenge`` payload's ``ts`` and ``nonce``; the other
        arguments must be exactly what the params carry (``role`` as sent, ``"operator"`` when omitted; ``scopes``
        in the order sent; ``token`` as ``signature_token(params["auth"])``). ``sign_connect_params`` reads them from
        the params for you."""
        if not isinstance(nonce, str) or not nonce or nonce.strip(_JS_WHITESPACE) != nonce:
            raise ValueError("nonce must be the challenge's nonce: non-empty, without surrounding whitespace")
        payload = v3_payload(
            device_id=self.device_id,
            client_id=client_id,
            client_mode=client_mode,
            role=role,
            scopes=scopes,
            signed_at_ms=signed_at_ms,
            token=token,
            nonce=nonce,
            platform=platform,
            device_family=device_family,
        )
        return {
            "id": self.device_id,
            "publicKey": self.public_key_b64,
            "signature": self.sign(payload),
            "signedAt": signed_at_ms,
            "nonce": nonce,
        }

    def sign_connect_params(self, params: Mapping[str, Any], *, nonce: str, signed_at_ms: int) -> dict[str, Any]:
        """The ``device`` object for these ``connect`` params (without ``device``), each signed field read from them
        the way the server reads it (``node-connect-reconcile-D2OfynQl.mjs:93-109``, ``message-handler:600-608``)."""
        client = params["client"]
        scopes = params.get("scopes")
        return self.sign_connect(
            client_id=client["id"],
            client_mode=client["mode"],
            role=params.get("role") or "operator",
            scopes=list(scopes) if isinstance(scopes, list | tuple) else [],
            signed_at_ms=signed_at_ms,
            token=signature_token(params.get("auth")),
            nonce=nonce,
            platform=client.get("platform"),
            device_family=client.get("deviceFamily"),
        )

    def __repr__(self) -> str:
        token = "set" if self.device_token is not None else "none"
        return (
            f"DeviceIdentity(device_id={self.device_id!r}, public_key_b64={self.public_key_b64!r}, "
            f"device_token={token})"
        )

    __str__ = __repr__


def public_summary(identity: DeviceIdentity) -> dict[str, Any]:
    """What may be shown (a status page, ``owc`` output, a log line): the id, the public key and whether a device
    token is stored; never the token or the key."""
    return {
        "device_id": identity.device_id,
        "public_key": identity.public_key_b64,
        "device_token_stored": identity.device_token is not None,
    }


# --- where the identity lives ---------------------------------------------------------------------------------


def default_state_dir(hosted: bool, data_dir: Path | None, *, environ: Mapping[str, str] | None = None) -> Path:
    """The folder for ``device.json``: ``<DATA_DIR>/owc`` inside Open WebUI (its data folder is the one that survives
    a container rebuild), else ``$XDG_STATE_HOME/owc`` or ``~/.local/state/owc`` (the XDG spec's place for state that
    should persist but is not configuration). ``data_dir`` is Open WebUI's ``DATA_DIR`` (``open_webui.env.DATA_DIR``);
    when hosted without it, the ``DATA_DIR`` environment variable is used."""
    env = os.environ if environ is None else environ
    if hosted:
        if data_dir is None:
            from_env = env.get("DATA_DIR", "").strip()
            if not from_env:
                raise ValueError("hosted in Open WebUI but its DATA_DIR is unknown: pass data_dir")
            data_dir = Path(from_env)
        return Path(data_dir) / "owc"
    xdg = env.get("XDG_STATE_HOME", "").strip()
    if xdg and Path(xdg).is_absolute():  # the XDG spec: a relative path is invalid and is ignored
        return Path(xdg) / "owc"
    home = env.get("HOME", "").strip()
    return (Path(home) if home else Path.home()) / ".local" / "state" / "owc"


def identity_path(state_dir: Path) -> Path:
    return Path(state_dir) / FILE_NAME


def _record(identity: DeviceIdentity) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "device_id": identity.device_id,
        "public_key": identity.public_key_b64,
        "ed25519_seed": b64url(_seed_bytes(identity._key)),
        "device_token": identity.device_token,
    }


def _from_record(data: object, where: str) -> DeviceIdentity:
    """The identity a parsed file or export holds; ``DeviceIdentityError`` naming ``where`` (never a value) if it
    is not a whole, self-consistent one."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise DeviceIdentityError(f"{where}: not an owc device identity")
    if data.get("version") != VERSION:
        raise DeviceIdentityError(f"{where}: unsupported version (this owc reads version {VERSION})")
    try:
        seed = b64url_decode(data.get("ed25519_seed"))  # type: ignore[arg-type]
    except (ValueError, binascii.Error):
        raise DeviceIdentityError(f"{where}: the key is missing or not base64url") from None
    if len(seed) != _SEED_BYTES:
        raise DeviceIdentityError(f"{where}: the key is not {_SEED_BYTES} bytes")
    token = data.get("device_token")
    if token is not None and (not isinstance(token, str) or not token):
        raise DeviceIdentityError(f"{where}: the device token is not a non-empty string")
    identity = DeviceIdentity.from_seed(seed, token)
    if data.get("device_id") != identity.device_id:
        raise DeviceIdentityError(f"{where}: its device_id does not belong to its key (edited or damaged)")
    return identity


def _ensure_dir(state_dir: Path) -> None:
    """Create the state folder 0700 (the umask may have widened nothing, but an existing folder may be wider)."""
    try:
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.stat(state_dir)
        if not stat.S_ISDIR(info.st_mode):
            raise DeviceIdentityError(f"device state folder {state_dir}: not a folder")
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.chmod(state_dir, 0o700)
    except DeviceIdentityError:
        raise
    except OSError as exc:
        raise DeviceIdentityError(f"device state folder {state_dir}: {exc.strerror or exc}") from None


def _fsync_dir(folder: Path) -> None:
    """Make a rename durable (best effort: some file systems cannot open or fsync a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_temp(state_dir: Path, identity: DeviceIdentity) -> Path:
    """The identity in a new fsynced 0600 temporary file in ``state_dir`` (same file system: the rename is atomic)."""
    text = json.dumps(_record(identity), separators=(",", ":")) + "\n"
    fd, name = tempfile.mkstemp(prefix=f".{FILE_NAME}.", suffix=".tmp", dir=state_dir)  # mkstemp: mode 0600
    tmp = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return tmp


def save(state_dir: Path, identity: DeviceIdentity) -> None:
    """Write ``identity`` (key and device token) to ``<state_dir>/device.json``, replacing what is there, atomically:
    a crash at any point leaves the old file or the new one, and no temporary file behind."""
    state_dir = Path(state_dir)
    path = identity_path(state_dir)
    _ensure_dir(state_dir)
    try:
        tmp = _write_temp(state_dir, identity)
        try:
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
    except OSError as exc:
        raise DeviceIdentityError(f"device identity {path}: cannot write it: {exc.strerror or exc}") from None
    _fsync_dir(state_dir)
    log.debug("device identity %s saved to %s", identity.device_id, path)


def _create_exclusive(state_dir: Path, identity: DeviceIdentity) -> bool:
    """Write ``identity`` only if no file is there (``os.link`` of the fsynced temporary file, which never
    replaces), so two processes starting at once agree on one key. False: another one was first."""
    path = identity_path(state_dir)
    try:
        tmp = _write_temp(state_dir, identity)
    except OSError as exc:
        raise DeviceIdentityError(f"device identity {path}: cannot write it: {exc.strerror or exc}") from None
    try:
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError as exc:
            # A file system without hard links (some FUSE / SMB mounts): check-then-rename, racy but rare.
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.ENOSYS):
                raise DeviceIdentityError(f"device identity {path}: cannot write it: {exc.strerror or exc}") from None
            if os.path.lexists(path):
                return False
            try:
                os.replace(tmp, path)
            except OSError as exc2:
                raise DeviceIdentityError(f"device identity {path}: cannot write it: {exc2.strerror or exc2}") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    _fsync_dir(state_dir)
    return True


def _sweep_stale_temps(state_dir: Path) -> None:
    """Remove a crashed writer's temporary files (each holds a key); young ones may be a live writer's."""
    now = time.time()
    for leftover in state_dir.glob(f".{FILE_NAME}.*.tmp"):
        with contextlib.suppress(OSError):
            if now - leftover.lstat().st_mtime > STALE_TEMP_S:
                leftover.unlink()


def load(state_dir: Path) -> DeviceIdentity | None:
    """The identity stored in ``<state_dir>/device.json``, ``None`` if there is none. Raises ``DeviceIdentityError``
    (naming the file, never quoting it) when it is unreadable, a symbolic link, not a regular file, or corrupt.
    A file the group or others may read is tightened to 0600, with a warning that says whether that worked. A
    file owned by another user is refused: that user can read the key or swap in one of their own, so they would
    be, or choose, this device to the Gateway."""
    path = identity_path(Path(state_dir))
    try:
        fd = os.open(path, _OPEN_READ)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP or os.path.islink(path):
            raise DeviceIdentityError(
                f"device identity {path}: is a symbolic link; owc keeps its key in a regular file"
            ) from None
        raise DeviceIdentityError(f"device identity {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DeviceIdentityError(f"device identity {path}: not a regular file")
        if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
            raise DeviceIdentityError(
                f"device identity {path} belongs to another user (uid {info.st_uid}), who could read or replace "
                f"the key: chown it to the user owc runs as (uid {os.geteuid()}), or use another device folder"
            )
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            try:
                os.fchmod(fd, 0o600)
            except OSError as exc:
                log.warning(
                    "device identity %s is readable by others (mode %04o) and owc could not set it to 0600 (%s):"
                    " chmod 600 %s",
                    path,
                    mode,
                    exc.strerror or type(exc).__name__,
                    path,
                )
            else:
                log.warning("device identity %s was readable by others (mode %04o): set to 0600", path, mode)
        try:
            raw = fh.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise DeviceIdentityError(f"device identity {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise DeviceIdentityError(f"device identity {path}: larger than {MAX_FILE_BYTES} bytes, not one")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise DeviceIdentityError(
            f"device identity {path}: corrupt (not JSON); move it away to start a new identity (the Gateway must "
            "then pair the new device), or restore it from an export"
        ) from None
    return _from_record(data, f"device identity {path}")


def load_or_create(state_dir: Path) -> DeviceIdentity:
    """The stored identity, or a new one stored now (folder 0700, file 0600). Never silently replaces a corrupt
    file: that would orphan the pairing, so it raises ``DeviceIdentityError`` instead."""
    state_dir = Path(state_dir)
    existing = load(state_dir)
    if existing is not None:
        _ensure_dir(state_dir)
        _sweep_stale_temps(state_dir)
        log.debug("device identity %s loaded from %s", existing.device_id, identity_path(state_dir))
        return existing
    _ensure_dir(state_dir)
    _sweep_stale_temps(state_dir)
    identity = DeviceIdentity.generate()
    if not _create_exclusive(state_dir, identity):
        raced = load(state_dir)
        if raced is None:  # it appeared and vanished again: nothing sane to agree on
            raise DeviceIdentityError(f"device identity {identity_path(state_dir)}: changed while owc created it")
        return raced
    log.info("new device identity %s stored in %s", identity.device_id, identity_path(state_dir))
    return identity


def check_folder(state_dir: Path) -> DeviceIdentity:
    """The identity in ``state_dir`` (made now if there is none), once it is known that owc can also write there
    later: the device token the Gateway issues at pairing is stored in the same folder, possibly hours after the
    start. A folder that cannot hold the identity raises ``DeviceIdentityError`` naming the folder: found at
    start, it is one line for the person who can fix it, instead of a failure at every connect."""
    state_dir = Path(state_dir)
    identity = load_or_create(state_dir)
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{FILE_NAME}.", suffix=".probe", dir=state_dir)
    except OSError as exc:
        raise DeviceIdentityError(
            f"device state folder {state_dir}: cannot write in it: {exc.strerror or exc}"
        ) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return identity


def set_device_token(state_dir: Path, token: str | None) -> DeviceIdentity:
    """Store the device token the Gateway issued (``hello-ok.auth.deviceToken``), or forget it (``None``, e.g. after
    the Gateway revoked it); returns the updated identity. One owc process owns a state folder."""
    if token is not None and (not isinstance(token, str) or not token):
        raise ValueError("a device token is a non-empty string (None forgets it)")
    state_dir = Path(state_dir)
    current = load(state_dir)
    if current is None:
        raise DeviceIdentityError(f"device identity {identity_path(state_dir)}: none stored yet")
    updated = current.with_device_token(token)
    save(state_dir, updated)
    log.info("device token %s for device %s", "stored" if token is not None else "forgotten", updated.device_id)
    return updated


def export_identity(state_dir: Path) -> str:
    """The stored identity as one line of text, for a rebuilt container's ``import_identity``.

    By design the text holds the private key and the device token: whoever has it *is* this device to the
    Gateway. Keep it where a password would be kept, and never log it."""
    identity = load(Path(state_dir))
    if identity is None:
        raise DeviceIdentityError(f"device identity {identity_path(Path(state_dir))}: none stored, nothing to export")
    return json.dumps(_record(identity), separators=(",", ":"))


def import_identity(state_dir: Path, text: str, *, replace: bool = False) -> DeviceIdentity:
    """Store the identity ``export_identity`` gave. A different identity already in ``state_dir`` is kept (its
    device may be the paired one) unless ``replace`` is true; the same one is rewritten (its token updated)."""
    try:
        data = json.loads(text.strip())
    except (AttributeError, ValueError):
        raise DeviceIdentityError("imported device identity: not an owc export (not JSON)") from None
    identity = _from_record(data, "imported device identity")
    state_dir = Path(state_dir)
    existing = load(state_dir)
    if existing is not None and existing.device_id != identity.device_id and not replace:
        raise DeviceIdentityError(
            f"device identity {identity_path(state_dir)}: holds another device ({existing.device_id}); "
            "pass replace to overwrite it"
        )
    save(state_dir, identity)
    log.info("device identity %s imported into %s", identity.device_id, identity_path(state_dir))
    return identity

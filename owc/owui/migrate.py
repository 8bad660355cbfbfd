"""``owc owui migrate`` / ``rollback`` / ``status`` (issue 30): from the old asyncio Pipe to owc, and back.

The old system (``shared/reference/old-system/inventory.md``) is three Functions its installers wrote: the Pipe
``openclaw_gateway`` (valves: section 2), the status Action ``openclaw_status_action`` (five valves mirrored from
the Pipe, G3) and the thinking Filter ``openclaw_thinking`` (never global, G4). Years of chats carry the Pipe's model
ids (``openclaw_gateway.<preset or provider/model>``), and Open WebUI routes a chat by the part before the first dot
(its Function id), so **owc's Pipe goes into the Function ``openclaw_gateway`` itself**, updated in place: every old
chat keeps its model id, and owc under that id lists and reads the old ids (``owc.owui.models.resolve``, issue 28).

The other Functions, decided:

* the **Filter**: owc's thinking Filter has the old one's id, so it replaces it in place (the rows that list it in
  ``meta.filterIds`` keep it);
* the **Action**: owc's is ``openclaw_status``, installed as ``owc owui install`` installs it (active, never global,
  attached to the Pipe's models through ``meta.actionIds``); the old ``openclaw_status_action`` is only
  **deactivated**. Updating it in place would keep its global flag (the old installer made it global: owc's
  button would show under every model of every person) and owc's panel under a second id;
* owc's startup Event ``openclaw_startup`` is created (it starts owc when Open WebUI starts, reading the Pipe's
  valves from ``openclaw_gateway`` once that holds owc's code: ``owc.owui.pipe.pipe_valves``).

**Valves** (the old table, section 2, to owc's): ``GATEWAY_URL`` as the old Pipe dialled it (it stripped any scheme
and always spoke ``ws://``, default port 18789: ``ws://host:port``, so the same Gateway answers), ``GATEWAY_TOKEN``,
``AGENT_ID``, ``CONFIGURED_MODELS`` -> ``MODEL_WHITELIST``, ``MAX_MODELS``, ``DEFAULT_MODEL``, the four preset
valves; ``DEVICE_DIR`` when the device folder is not owc's default. Valves owc has no use for (the file server,
``OWUI_API_KEY``, auto-title, ...) are not written again: named in the report, kept in the backup.

**The device identity**: the old Pipe's Ed25519 key (``STATE_DIR/identity.json`` first, then the
``DEVICE_IDENTITY`` valve: its own load order, A3; JSON ``{id, publicKey, privateKey}`` with the private key as
PKCS8 PEM, A2) is the same kind of key owc keeps (``owc/device.py``: the raw 32-byte seed), and both derive the
device id the same way (SHA-256 hex of the raw public key), so owc connects as the very device the Gateway paired:
no new pairing. The old device token (``STATE_DIR/device-token.json`` ``{deviceToken, deviceId}``, A4) comes along
when it is this device's. The file is written where owc inside Open WebUI reads it, so the migration runs where
that folder is (inside Open WebUI's container: ``$DATA_DIR/owc``, owc's default there), or ``--device-dir`` names it.

**Backup** (the old installer's habit, G1): each Function the migration touches, as it was (code, name, meta, the
active and global flags, valves) or "absent", and each model row it attaches to, in a new folder (0700) of
``--backup-dir``, files 0600 (they hold the token and maybe the key). ``rollback`` puts exactly that back: owc's
Functions that were absent are deleted, the old ones get their code, valves and flags again, model rows their
settings. Chats need nothing (seed 000 section 6: what owc wrote are plain assistant messages the old code reads).

Blocking HTTP through ``owc.owui.install.Api`` (no redirect followed); never a token or a key in a line printed.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from owc import device
from owc.owui import install as inst
from owc.owui.install import Api, InstallError
from owc.owui.models import OLD_FUNCTION_ID
from owc.owui.pipe import EVENT_ID, OWC_PIPE_MARK, PIPE_ID
from owc.owui.status_action import ACTION_ID
from owc.owui.thinking_filter import FILTER_ID

OLD_PIPE_ID = OLD_FUNCTION_ID
OLD_ACTION_ID = "openclaw_status_action"
OLD_FILTER_ID = "openclaw_thinking"
#: Every Function the migration may change or create, in the order rollback restores them.
TOUCHED = (OLD_PIPE_ID, OLD_ACTION_ID, OLD_FILTER_ID, EVENT_ID, ACTION_ID)
#: The old Pipe's defaults (inventory, section 2) where the saved valves hold nothing.
OLD_DEFAULT_URL = "localhost:18789"
OLD_DEFAULT_PORT = 18789
OLD_DEFAULT_STATE_DIR = "/data/openclaw-bridge"
#: Old valve -> owc's valve, carried as they are.
CARRIED = (
    ("GATEWAY_TOKEN", "GATEWAY_TOKEN"),
    ("AGENT_ID", "AGENT_ID"),
    ("CONFIGURED_MODELS", "MODEL_WHITELIST"),
    ("MAX_MODELS", "MAX_MODELS"),
    ("DEFAULT_MODEL", "DEFAULT_MODEL"),
    ("CHATGPT_MODEL", "CHATGPT_MODEL"),
    ("OPUS_MODEL", "OPUS_MODEL"),
    ("SONNET_MODEL", "SONNET_MODEL"),
    ("GLM_MODEL", "GLM_MODEL"),
)
#: Old valves read by the migration itself (the URL, converted; the identity and its folder, moved to owc's).
CONSUMED = ("GATEWAY_URL", "DEVICE_IDENTITY", "STATE_DIR")
BACKUP_PREFIX = "migrate-"
MANIFEST = "manifest.json"
FORMAT = "owc-owui-migrate-backup"


class MigrateError(InstallError):
    """The migration, rollback or status cannot go on; one line, naming what to do."""


# ------------------------------------------------------------------------------------------------ the valves


def old_gateway_url(value: Any) -> str:
    """The address the old Pipe dialled for its ``GATEWAY_URL`` (``_parse_gateway_url``, inventory A6): any scheme
    (``ws``, ``wss``, ``http``, ``https``) stripped, path and query dropped, a bracketed IPv6 kept, port 18789 when
    none, always plain ``ws://``. As owc's ``ws://host:port``, the same Gateway."""
    text = str(value or "").strip() or OLD_DEFAULT_URL
    rest = re.sub(r"^(?:wss?|https?)://", "", text, flags=re.IGNORECASE)
    rest = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "@" in rest:
        raise MigrateError("the old Pipe's GATEWAY_URL holds a credential: set owc's GATEWAY_URL valve by hand")
    if rest.startswith("["):
        host, _, tail = rest.partition("]")
        host += "]"
        port_text = tail[1:] if tail.startswith(":") else ""
    elif rest.count(":") == 1:
        host, _, port_text = rest.partition(":")
    else:
        host, port_text = rest, ""
    if not host or host == "[]":
        raise MigrateError(f"the old Pipe's GATEWAY_URL has no host ({text!r}): set owc's GATEWAY_URL valve by hand")
    try:
        port = int(port_text) if port_text else OLD_DEFAULT_PORT
    except ValueError:
        raise MigrateError(f"the old Pipe's GATEWAY_URL has a bad port ({text!r})") from None
    if not 1 <= port <= 65535:
        raise MigrateError(f"the old Pipe's GATEWAY_URL has a port out of range ({text!r})")
    return f"ws://{host}:{port}"


def map_valves(old: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """owc's Pipe valves from the old Pipe's, and the old valves not carried (names only). Empty old values are
    not written: owc's own defaults stand (the old defaults are the same for the presets and ``MAX_MODELS``)."""
    new: dict[str, Any] = {"GATEWAY_URL": old_gateway_url(old.get("GATEWAY_URL"))}
    for old_name, new_name in CARRIED:
        value = old.get(old_name)
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        new[new_name] = value.strip() if isinstance(value, str) else value
    used = {name for name, _ in CARRIED} | set(CONSUMED)
    dropped = tuple(sorted(k for k, v in old.items() if k not in used and v not in (None, "")))
    return new, dropped


# ------------------------------------------------------------------------------------------------ the identity


def identity_from_old(text: str, where: str) -> device.DeviceIdentity:
    """owc's identity of the old Pipe's identity JSON (``{id, publicKey, privateKey}``; the private key PKCS8 PEM).

    Read as the old ``_parse_device_identity`` read it: a PEM pasted with raw newlines inside the JSON string is
    accepted (``strict=False``). The id and public key it states must be the key's own (SHA-256 hex of the raw
    public key; base64url without padding): else it is not one identity and nothing is converted. Errors name
    ``where`` only, never a value."""
    try:
        data = json.loads(text, strict=False)
    except (TypeError, ValueError):
        raise MigrateError(f"{where}: not JSON, so not the old Pipe's device identity") from None
    pem = data.get("privateKey") or data.get("privateKeyPem") if isinstance(data, dict) else None
    if not isinstance(pem, str) or "PRIVATE KEY" not in pem:
        raise MigrateError(f"{where}: no privateKey (PKCS8 PEM) in it")
    try:
        key = serialization.load_pem_private_key(pem.strip().encode(), password=None)
    except (TypeError, ValueError):
        raise MigrateError(f"{where}: its privateKey is not a readable PEM key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise MigrateError(f"{where}: its privateKey is not an Ed25519 key")
    seed = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    identity = device.DeviceIdentity.from_seed(seed)
    stated = data.get("id") or data.get("deviceId")
    if stated is not None and stated != identity.device_id:
        raise MigrateError(f"{where}: its id is not its key's (edited or damaged): nothing converted")
    public = data.get("publicKey")
    if isinstance(public, str) and public.rstrip("=").replace("+", "-").replace("/", "_") != identity.public_key_b64:
        raise MigrateError(f"{where}: its publicKey is not its key's (edited or damaged): nothing converted")
    return identity


@attrs.frozen(repr=False)
class OldIdentity:
    """The old Pipe's device, found: its identity (with the device token when it was stored) and where from."""

    identity: device.DeviceIdentity
    source: str


def _read_small(path: Path) -> str | None:
    """A small file's text, or None when it is not there or not readable here (another host's folder)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read(device.MAX_FILE_BYTES)
    except OSError:
        return None


def find_old_identity(
    valves: Mapping[str, Any], state_dir: Path | None, notes: Callable[[str], None]
) -> OldIdentity | None:
    """The old Pipe's identity, in its own load order (inventory A3): ``STATE_DIR/identity.json``, then the
    ``DEVICE_IDENTITY`` valve. ``state_dir``: where that folder is readable here (default: the valve's path).
    The device token (``STATE_DIR/device-token.json``) is taken when its ``deviceId`` is this identity's."""
    folder = state_dir or Path(str(valves.get("STATE_DIR") or "").strip() or OLD_DEFAULT_STATE_DIR)
    found: OldIdentity | None = None
    text = _read_small(folder / "identity.json")
    if text is not None:
        found = OldIdentity(identity_from_old(text, f"{folder / 'identity.json'}"), f"{folder / 'identity.json'}")
    else:
        notes(f"old state folder {folder}: no identity.json readable here")
        valve = str(valves.get("DEVICE_IDENTITY") or "").strip()
        if valve:
            found = OldIdentity(identity_from_old(valve, "the DEVICE_IDENTITY valve"), "the DEVICE_IDENTITY valve")
    if found is None:
        return None
    token_text = _read_small(folder / "device-token.json")
    if token_text is not None:
        try:
            stored = json.loads(token_text)
        except ValueError:
            stored = None
        token = stored.get("deviceToken") if isinstance(stored, dict) else None
        if isinstance(token, str) and token and stored.get("deviceId") in (None, found.identity.device_id):
            found = OldIdentity(found.identity.with_device_token(token), found.source + " (and its device token)")
    return found


# ------------------------------------------------------------------------------------------------ the backup


def _write_private(path: Path, value: Any) -> None:
    """``value`` as JSON in ``path``, mode 0600 from the start (a temporary file renamed: never readable by others,
    never half written)."""
    fd, name = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(value, fh, indent=1, sort_keys=True)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MigrateError(f"backup {path}: {exc.strerror or exc}") from None
    except ValueError:
        raise MigrateError(f"backup {path}: not JSON (damaged)") from None


def function_record(api: Api, function_id: str) -> dict[str, Any] | None:
    """A Function as the backup keeps it, or None when Open WebUI has none of that id."""
    row = api.call("GET", f"/api/v1/functions/id/{function_id}", missing_ok=True)
    if not isinstance(row, Mapping):
        return None
    valves = api.call("GET", f"/api/v1/functions/id/{function_id}/valves", missing_ok=True)
    return {
        "id": function_id,
        "name": row.get("name"),
        "type": row.get("type"),
        "content": row.get("content"),
        "meta": row.get("meta") or {},
        "is_active": bool(row.get("is_active")),
        "is_global": bool(row.get("is_global")),
        "valves": valves if isinstance(valves, Mapping) else None,
    }


def model_row(api: Api, model_id: str) -> dict[str, Any] | None:
    """A model's row (Admin > Models), or None for a model with none."""
    query = urllib.parse.urlencode({"id": model_id})
    row = api.call("GET", f"/api/v1/models/model?{query}", missing_ok=True)
    if not isinstance(row, Mapping):
        return None
    return {
        "id": model_id,
        "base_model_id": row.get("base_model_id"),
        "name": row.get("name"),
        "meta": row.get("meta") or {},
        "params": row.get("params") or {},
        "is_active": row.get("is_active", True),
    }


@attrs.define
class Backup:
    """One migration's backup folder: ``manifest.json`` (what was there), ``<id>.json`` (a Function: code, name,
    meta, flags) and ``<id>-valves.json`` (its valves) as the old installer named its backups, ``models.json``."""

    folder: Path
    functions: dict[str, dict[str, Any] | None] = attrs.Factory(dict)
    models: dict[str, dict[str, Any] | None] = attrs.Factory(dict)

    @classmethod
    def new(cls, root: Path) -> Backup:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        try:
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
            folder = Path(tempfile.mkdtemp(prefix=f"{BACKUP_PREFIX}{stamp}-", dir=root))  # mode 0700, unique
        except OSError as exc:
            raise MigrateError(f"backup folder {root}: {exc.strerror or exc}") from None
        return cls(folder)

    def save(self) -> None:
        try:
            for fid, record in self.functions.items():
                if record is not None:
                    _write_private(self.folder / f"{fid}.json", {k: v for k, v in record.items() if k != "valves"})
                    _write_private(self.folder / f"{fid}-valves.json", record["valves"])
            _write_private(self.folder / "models.json", self.models)
            manifest = {
                "format": FORMAT,
                "version": 1,
                "functions": {fid: record is not None for fid, record in self.functions.items()},
                "models": sorted(self.models),
            }
            _write_private(self.folder / MANIFEST, manifest)  # last: a folder without it is not a backup
        except OSError as exc:
            raise MigrateError(f"backup folder {self.folder}: {exc.strerror or exc}") from None

    @classmethod
    def load(cls, folder: Path) -> Backup:
        manifest = _read_json(folder / MANIFEST)
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise MigrateError(f"backup {folder}: not a backup of owc owui migrate")
        functions: dict[str, dict[str, Any] | None] = {}
        for fid, present in (manifest.get("functions") or {}).items():
            if not present:
                functions[fid] = None
                continue
            record = _read_json(folder / f"{fid}.json")
            record["valves"] = _read_json(folder / f"{fid}-valves.json")
            functions[fid] = record
        models = _read_json(folder / "models.json")
        return cls(folder, functions, models if isinstance(models, dict) else {})


def latest_backup(root: Path) -> Path:
    """The newest complete backup folder in ``root`` (its name starts with the UTC time)."""
    try:
        found = sorted(p for p in root.glob(f"{BACKUP_PREFIX}*") if (p / MANIFEST).is_file())
    except OSError as exc:
        raise MigrateError(f"backup folder {root}: {exc.strerror or exc}") from None
    if not found:
        raise MigrateError(f"no migration backup in {root}: pass --backup-dir (the folder migrate named)")
    return found[-1]


def default_backup_root() -> Path:
    """Beside owc's state: ``$DATA_DIR/owc/owui-backups`` inside Open WebUI's container, else
    ``~/.local/state/owc/owui-backups`` (``owc.device.default_state_dir``)."""
    hosted = bool(os.environ.get("DATA_DIR", "").strip())
    return device.default_state_dir(hosted, None) / "owui-backups"


def default_device_dir() -> Path | None:
    """owc's device folder inside Open WebUI (``$DATA_DIR/owc``) when this runs in its environment; else None."""
    if not os.environ.get("DATA_DIR", "").strip():
        return None
    return device.default_state_dir(True, None)


# ------------------------------------------------------------------------------------------------ migrate


def is_owc_pipe(record: Mapping[str, Any] | None) -> bool:
    return record is not None and OWC_PIPE_MARK in str(record.get("content") or "")


@attrs.frozen
class Outcome:
    """What a migration did: ``changed`` False for a dry run or an already migrated Open WebUI."""

    changed: bool
    backup: Path | None = None
    smoke_ok: bool | None = None


def migrate(
    api: Api,
    *,
    backup_root: Path,
    device_dir: Path | None,
    device_dir_valve: bool = False,
    old_state_dir: Path | None = None,
    replace_device: bool = False,
    dry_run: bool = False,
    smoke_wait_s: float = inst.SMOKE_WAIT_S,
    report: Callable[[str], None] = print,
) -> Outcome:
    """See the module doc. Every step is one line; a dry run reads everything and writes nothing."""
    would = "would " if dry_run else ""
    before = {fid: function_record(api, fid) for fid in TOUCHED}
    old_pipe = before[OLD_PIPE_ID]
    if old_pipe is None:
        raise MigrateError(f"no Function {OLD_PIPE_ID} in this Open WebUI: there is no old Pipe to migrate")
    if is_owc_pipe(old_pipe):
        report(f"{OLD_PIPE_ID} already runs owc: nothing to migrate (owc owui rollback undoes the migration)")
        return Outcome(changed=False)
    found = ", ".join(
        f"{fid} ({'active' if r['is_active'] else 'inactive'}{', global' if r['is_global'] else ''})"
        for fid in (OLD_PIPE_ID, OLD_ACTION_ID, OLD_FILTER_ID)
        if (r := before[fid]) is not None
    )
    report(f"found the old Functions: {found}")
    if function_record(api, PIPE_ID) is not None:
        report(
            f"warning: owc's own Pipe {PIPE_ID} is installed too; it keeps its valves (set both alike, or remove one)"
        )
    old_valves = old_pipe["valves"] or {}
    valves, dropped = map_valves(old_valves)
    carried = sorted(k for k in valves)
    # The device: read before anything is written, so a bad identity stops the migration with nothing changed.
    old = find_old_identity(old_valves, old_state_dir, report)
    if old is not None:
        if device_dir is None:
            raise MigrateError(
                "owc's device folder inside Open WebUI is unknown here: run migrate in Open WebUI's environment"
                " (DATA_DIR set) or pass --device-dir (Open WebUI's DATA_DIR/owc, as the Open WebUI process sees it)"
            )
        try:
            existing = device.load(device_dir)
        except device.DeviceIdentityError as exc:
            raise MigrateError(str(exc)) from None
        if existing is not None and existing.device_id != old.identity.device_id and not replace_device:
            raise MigrateError(
                f"{device.identity_path(device_dir)} holds another device ({existing.device_id}): pass"
                " --replace-device to put the old Pipe's there (the other one's pairing is then unused)"
            )
        report(
            f"{would}convert the old Pipe's device {old.identity.device_id} from {old.source} into"
            f" {device.identity_path(device_dir)} (the same Ed25519 key: the Gateway's pairing carries over)"
        )
        if device_dir_valve:
            valves["DEVICE_DIR"] = str(device_dir)
    else:
        report("no old device identity found: owc makes its own, which the Gateway pairs once")
    report(f"{would}carry the valves over: {', '.join(carried)} (GATEWAY_URL as the old Pipe dialled it)")
    if dropped:
        report(f"not carried (owc has no such setting; kept in the backup): {', '.join(dropped)}")
    report(f"{would}put owc's Pipe into {OLD_PIPE_ID} in place (its id, so every old chat's model id, stays)")
    report(f"{would}put owc's thinking Filter into {FILTER_ID} in place; add {EVENT_ID} and {ACTION_ID}")
    action = before[OLD_ACTION_ID]
    if action is not None and action["is_active"]:
        report(f"{would}deactivate the old status Action {OLD_ACTION_ID} (owc's {ACTION_ID} takes its place)")
    if dry_run:
        report(f"dry run: nothing changed (a backup would go to a new folder in {backup_root})")
        return Outcome(changed=False)

    backup = Backup.new(backup_root)
    backup.functions = before
    backup.save()
    report(f"backed up {sum(1 for r in before.values() if r is not None)} Functions to {backup.folder} (mode 0600)")
    if old is not None and device_dir is not None:
        try:
            device.save(device_dir, old.identity)
        except device.DeviceIdentityError as exc:
            raise MigrateError(str(exc)) from None
        report(f"device {old.identity.device_id} written to {device.identity_path(device_dir)}")
    inst.put_functions(api, valves=valves, report=report, pipe_id=OLD_PIPE_ID, replace_valves=True)
    current_action = api.call("GET", f"/api/v1/functions/id/{OLD_ACTION_ID}", missing_ok=True)
    if isinstance(current_action, Mapping) and current_action.get("is_active"):
        api.call("POST", f"/api/v1/functions/id/{OLD_ACTION_ID}/toggle")
        report(f"deactivated the old status Action {OLD_ACTION_ID}")

    def keep_rows(models: Mapping[str, str]) -> None:
        for model_id in models:
            if model_id not in backup.models:
                backup.models[model_id] = model_row(api, model_id)
        backup.save()

    listed = inst.attach_all(api, report=report, pipe_id=OLD_PIPE_ID, before=keep_rows)
    ok = inst.smoke(api, listed, report=report, wait_s=smoke_wait_s)
    report(
        f"migrated: {OLD_PIPE_ID} runs owc, {len(listed)} model(s) listed; backup {backup.folder}"
        f" (owc owui rollback --backup-dir {backup.folder.parent} puts it back)"
    )
    return Outcome(changed=True, backup=backup.folder, smoke_ok=ok)


# ------------------------------------------------------------------------------------------------ rollback


def _restore_function(api: Api, record: Mapping[str, Any], report: Callable[[str], None]) -> None:
    fid = record["id"]
    form = {"id": fid, "name": record["name"], "content": record["content"], "meta": record.get("meta") or {}}
    current = api.call("GET", f"/api/v1/functions/id/{fid}", missing_ok=True)
    if current is None:
        api.call("POST", "/api/v1/functions/create", form)
    else:
        api.call("POST", f"/api/v1/functions/id/{fid}/update", form)
    api.call("POST", f"/api/v1/functions/id/{fid}/valves/update", dict(record.get("valves") or {}))
    current = api.call("GET", f"/api/v1/functions/id/{fid}")
    if bool(current.get("is_active")) != bool(record["is_active"]):
        api.call("POST", f"/api/v1/functions/id/{fid}/toggle")
    if bool(current.get("is_global")) != bool(record["is_global"]):
        api.call("POST", f"/api/v1/functions/id/{fid}/toggle/global")
    flags = ("active" if record["is_active"] else "inactive") + (", global" if record["is_global"] else "")
    report(f"restored {fid}: its code, valves and flags ({flags})")


def rollback(api: Api, *, backup: Path, report: Callable[[str], None] = print) -> None:
    """Put back what ``backup`` holds (see the module doc): owc's Functions that were absent deleted first (the
    startup Event no longer starts owc at Open WebUI's next start), then each old Function's code, valves and flags,
    then the model rows."""
    saved = Backup.load(backup)
    report(f"rolling back from {backup}")
    for fid in TOUCHED:
        if fid in saved.functions and saved.functions[fid] is None:
            if api.call("GET", f"/api/v1/functions/id/{fid}", missing_ok=True) is not None:
                api.call("DELETE", f"/api/v1/functions/id/{fid}/delete")
                report(f"removed {fid} (it was not there before the migration)")
    for fid in TOUCHED:
        record = saved.functions.get(fid)
        if record is not None:
            _restore_function(api, record, report)
    for model_id, row in sorted(saved.models.items()):
        if row is None:
            if model_row(api, model_id) is not None:
                api.call("POST", "/api/v1/models/model/delete", {"id": model_id})
                report(f"removed the row owc made for {model_id}")
        else:
            api.call("POST", "/api/v1/models/model/update", dict(row))
            report(f"restored {model_id}'s settings")
    inst.our_models(api, OLD_PIPE_ID)  # Open WebUI refreshes its model list when it is asked for it
    state = inst.health(api)
    if state is not None and state.get("running"):
        report(
            "note: owc still runs inside this Open WebUI process until Open WebUI restarts (nothing starts it after"
            " that): restart Open WebUI so only the old Pipe delivers agent turns"
        )
    report(f"rolled back: {OLD_PIPE_ID} runs the old Pipe again, as backed up in {backup}")


# ------------------------------------------------------------------------------------------------ status


def status(api: Api, *, report: Callable[[str], None] = print) -> bool:
    """``owc owui status`` (the old installer's ``status``, G1): one line per check, ``ok`` or ``NO``; True when all
    hold. owc's own view (connected, boot id, device, paired) comes from owc inside Open WebUI (``/api/owc/health``),
    said as unknown when it does not answer."""
    results: list[bool] = []

    def check(ok: bool, line: str) -> None:
        results.append(ok)
        report(f"{'ok' if ok else 'NO':<3} {line}")

    pipe_id = PIPE_ID
    pipe = function_record(api, PIPE_ID)
    if not is_owc_pipe(pipe):
        old = function_record(api, OLD_PIPE_ID)
        if is_owc_pipe(old) or pipe is None:
            pipe_id, pipe = OLD_PIPE_ID, old
    for fid, what in (
        (pipe_id, "Pipe"),
        (EVENT_ID, "startup Event"),
        (FILTER_ID, "thinking Filter"),
        (ACTION_ID, "status Action"),
    ):
        record = pipe if fid == pipe_id else function_record(api, fid)
        if record is None:
            check(False, f"{what} {fid}: not installed")
        elif fid == pipe_id and not is_owc_pipe(record):
            check(False, f"{what} {fid}: not owc's (the old Pipe? owc owui migrate)")
        else:
            check(bool(record["is_active"]), f"{what} {fid}: {'active' if record['is_active'] else 'inactive'}")
    models = inst.our_models(api, pipe_id)
    check(
        bool(models),
        f"models: {len(models)} listed under {pipe_id}" + (f" ({next(iter(models))}, ...)" if models else ""),
    )
    valves = (pipe or {}).get("valves") or {}
    url = str(valves.get("GATEWAY_URL") or "").strip()
    token = "GATEWAY_TOKEN" if str(valves.get("GATEWAY_TOKEN") or "").strip() else None
    token = token or ("GATEWAY_TOKEN_FILE" if str(valves.get("GATEWAY_TOKEN_FILE") or "").strip() else None)
    state = inst.health(api)
    connected = bool(state and state.get("connected"))
    from_env = " (not in the valves; owc connected, so Open WebUI's environment has it)"
    check(bool(url) or connected, f"Gateway URL: {url if url else 'not set' + (from_env if connected else '')}")
    check(
        bool(token) or connected,
        f"token: {'set in ' + token if token else 'not set' + (from_env if connected else '')}",
    )
    if state is None:
        check(False, "owc in Open WebUI: not reachable (no answer at /api/owc/health: not running, or not an admin)")
        check(False, "device: unknown (owc in Open WebUI did not answer)")
    elif not state.get("running"):
        check(False, "owc in Open WebUI: not running in the process that answered (see Open WebUI's log)")
        check(False, "device: unknown (owc is not running)")
    else:
        why = state.get("refusal") or state.get("pairing") or "not connected yet"
        check(
            connected,
            f"Gateway {state.get('gateway')}: "
            + (f"reachable, owc connected (boot {state.get('boot_id') or 'unknown'})" if connected else str(why)),
        )
        # Holds once owc is in: paired, or let in without a device (the Gateway's own host); not while it waits.
        check(
            connected and not state.get("pairing"),
            f"device: {state.get('device_id') or 'none'}, paired: {state.get('paired') or 'unknown'}",
        )
    report("status: all checks hold" if all(results) else f"status: {results.count(False)} check(s) do not hold")
    return all(results)

"""owc's device identity (``owc/device.py``): the exact v3 payload and signature, checked by the real Gateway's own
verification code; the file's permissions, atomic writes and corrupt-file errors; export / import; and that the
key and the device token never reach a repr, a summary, an error or a log record."""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import stat
import subprocess
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from owc import device
from owc.device import (
    DeviceIdentity,
    DeviceIdentityError,
    b64url,
    default_state_dir,
    export_identity,
    import_identity,
    load,
    load_or_create,
    normalize_device_metadata,
    public_summary,
    save,
    set_device_token,
    signature_token,
    v3_payload,
)

from conftest import secret

HERE = Path(__file__).resolve().parent

# --- a fixed vector ------------------------------------------------------------------------------------------

SEED = bytes(range(32))
SEED_B64URL = b64url(SEED)
#: A ``connect.challenge`` payload as the Gateway sends it (reference §1.1).
CHALLENGE = {"nonce": "9ec95957-3c1f-4e07-9a52-6a0d8f3b2c11", "ts": 1795975355812}
SHARED_TOKEN = secret("shared-s3cret-token-for-device-tests")
PARAMS = {
    "minProtocol": 4,
    "maxProtocol": 4,
    "client": {"id": "gateway-client", "version": "0.1.0", "platform": "Linux", "mode": "backend"},
    "role": "operator",
    "scopes": ["operator.read", "operator.write"],
    "auth": {"token": SHARED_TOKEN},
}
DEVICE_ID = "56475aa75463474c0285df5dbf2bcab73da651358839e9b77481b2eab107708c"
PUBLIC_KEY = "A6EHv_POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg"
PAYLOAD = (
    f"v3|{DEVICE_ID}|gateway-client|backend|operator|operator.read,operator.write|1795975355812|{SHARED_TOKEN}"
    "|9ec95957-3c1f-4e07-9a52-6a0d8f3b2c11|linux|"
)
SIGNATURE = "j6pzNNQ80MrARx3G1Q1jbKiLI5w4yA3Msom2UslJuc1OfOMyQd2pVE1Z6s2rtKulSL0NVFo8UrI1Vev1oXHbCw"


def _device_of(params: dict, identity: DeviceIdentity | None = None) -> dict:
    identity = identity or DeviceIdentity.from_seed(SEED)
    return identity.sign_connect_params(params, nonce=CHALLENGE["nonce"], signed_at_ms=CHALLENGE["ts"])


def test_v3_payload_vector():
    payload = v3_payload(
        device_id=DEVICE_ID,
        client_id="gateway-client",
        client_mode="backend",
        role="operator",
        scopes=["operator.read", "operator.write"],
        signed_at_ms=CHALLENGE["ts"],
        token=SHARED_TOKEN,
        nonce=CHALLENGE["nonce"],
        platform="Linux",
        device_family=None,
    )
    assert payload == PAYLOAD
    # No token and an absent deviceFamily are empty fields: always 11 of them.
    bare = v3_payload(
        device_id="d",
        client_id="c",
        client_mode="m",
        role="operator",
        scopes=[],
        signed_at_ms=0,
        token=None,
        nonce="n",
        platform=None,
        device_family=None,
    )
    assert bare == "v3|d|c|m|operator||0||n||"


def test_sign_connect_vector():
    identity = DeviceIdentity.from_seed(SEED)
    assert identity.device_id == DEVICE_ID
    assert identity.public_key_b64 == PUBLIC_KEY
    by_args = identity.sign_connect(
        client_id="gateway-client",
        client_mode="backend",
        role="operator",
        scopes=["operator.read", "operator.write"],
        signed_at_ms=CHALLENGE["ts"],
        token=SHARED_TOKEN,
        nonce=CHALLENGE["nonce"],
        platform="Linux",
    )
    expected = {
        "id": DEVICE_ID,
        "publicKey": PUBLIC_KEY,
        "signature": SIGNATURE,
        "signedAt": 1795975355812,
        "nonce": "9ec95957-3c1f-4e07-9a52-6a0d8f3b2c11",
    }
    assert by_args == expected
    assert _device_of(PARAMS) == expected
    assert identity.sign(PAYLOAD) == SIGNATURE
    assert "=" not in SIGNATURE and "=" not in PUBLIC_KEY  # base64url without padding


def test_rfc8032_test_1():
    """An independent check of the key and signature encodings: RFC 8032 §7.1, TEST 1 (empty message)."""
    seed = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
    public = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
    sig = bytes.fromhex(
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065"
        "224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
    )
    identity = DeviceIdentity.from_seed(seed)
    assert identity.public_key_b64 == b64url(public)
    assert identity.device_id == hashlib.sha256(public).hexdigest()
    assert identity.sign("") == b64url(sig)


def test_device_id_is_sha256_of_the_raw_public_key():
    identity = DeviceIdentity.generate()
    raw = identity._key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert len(raw) == 32
    assert identity.device_id == hashlib.sha256(raw).hexdigest()
    assert identity.device_id == identity.device_id.lower() and len(identity.device_id) == 64
    assert identity.public_key_b64 == b64url(raw)


def test_metadata_normalisation_is_the_gateways():
    # JavaScript's trim (U+FEFF goes, U+0085 stays) and only ASCII A-Z lowercased (device-auth-na9vtJo1.mjs:2-7).
    assert normalize_device_metadata("  MacOS\t") == "macos"
    assert normalize_device_metadata("\ufeffiPhone\u3000") == "iphone"
    assert normalize_device_metadata("\x85Linux") == "\x85linux"
    assert normalize_device_metadata("İOS") == "İos"
    assert normalize_device_metadata(None) == ""
    assert normalize_device_metadata("   ") == ""
    assert normalize_device_metadata(7) == ""


def test_signature_token_is_the_servers_choice():
    assert signature_token(None) is None
    assert signature_token({}) is None
    assert signature_token({"deviceToken": "d", "bootstrapToken": "b"}) == "d"
    assert signature_token({"token": "t", "deviceToken": "d"}) == "t"
    assert signature_token({"token": None, "bootstrapToken": "b"}) == "b"
    assert signature_token({"token": "", "deviceToken": "d"}) == ""  # JS ``??`` keeps an empty string


def test_sign_connect_refuses_what_the_gateway_would_not_verify():
    identity = DeviceIdentity.from_seed(SEED)
    good = dict(
        client_id="c", client_mode="m", role="operator", scopes=[], signed_at_ms=1, token=None, nonce="n", platform="p"
    )
    identity.sign_connect(**good)
    with pytest.raises(TypeError):
        identity.sign_connect(**{**good, "scopes": "operator.read"})
    for bad in (1.5, True, "1"):
        with pytest.raises(TypeError):
            identity.sign_connect(**{**good, "signed_at_ms": bad})
    for bad in ("", " n"):
        with pytest.raises(ValueError):
            identity.sign_connect(**{**good, "nonce": bad})
    with pytest.raises(ValueError):
        DeviceIdentity.from_seed(b"short")


# --- the real Gateway verifies it ----------------------------------------------------------------------------


def _real_gateway_dist(request) -> tuple[Path, Path]:
    """Node 24 and openclaw's ``dist`` from the real-Gateway cache; skipped when the cache is absent (in CI the
    ``real_gateway_install`` fixture installs it, or fails)."""
    from realgw.gateway import NODE, OPENCLAW, cache_dir

    cache = cache_dir()
    node = NODE.root(cache / NODE.folder) / "bin" / "node"
    dist = OPENCLAW.root(cache / OPENCLAW.folder) / "dist"
    if node.is_file() and dist.is_dir():
        return node, dist
    if not os.environ.get("CI"):
        pytest.skip(
            f"the real Gateway is not installed in {cache} (Node 24 + openclaw; any realgateway test installs "
            "them): cannot check the signature with the Gateway's own code"
        )
    install = request.getfixturevalue("real_gateway_install")
    return install.node_bin / "node", install.openclaw_mjs.parent / "dist"


def _gateway_checks(request, cases: list[dict]) -> list[dict]:
    node, dist = _real_gateway_dist(request)
    out = subprocess.run(
        [str(node), str(HERE / "realgw" / "verify_device.mjs"), str(dist)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def test_the_real_gateway_verifies_the_signature(request):
    other = DeviceIdentity.generate()
    variants = [
        PARAMS,
        # deviceFamily present, platform needing the Gateway's normalisation, role and scopes omitted, no auth
        {
            "client": {"id": "cli", "version": "1", "platform": " MacOS\t", "deviceFamily": " iPhone ", "mode": "cli"},
        },
        # the device token is the signed token when no shared token is sent
        {
            "client": {"id": "gateway-client", "version": "1", "platform": "linux", "mode": "backend"},
            "role": "operator",
            "scopes": ["operator.write", "operator.admin", "operator.read"],  # signed in the order sent
            "auth": {"deviceToken": secret("device-t0ken-for-the-vector-0123")},
        },
    ]
    cases = []
    for params in variants:
        signed = {**params, "device": _device_of(params)}
        cases.append({"connectParams": signed, "nonce": CHALLENGE["nonce"], "seedB64url": SEED_B64URL})
    # A generated key too (no seed: the Gateway cannot re-sign, it only verifies).
    cases.append({"connectParams": {**PARAMS, "device": _device_of(PARAMS, other)}, "nonce": CHALLENGE["nonce"]})
    # Negative controls: the check is not vacuous. Params changed after signing, and a foreign key's signature.
    tampered = {**PARAMS, "scopes": ["operator.read"], "device": _device_of(PARAMS)}
    foreign = {**PARAMS, "device": {**_device_of(PARAMS), "signature": _device_of(PARAMS, other)["signature"]}}
    cases += [{"connectParams": p, "nonce": CHALLENGE["nonce"]} for p in (tampered, foreign)]

    results = _gateway_checks(request, cases)
    for case, result in zip(cases[:-2], results[:-2]):
        dev = case["connectParams"]["device"]
        assert result["payloadVersion"] == "v3", result
        assert result["idMatches"] and result["derivedId"] == dev["id"]
        assert result["nonceMatches"] and result["signedAtIsNumber"]
        assert result["normalizedPublicKey"] == dev["publicKey"]  # already in the Gateway's canonical form
        params = case["connectParams"]
        ours = v3_payload(
            device_id=dev["id"],
            client_id=params["client"]["id"],
            client_mode=params["client"]["mode"],
            role=params.get("role", "operator"),
            scopes=params.get("scopes", []),
            signed_at_ms=dev["signedAt"],
            token=signature_token(params.get("auth")),
            nonce=dev["nonce"],
            platform=params["client"].get("platform"),
            device_family=params["client"].get("deviceFamily"),
        )
        assert result["v3Payload"] == ours
        if "seedB64url" in case:
            assert result["gatewaySignature"] == dev["signature"]  # Ed25519 is deterministic: the same bytes
    assert results[0]["v3Payload"] == PAYLOAD
    assert results[1]["v3Payload"].endswith("|macos|iphone")
    assert [r["payloadVersion"] for r in results[-2:]] == [None, None]


# --- storage -------------------------------------------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name != device.FILE_NAME)


def test_load_or_create_makes_a_private_folder_and_file(tmp_path):
    state = tmp_path / "data" / "owc"
    first = load_or_create(state)
    path = state / "device.json"
    assert _mode(state) == 0o700
    assert _mode(path) == 0o600
    assert _leftovers(state) == []
    again = load_or_create(state)
    assert again == first and again.public_key_b64 == first.public_key_b64
    assert again.device_token is None
    stored = json.loads(path.read_text())
    assert stored["device_id"] == first.device_id and stored["public_key"] == first.public_key_b64
    assert DeviceIdentity.from_seed(device.b64url_decode(stored["ed25519_seed"])) == first


def test_an_existing_wide_folder_and_file_are_tightened(tmp_path, caplog):
    state = tmp_path / "owc"
    load_or_create(state)
    os.chmod(state, 0o755)
    os.chmod(state / "device.json", 0o644)
    with caplog.at_level(logging.WARNING, logger="owc"):
        load_or_create(state)
    assert _mode(state) == 0o700 and _mode(state / "device.json") == 0o600
    assert any("readable by others" in r.getMessage() for r in caplog.records)


def test_a_failed_chmod_is_logged_as_it_is(tmp_path, caplog, monkeypatch):
    """Issue 24 item 13: a chmod that failed was logged as "set to 0600". The line says the truth and the fix; the
    key is still used (as a token file readable by others is, with its warning)."""
    state = tmp_path / "owc"
    first = load_or_create(state)
    os.chmod(state / "device.json", 0o640)

    def refuse(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "fchmod", refuse)
    monkeypatch.setattr(os, "chmod", refuse)
    with caplog.at_level(logging.WARNING, logger="owc"):
        assert load(state) == first
    [line] = [r.getMessage() for r in caplog.records if "readable by others" in r.getMessage()]
    assert "could not set it to 0600 (Operation not permitted)" in line and f"chmod 600 {state / 'device.json'}" in line
    assert "set to 0600" not in line.replace("could not set it to 0600", "")
    assert _mode(state / "device.json") == 0o640


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX owners")
def test_a_key_file_owned_by_another_user_is_refused(tmp_path):
    """Issue 24 item 13: a key file owned by another user was used silently; that user can read the key or swap
    in one of their own. Refused with one line naming the fix; the file is left as it is."""
    state = tmp_path / "owc"
    load_or_create(state)
    path = state / "device.json"
    other = os.geteuid() + 4242
    try:
        os.chown(path, other, -1)
    except PermissionError:
        pytest.skip("cannot give a file to another user here (needs root)")
    before = path.read_bytes()
    for call in (load, load_or_create, export_identity):
        with pytest.raises(DeviceIdentityError) as info:
            call(state)
        message = str(info.value)
        assert f"belongs to another user (uid {other})" in message and "chown" in message and "\n" not in message
    assert path.read_bytes() == before and os.stat(path).st_uid == other


def test_device_token_is_stored_and_forgotten(tmp_path):
    state = tmp_path / "owc"
    created = load_or_create(state)
    token = secret("issued-device-token-abcdef0123456789")
    updated = set_device_token(state, token)
    assert updated.device_token == token and updated.device_id == created.device_id
    assert load_or_create(state).device_token == token
    assert _mode(state / "device.json") == 0o600 and _leftovers(state) == []
    assert set_device_token(state, None).device_token is None
    assert load(state).device_token is None
    with pytest.raises(ValueError):
        set_device_token(state, "")
    with pytest.raises(DeviceIdentityError, match="none stored"):
        set_device_token(tmp_path / "empty", token)


def test_a_crash_mid_write_leaves_the_old_file(tmp_path, monkeypatch):
    state = tmp_path / "owc"
    load_or_create(state)
    before = (state / "device.json").read_bytes()

    def crash(src, dst):
        raise OSError(errno.EIO, "simulated crash")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(DeviceIdentityError, match="cannot write"):
        set_device_token(state, secret("never-stored-token-0123456789"))
    monkeypatch.undo()
    assert (state / "device.json").read_bytes() == before
    assert _leftovers(state) == []  # the temporary file went too
    assert load(state).device_token is None


def test_a_crash_by_interrupt_leaves_no_temporary_file(tmp_path, monkeypatch):
    state = tmp_path / "owc"
    identity = load_or_create(state)

    def interrupt(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupt)
    with pytest.raises(KeyboardInterrupt):
        save(state, identity.with_device_token(secret("interrupted-token-0123456789")))
    monkeypatch.undo()
    assert _leftovers(state) == [] and load(state).device_token is None


def test_creation_never_replaces_a_racing_writers_identity(tmp_path, monkeypatch):
    """Two processes creating at once agree on one key: the second sees the first's file and loads it."""
    state = tmp_path / "owc"
    winner = DeviceIdentity.generate()
    real_link = os.link

    def racing_link(src, dst):
        save(state, winner)  # the other process got there first
        return real_link(src, dst)

    monkeypatch.setattr(os, "link", racing_link)
    assert load_or_create(state) == winner
    monkeypatch.undo()
    assert load(state) == winner and _leftovers(state) == []


def test_creation_without_hard_links(tmp_path, monkeypatch):
    def no_links(src, dst):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    state = tmp_path / "owc"
    created = load_or_create(state)
    monkeypatch.undo()
    assert load(state) == created and _mode(state / "device.json") == 0o600 and _leftovers(state) == []


def test_a_stale_temporary_file_is_swept(tmp_path):
    state = tmp_path / "owc"
    load_or_create(state)
    stale, young = state / ".device.json.old1.tmp", state / ".device.json.new1.tmp"
    for p in (stale, young):
        p.write_text("{}")
    old = time.time() - device.STALE_TEMP_S - 10
    os.utime(stale, (old, old))
    load_or_create(state)
    assert _leftovers(state) == [young.name]


@pytest.mark.parametrize(
    "content",
    [
        b"THE-SECRET-CONTENT{not json",
        b'{"format": "owc-device-identity", "version": 1, "ed25519_seed": "THE-SECRET-CONTENT"}',
        b"\xff\xfe THE-SECRET-CONTENT",
        b"",
        b"[]",
    ],
)
def test_a_corrupt_file_is_named_never_quoted_and_never_replaced(tmp_path, content):
    state = tmp_path / "owc"
    state.mkdir(mode=0o700)
    path = state / "device.json"
    path.write_bytes(content)
    os.chmod(path, 0o600)
    with pytest.raises(DeviceIdentityError) as info:
        load_or_create(state)
    message = str(info.value)
    assert str(path) in message
    assert "SECRET" not in message
    assert info.value.__cause__ is None  # no chained decoder error that could quote the content
    assert info.value.__context__ is None or info.value.__suppress_context__
    assert path.read_bytes() == content  # a new key would orphan the pairing: never replaced silently


def test_a_file_whose_id_does_not_match_its_key(tmp_path):
    state = tmp_path / "owc"
    load_or_create(state)
    path = state / "device.json"
    record = json.loads(path.read_text())
    record["device_id"] = "0" * 64
    path.write_text(json.dumps(record))
    with pytest.raises(DeviceIdentityError, match="does not belong to its key"):
        load(state)
    record["device_id"], record["version"] = DeviceIdentity.generate().device_id, 99
    path.write_text(json.dumps(record))
    with pytest.raises(DeviceIdentityError, match="unsupported version"):
        load(state)


def test_a_symbolic_link_is_refused(tmp_path):
    state = tmp_path / "owc"
    elsewhere = tmp_path / "elsewhere"
    load_or_create(elsewhere)
    state.mkdir(mode=0o700)
    (state / "device.json").symlink_to(elsewhere / "device.json")
    with pytest.raises(DeviceIdentityError, match="symbolic link"):
        load_or_create(state)


def test_export_import_round_trip(tmp_path):
    old, new = tmp_path / "old" / "owc", tmp_path / "rebuilt" / "owc"
    created = load_or_create(old)
    token = secret("exported-device-token-0123456789")
    set_device_token(old, token)
    text = export_identity(old)
    assert "\n" not in text
    assert b64url(device._seed_bytes(created._key)) in text  # by design: the export is the secret
    imported = import_identity(new, "  " + text + "\n")
    assert imported.device_id == created.device_id and imported.device_token == token
    assert load_or_create(new) == imported
    assert _mode(new) == 0o700 and _mode(new / "device.json") == 0o600


def test_import_keeps_another_identity_unless_told(tmp_path):
    source, target = tmp_path / "a", tmp_path / "b"
    load_or_create(source)
    mine = load_or_create(target)
    text = export_identity(source)
    with pytest.raises(DeviceIdentityError, match="another device") as info:
        import_identity(target, text)
    assert device._seed_bytes(mine._key).hex() not in str(info.value)
    assert load(target) == mine
    assert import_identity(target, text, replace=True).device_id == load(source).device_id
    for bad in ("", "not json", "{}", '{"format": "owc-device-identity", "version": 1}'):
        with pytest.raises(DeviceIdentityError, match="imported device identity"):
            import_identity(target, bad)
    with pytest.raises(DeviceIdentityError, match="nothing to export"):
        export_identity(tmp_path / "none")


def test_the_key_and_the_token_are_never_shown(tmp_path, caplog):
    state = tmp_path / "owc"
    token = secret("never-shown-device-token-0123456789")
    with caplog.at_level(logging.DEBUG):
        identity = load_or_create(state)
        identity = set_device_token(state, token)
        identity = load_or_create(state)
        save(state, identity)
        import_identity(tmp_path / "copy", export_identity(state))
        load_or_create(tmp_path / "copy")
    seed = device._seed_bytes(identity._key)
    secrets = [token, b64url(seed), seed.hex(), device.b64url(seed).rstrip("=")]
    pem = identity._key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    secrets.append(pem.splitlines()[1])
    shown = [repr(identity), str(identity), f"{identity}", json.dumps(public_summary(identity))]
    shown += [r.getMessage() for r in caplog.records]
    assert caplog.records, "nothing was logged: the check would prove nothing"
    for text in shown:
        for s in secrets:
            assert s not in text
    assert public_summary(identity) == {
        "device_id": identity.device_id,
        "public_key": identity.public_key_b64,
        "device_token_stored": True,
    }
    assert "device_token=set" in repr(identity)
    assert identity.device_id in repr(identity)


def test_default_state_dir(tmp_path):
    data = tmp_path / "owui-data"
    assert default_state_dir(True, data) == data / "owc"
    assert default_state_dir(True, None, environ={"DATA_DIR": str(data)}) == data / "owc"
    with pytest.raises(ValueError):
        default_state_dir(True, None, environ={})
    assert default_state_dir(False, data, environ={"XDG_STATE_HOME": "/xdg/state", "HOME": "/h"}) == Path(
        "/xdg/state/owc"
    )
    assert default_state_dir(False, None, environ={"XDG_STATE_HOME": "relative", "HOME": "/h"}) == Path(
        "/h/.local/state/owc"
    )
    assert default_state_dir(False, None, environ={"HOME": "/h"}) == Path("/h/.local/state/owc")

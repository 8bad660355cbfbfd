"""The one table of refusal lines (``owc/protocol/refusals.py``, issue 25 item 4): every refusal the Gateway can give
gets its own line naming the fix, in the words of where owc runs (a Pipe valve, a variable, a command-line option);
the shapes are the real Gateway's (``frames_auth.jsonl``, and the 2026.9.6 code for those no frame recorded)."""

from __future__ import annotations

import pytest

from owc.protocol import ErrorShape
from owc.protocol.refusals import CLI, PIPE, Kind, cli_names, explain, explain_missing_scopes, kind_of, pipe_names

from conftest import load_log


def _recorded() -> dict[str, ErrorShape]:
    """The refusals the real Gateway 2026.9.6 gave, by label (``frames_auth.jsonl``)."""
    out = {}
    for record in load_log("frames_auth.jsonl"):
        error = record.get("error")
        if record.get("ok") is False and error:
            out[record["label"]] = ErrorShape(
                code=error["code"],
                message=error["message"],
                details=error.get("details"),
                retryable=bool(error.get("retryable")),
                retry_after_ms=error.get("retryAfterMs"),
            )
    return out


#: Shapes the frames do not hold, as the 2026.9.6 code sends them (``message-handler-D5c0StBB.mjs:1059-1070``,
#: ``connect-error-details-HKRZ1hRc.mjs``; pairing and UNAVAILABLE as measured, NOTES "A Gateway on another host").
BUILT = {
    "rate limited": ErrorShape(
        "INVALID_REQUEST",
        "unauthorized: too many failed authentication attempts (retry later)",
        {"code": "AUTH_RATE_LIMITED", "authReason": "rate_limited"},
        retryable=True,
        retry_after_ms=287_500,
    ),
    "pairing": ErrorShape(
        "NOT_PAIRED", "pairing required", {"code": "PAIRING_REQUIRED", "requestId": "req-42", "reason": "not-paired"}
    ),
    "no token on the gateway": ErrorShape(
        "INVALID_REQUEST",
        "unauthorized: gateway token not configured on gateway (set gateway.auth.token)",
        {"code": "AUTH_TOKEN_NOT_CONFIGURED"},
    ),
    "device token": ErrorShape(
        "INVALID_REQUEST", "unauthorized: device token mismatch", {"code": "AUTH_DEVICE_TOKEN_MISMATCH"}
    ),
    "scope": ErrorShape(
        "FORBIDDEN", "missing scope: operator.read", {"code": "MISSING_SCOPE", "missingScope": "operator.read"}
    ),
    "starting": ErrorShape(
        "UNAVAILABLE", "gateway starting; retry shortly", {"reason": "startup-sidecars"}, True, retry_after_ms=500
    ),
}


def test_each_real_refusal_has_its_kind() -> None:
    recorded = _recorded()
    assert kind_of(recorded["wrong token"]) is Kind.TOKEN
    assert kind_of(recorded["no auth"]) is Kind.DEVICE_REQUIRED
    assert kind_of(recorded["openclaw-tui/ui + token, no device"]) is Kind.DEVICE_REQUIRED
    assert kind_of(recorded["protocol 3 operator"]) is Kind.PROTOCOL
    assert kind_of(recorded["unknown client id"]) is Kind.OTHER
    assert [kind_of(BUILT[k]) for k in BUILT] == [
        Kind.RATE_LIMITED,
        Kind.PAIRING,
        Kind.GATEWAY_HAS_NO_TOKEN,
        Kind.DEVICE_TOKEN,
        Kind.SCOPES,
        Kind.STARTING,
    ]


@pytest.mark.parametrize(
    ("label", "names", "must"),
    [
        ("wrong token", PIPE, ["AUTH_TOKEN_MISMATCH", "GATEWAY_TOKEN valve", "gateway.auth.token"]),
        ("wrong token", CLI, ["AUTH_TOKEN_MISMATCH", "--token-file", "gateway.auth.token"]),
        ("no auth", PIPE, ["DEVICE_IDENTITY_REQUIRED", "DEVICE_DIR valve"]),
        ("no auth", CLI, ["DEVICE_IDENTITY_REQUIRED", "--device-dir"]),
        ("protocol 3 operator", PIPE, ["PROTOCOL_MISMATCH", "protocol 4", "speaks protocol 4,"]),
        ("unknown client id", PIPE, ["INVALID_REQUEST", "must be equal to one of the allowed values"]),
        ("rate limited", PIPE, ["AUTH_RATE_LIMITED", "tries again in 5 min", "GATEWAY_TOKEN valve"]),
        ("pairing", PIPE, ["PAIRING_REQUIRED", "`openclaw devices approve req-42`", "device 0123456789abcdef..."]),
        ("no token on the gateway", PIPE, ["AUTH_TOKEN_NOT_CONFIGURED", "set gateway.auth.token on the Gateway host"]),
        ("device token", PIPE, ["AUTH_DEVICE_TOKEN_MISMATCH", "`openclaw devices list`"]),
        ("scope", PIPE, ["MISSING_SCOPE", "operator.read", "`openclaw devices list`"]),
        ("starting", PIPE, ["UNAVAILABLE", "as soon as it is ready"]),
    ],
)
def test_each_refusal_gets_one_line_naming_its_fix(label: str, names, must: list[str]) -> None:
    error = {**_recorded(), **BUILT}[label]
    refusal = explain(error, names, device_id="0123456789abcdef" * 4)
    for text in (refusal.line, refusal.reply):
        assert "\n" not in text and all(word in text for word in must), text
    assert refusal.reply.startswith(refusal.what + ", so your message was not sent: ")
    assert len(refusal.short) <= 60 and "\n" not in refusal.short
    assert refusal.retryable is error.retryable


def test_the_lines_are_distinct_per_kind() -> None:
    errors = {**_recorded(), **BUILT}
    labels = ["wrong token", "no auth", "protocol 3 operator", "unknown client id", *BUILT]
    lines = {explain(errors[label], PIPE).line for label in labels}
    shorts = {explain(errors[label], PIPE).short for label in labels}
    assert len(lines) == len(labels) and len(shorts) == len(labels)


def test_the_token_setting_named_is_where_the_token_came_from() -> None:
    wrong = _recorded()["wrong token"]
    assert "in the token file /etc/owc/token (--token-file)" in explain(wrong, cli_names("/etc/owc/token")).line
    assert (
        "in $OWC_GATEWAY_TOKEN (or a file passed with --token-file)"
        in explain(wrong, cli_names("$OWC_GATEWAY_TOKEN")).line
    )
    assert explain(wrong, pipe_names("GATEWAY_TOKEN")).line == explain(wrong, PIPE).line
    from_env = explain(wrong, pipe_names("OWC_GATEWAY_TOKEN")).line
    assert "GATEWAY_TOKEN valve" in from_env and "OWC_GATEWAY_TOKEN in Open WebUI's environment" in from_env
    from_file = explain(wrong, pipe_names("GATEWAY_TOKEN_FILE"))
    assert "GATEWAY_TOKEN_FILE valve names" in from_file.line and "GATEWAY_TOKEN_FILE" in from_file.short


def test_missing_scopes_say_what_is_off_and_how_to_grant_them() -> None:
    with_device = explain_missing_scopes(("operator.read", "operator.write"), PIPE, device_id="ab" * 32)
    assert "did not grant operator.read, operator.write" in with_device.line and "sessions.list" in with_device.line
    assert "approve owc's device abababababababab..." in with_device.line
    without = explain_missing_scopes(("operator.read",), PIPE)
    assert "DEVICE_DIR valve" in without.line and "\n" not in without.reply

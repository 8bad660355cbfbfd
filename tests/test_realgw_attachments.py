"""Real Gateway tier: what ``owc.owui.attachments`` produces is what the real Gateway 2026.9.6 accepts.

* Its own attachment code (``attachment-normalize-*.mjs``: ``normalizeRpcAttachmentsToChatAttachments`` and
  ``parseMessageWithAttachments``, exactly as ``chat.send`` calls them: ``chat-send-handler-*.mjs:4040-4045``)
  judges every kind owc sends, at the limits, and sniffs the same type owc named; what owc leaves out at a
  limit, the Gateway would have refused (the whole message with it).
* A ``chat.send`` with a PNG attachment on an Open WebUI chat key is accepted, the run ends with a reply, and
  ``chat.history`` holds the user message with the image in ``__openclaw.media`` (the content stays the text).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from owc.owui.attachments import MAX_BYTES, MAX_IMAGE_BYTES, FileRef, attachments_from

from rawclient import raw_client

pytestmark = pytest.mark.realgateway

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
GIF = base64.b64decode("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7")
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00" + b"\x00" * 40
WEBP = b"RIFF\x24\x00\x00\x00WEBPVP8 " + b"\x00" * 40
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n"

# Runs the Gateway's own functions on each case (one attachment list per case) and says what they answered.
# ``maxBytes``: what the handler passes, ``resolveChatAttachmentMaxBytes`` (20 MiB by default); the advertised
# 19464192 is that capped so one attachment fits a frame.
PARSE = r"""
import fs from "node:fs";
import path from "node:path";
const dist = process.argv[2];
const file = fs.readdirSync(dist).find((f) => /^attachment-normalize-.*\.mjs$/.test(f));
const source = fs.readFileSync(path.join(dist, file), "utf8");
const alias = (name) => new RegExp(`\\b${name} as (\\w+)\\b`).exec(source)[1];
const mod = await import(path.join(dist, file));
const normalize = mod[alias("normalizeRpcAttachmentsToChatAttachments")];
const parse = mod[alias("parseMessageWithAttachments")];
const cases = JSON.parse(fs.readFileSync(process.argv[4], "utf8"));
const out = [];
for (const attachments of cases) {
  try {
    const r = await parse("hi", normalize(attachments), {
      maxBytes: Number(process.argv[3]), supportsImages: true, acceptNonImage: true,
    });
    out.push({ ok: true, images: r.images.map((i) => i.mimeType), media: r.media.map((m) => m.contentType) });
  } catch (e) {
    out.push({ ok: false, error: String(e) });
  }
}
console.log(JSON.stringify(out));
"""


def _gateway_parse(cases: list[list[dict[str, Any]]], tmp_path: Path, install: Any) -> list[dict[str, Any]]:
    dist = install.openclaw_mjs.parent / "dist"
    script = tmp_path / "parse.mjs"
    script.write_text(PARSE)
    (tmp_path / "state").mkdir()
    env = dict(os.environ, OPENCLAW_STATE_DIR=str(tmp_path / "state"), HOME=str(tmp_path), TMPDIR=str(tmp_path))
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    done = subprocess.run(
        [str(install.node_bin / "node"), str(script), str(dist), str(20 * 1024 * 1024), str(tmp_path / "cases.json")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _data_url(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def _image(data: bytes, mime: str = "image/png") -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": _data_url(data, mime)}}


def _one(content: list[Any], files: list[Any] = (), blobs: dict[str, bytes] | None = None) -> dict[str, Any]:
    def read(ref: FileRef, limit: int) -> bytes | None:
        return (blobs or {}).get(ref.id)

    got, problems = attachments_from(content, list(files), read=read)
    assert problems == [] and len(got) == 1, problems
    return got[0]


def _upload(name: str, content_type: str) -> dict[str, Any]:
    file_id = str(uuid.uuid4())
    return {"type": "file", "id": file_id, "url": file_id, "name": name, "content_type": content_type}


def test_the_gateways_own_code_accepts_what_owc_sends(tmp_path: Path, real_gateway_install: Any) -> None:
    pdf, txt, scan, big = (
        _upload("r.pdf", "application/pdf"),
        _upload("notes.txt", "text/plain"),
        _upload("scan", "application/octet-stream"),
        _upload("big.bin", "application/octet-stream"),
    )
    at_image_limit = PNG + b"\0" * (MAX_IMAGE_BYTES - len(PNG))
    at_file_limit = b"\x01" * MAX_BYTES
    blobs = {pdf["id"]: PDF, txt["id"]: b"hello\n", scan["id"]: PNG, big["id"]: at_file_limit}
    sent = {
        "png": _one([_image(PNG)]),
        "gif": _one([_image(GIF, "image/gif")]),
        "jpeg": _one([_image(JPEG, "image/jpeg")]),
        "webp": _one([_image(WEBP, "image/webp")]),
        "png declared jpeg": _one([_image(PNG, "image/jpeg")]),
        "pdf": _one([], [pdf], blobs),
        "text": _one([], [txt], blobs),
        "png upload without a type": _one([], [scan], blobs),
        "image at the limit": _one([_image(at_image_limit)]),
        "file at the limit": _one([], [big], blobs),
    }
    # What owc leaves out at the limits, sent as owc would have sent it: the Gateway refuses it.
    over_image = {
        "type": "image",
        "mimeType": "image/png",
        "fileName": "over.png",
        "content": base64.b64encode(at_image_limit + b"\0").decode(),
    }
    bad = {"type": "image", "mimeType": "image/png", "fileName": "bad.png", "content": "AB+_"}
    cases = [[a] for a in sent.values()] + [[over_image], [bad]]
    answers = _gateway_parse(cases, tmp_path, real_gateway_install)
    for (name, a), answer in zip(sent.items(), answers):
        assert answer["ok"], (name, answer)
        # The Gateway sniffed the type owc named: an image inline (<= 2 MB) or in its media store, a file there.
        assert answer["images"] + answer["media"] == [a["mimeType"]], (name, answer)
        assert (a["type"] == "image") == a["mimeType"].startswith("image/")
    over, broken = answers[len(sent) :]
    assert not over["ok"] and "image exceeds size limit" in over["error"]
    assert not broken["ok"] and "invalid base64 content" in broken["error"]


async def test_chat_send_with_an_image_on_the_real_gateway(real_gateway) -> None:
    key = f"agent:main:openwebui-u-att-{uuid.uuid4()}"
    run_id = str(uuid.uuid4())
    files = [{"type": "file", "id": str(uuid.uuid4()), "url": "x", "name": "dot.png", "content_type": "image/png"}]
    attachments, problems = attachments_from([{"type": "text", "text": "What is this?"}, _image(PNG)], files)
    assert problems == [] and [a["fileName"] for a in attachments] == ["dot.png"]
    with trio.fail_after(180):
        async with raw_client(real_gateway.url, real_gateway.token, instance_id="att") as client:
            assert client.hello is not None
            sent = await client.request(
                "chat.send",
                {"sessionKey": key, "message": "What is this?", "idempotencyKey": run_id, "attachments": attachments},
            )
            assert sent.ok, (sent.error, real_gateway.log_tail())
            await client.events_until(
                lambda f: f.event == "chat" and f.payload.get("runId") == run_id and f.payload.get("state") == "final"
            )
            history = await client.request("chat.history", {"sessionKey": key, "maxChars": 100_000})
            assert history.ok, history.error
    # The hello this connection got advertises the limits owc defaults to.
    hello = next(f["payload"] for f in client.frames if isinstance(f.get("payload"), dict) and "policy" in f["payload"])
    policy = hello["policy"]
    assert policy.get("attachments") == {"maxBytes": MAX_BYTES, "maxImageBytes": MAX_IMAGE_BYTES}
    users = [
        m
        for m in history.payload["messages"]
        if m.get("role") == "user" and (m.get("__openclaw") or {}).get("idempotencyKey") == f"{run_id}:user"
    ]
    assert len(users) == 1, history.payload["messages"]
    (user,) = users
    # Measured: the text stays the content; the image is in the Gateway's media store, named in ``__openclaw``
    # (offloaded: the fake model is text-only; a vision model gets images up to 2 MB inline).
    assert user["content"] == "What is this?"
    assert [
        {k: m[k] for k in ("contentType", "kind", "fileName", "sizeBytes")} for m in user["__openclaw"]["media"]
    ] == [{"contentType": "image/png", "kind": "image", "fileName": "dot.png", "sizeBytes": len(PNG)}]
    assert user["__openclaw"]["media"][0]["url"].startswith("media://inbound/")
    replies = [m for m in history.payload["messages"] if m.get("role") == "assistant"]
    assert replies, history.payload["messages"]

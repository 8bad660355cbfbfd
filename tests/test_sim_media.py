"""The simulator's files the agent makes (``owc.sim.media``), against owc end to end (issue 28).

The simulator must do what the real 2026.9.6 Gateway does (``docs/measured/media-2026.9.6.md``,
``tests/test_realgw_media.py`` runs the real one): the run's ``assistant`` stream says ``mediaUrls``, its chat text
never holds a ``MEDIA:`` line, a reply of files alone ends with a bare final, the transcript is rewritten after the
final and announced by ``sessions.changed phase:"message"``, ``artifacts.download`` answers a ticket URL and the
Gateway's own port serves it. owc's runtime takes the files into M exactly as it does from the real one: the
store is real SQLite with Open WebUI's schema, the file storage ``RecordingFiles`` (the browser tier,
``tests/test_owui_w_media.py``, uses Open WebUI's own)."""

from __future__ import annotations

import ssl
import struct
import urllib.parse
import uuid
import zlib
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import h11
import pytest
import trio
import trustme

from owc import ids
from owc.emit import RecordingEmitter
from owc.emit.files import RecordingFiles
from owc.gateway import GatewayConfig, open_gateway_connection
from owc.protocol.media import DeliveredFile
from owc.runs.media import GatewayMedia
from owc.runtime import RuntimeConfig, open_runtime
from owc.sim import End, Media, Simulator, Text, open_simulator
from owc.sim.restarts import BOOT_SECONDS
from owc.sim.script import Step
from owc.store import open_store

from bounds import bounded
from rawclient import raw_client

TOKEN = "media-token"
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


def png(width: int, height: int, rgb: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A real PNG of one colour (what an agent's chart is, as far as a test needs)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    row = b"\x00" + bytes(rgb) * width
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(row * height)) + chunk(b"IEND", b"")
    )


CHART = png(64, 48)


def _notes(message: dict[str, Any]) -> list[str]:
    return [s["description"] for s in message.get("statusHistory") or [] if s.get("action") == "openclaw_file"]


class Turn:
    """One agent turn on a chat's key (another client's ``chat.send``, the simulator playing ``steps``), owc's
    runtime writing its message M."""

    def __init__(self, sim: Simulator, store: Any, runtime: Any, other: Any, files: RecordingFiles) -> None:
        self.sim, self.store, self.runtime, self.other, self.files = sim, store, runtime, other, files
        self.user, self.chat_id, self.run_id = "u-media", str(uuid.uuid4()), str(uuid.uuid4())
        self.key = ids.session_key("main", self.user, self.chat_id)
        self.message_id = ids.message_id(self.key, self.run_id)

    async def send(self, steps: Sequence[Step]) -> None:
        self.sim.responder = lambda key, words: list(steps)
        await self.store.create_chat(self.chat_id, self.user)
        sent = await self.other.request(
            "chat.send", {"sessionKey": self.key, "message": "files please", "idempotencyKey": self.run_id}
        )
        assert sent.ok, sent.error
        keeper = self.runtime.keeper
        await keeper.until(lambda: keeper.totals()[1] >= 1)

    async def message(self) -> dict[str, Any]:
        return (await self.store.read_chat(self.chat_id))["history"]["messages"].get(self.message_id) or {}

    async def until(self, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """M once ``done(M)``: re-checked after each of the desk's looks (no clock)."""
        media = self.runtime.keeper.media
        while True:
            seen = media.looks  # before the read: a look that ends after it is waited for, never missed
            got = await self.message()
            if done(got):
                return got
            await media.until(partial(lambda before: media.looks > before, seen))


async def _env(tmp_path: Path, body: Callable[[Turn], Any], *, delay: float = 0.0) -> None:
    files, emitter = RecordingFiles(), RecordingEmitter()
    async with (
        open_simulator(token=TOKEN) as sim,
        open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store,
    ):
        sim.media_delay = delay
        config = RuntimeConfig(url=sim.url, token=TOKEN, gateway=GatewayConfig(instance_id="owc", backoff_jitter=0))
        async with open_runtime(config, store, emitter, files=files) as runtime:
            await runtime.connected()
            async with raw_client(sim.url, TOKEN, caps=(), instance_id="cron-ish") as other:
                await body(Turn(sim, store, runtime, other, files))


def _done(count: int) -> Callable[[dict[str, Any]], bool]:
    return lambda m: len(m.get("files") or []) + len(_notes(m)) >= count


async def test_an_image_a_pdf_and_a_refused_file_reach_m(clock, tmp_path: Path) -> None:
    async def body(turn: Turn) -> None:
        await turn.send(
            [
                Text("Here are your files."),
                Media("chart.png", "image/png", CHART),
                Media("report.pdf", "application/pdf", PDF),
                Media("page.html", "text/html", refused="unsupported-format"),
                End(),
            ]
        )
        message = await turn.until(_done(3))
        entries = message["files"]
        assert [(e["type"], e["name"], e["content_type"]) for e in entries] == [
            ("image", "chart.png", "image/png"),
            ("file", "report.pdf", "application/pdf"),
        ]
        by_name = {meta[1]: fid for fid, meta in turn.files.files.items()}
        assert turn.files.data[by_name["chart.png"]] == CHART
        assert turn.files.data[by_name["report.pdf"]] == PDF
        assert all(meta[0] == turn.user for meta in turn.files.files.values())
        for entry in entries:
            assert entry["url"] == f"/api/v1/files/{entry['id']}/content"
            assert entry["openclaw_artifact"].startswith("artifact_managed_")
        assert _notes(message) == ["page.html was not delivered: the Gateway does not deliver files of this type."]
        assert message["content"].startswith("Here are your files.") and "MEDIA:" not in message["content"]
        assert not message.get("error")
        # Each file fetched once, by its ticket on the simulator's own port.
        assert [status for _, status in turn.sim.media.served] == [200, 200]

    await _env(tmp_path, body)


async def test_a_reply_of_files_alone_is_those_files_with_no_empty_note(clock, tmp_path: Path) -> None:
    async def body(turn: Turn) -> None:
        await turn.send([Media("only.png", "image/png", png(8, 8, (10, 200, 10))), End()])
        message = await turn.until(_done(1))
        assert [e["name"] for e in message["files"]] == ["only.png"]
        assert message["content"] == ""
        assert not message.get("error"), message.get("error")

    await _env(tmp_path, body)


async def test_too_large_and_forbidden_files_are_named_and_never_fetched(clock, tmp_path: Path) -> None:
    big = png(16, 16) + b"\x00" * (13 * 1024 * 1024 - len(png(16, 16)))
    svg = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'

    async def body(turn: Turn) -> None:
        await turn.send(
            [Text("Two."), Media("big.png", "image/png", big), Media("logo.svg", "image/svg+xml", svg), End()]
        )
        message = await turn.until(_done(2))
        assert message.get("files") in (None, [])
        assert _notes(message) == [
            "big.png was not stored: it is 13 MiB, over owc's 12 MiB limit for images",
            "logo.svg was not stored: owc does not store files of type image/svg+xml (an SVG image can carry script)",
        ]
        assert turn.sim.media.served == [] and turn.sim.requests["artifacts.download"] == 0  # decided before a byte
        assert turn.files.files == {}

    await _env(tmp_path, body)


@pytest.mark.virtual_seconds(10)
async def test_files_delivered_after_the_finalize_are_taken_at_the_rewrite_push_and_only_once(
    clock, tmp_path: Path
) -> None:
    async def body(turn: Turn) -> None:
        await turn.send([Text("Coming."), Media("chart.png", "image/png", CHART), End()])
        media = turn.runtime.keeper.media
        message = await turn.message()
        assert not message.get("files") and message["content"] == "Coming."  # finalized before the rewrite
        seen = media.looks
        clock.jump(10)  # past the simulator's media delay: the rewrite and its push
        message = await turn.until(_done(1))
        # The file is in M once the desk's write is; its look ends after it tells the tabs: wait for that end.
        await media.until(lambda: media.looks > seen)
        assert [e["name"] for e in message["files"]] == ["chart.png"]
        # A later rewrite push for the session (say another message's): a fresh look adds nothing twice.
        seen = media.looks
        session = turn.sim.sessions[turn.key]
        turn.sim.fanout.hidden_message(session, session.transcript[-1])
        await media.until(lambda: media.looks > seen)
        again = await turn.message()
        assert again["files"] == message["files"] and len(turn.files.files) == 1
        assert turn.sim.requests["artifacts.download"] == 1

    await _env(tmp_path, body, delay=10)


# ---------------------------------------------------------------------------------------------- the wire


async def _http(port: int, method: str, target: str) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 request on the simulator's port, no credential: status, headers, body."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    conn = h11.Connection(h11.CLIENT)
    try:
        req = h11.Request(method=method, target=target, headers=[("Host", f"127.0.0.1:{port}")])
        await stream.send_all(conn.send(req) + conn.send(h11.EndOfMessage()))
        status, headers, body = 0, {}, b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(65536))
            elif isinstance(event, h11.Response):
                status = event.status_code
                headers = {k.decode(): v.decode() for k, v in event.headers}
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return status, headers, body
    finally:
        await stream.aclose()


@pytest.mark.virtual_seconds(301)
async def test_the_sims_wire_and_ticket_route_are_the_real_gateways(clock) -> None:
    key, other_key = "agent:main:openwebui-u-c1", "agent:main:openwebui-u-c2"
    async with (
        open_simulator(token=TOKEN) as sim,
        raw_client(sim.url, TOKEN, caps=("tool-events",)) as a,
    ):
        sim.media_delay = 0
        assert (await a.request("sessions.subscribe", {})).ok
        run = sim.start_run(key, "r2")
        run.media("chart.png", "image/png", CHART).media("report.pdf", "application/pdf", PDF).end()
        frames = await a.events_until(
            lambda f: f.event == "sessions.changed" and (f.payload or {}).get("phase") == "message"
        )
        of_run = [f for f in frames if (f.payload or {}).get("runId") == "r2"]
        urls = [f.payload["data"].get("mediaUrls") for f in of_run if f.event == "agent"]
        assert ["chart.png", "report.pdf"] in urls
        final = next(f for f in of_run if f.event == "chat" and f.payload["state"] == "final")
        assert "message" not in final.payload  # files alone: a bare final
        pushed = frames[-1].payload
        assert pushed["sessionKey"] == key and "messageId" not in pushed
        history = (await a.request("chat.history", {"sessionKey": key})).payload
        mine = [m for m in history["messages"] if (m.get("__openclaw") or {}).get("runId") == "r2"]
        image, doc = mine[-1]["content"]
        assert image["type"] == "image" and (image["width"], image["height"]) == (64, 48)
        assert (
            image["url"]
            == f"/api/chat/media/outgoing/{urllib.parse.quote(key, safe='')}/{image['artifactId'][23:]}/full"
        )
        assert doc["type"] == "attachment" and doc["attachment"]["label"] == "report.pdf"

        got = await a.request("artifacts.download", {"sessionKey": key, "artifactId": image["artifactId"]})
        assert got.ok and got.payload["artifact"]["download"] == {"mode": "url"}
        url = got.payload["url"]
        assert url.startswith(image["url"] + "?mediaTicket=v1.") and got.payload["expiresAt"].endswith("Z")
        status, headers, body = await _http(sim.port, "GET", url)
        assert (status, headers["content-type"], body) == (200, "image/png", CHART)
        assert headers["content-length"] == str(len(CHART)) and headers["content-disposition"].startswith("inline")
        status, headers, body = await _http(sim.port, "HEAD", url)
        assert (status, headers["content-length"], body) == (200, str(len(CHART)), b"")
        status, _, body = await _http(sim.port, "GET", image["url"])
        assert (status, body) == (401, b'{"error":{"message":"Unauthorized","type":"unauthorized"}}')
        assert (await _http(sim.port, "GET", url[:-3] + "AAA"))[0] == 404  # a forged ticket
        assert (await _http(sim.port, "GET", "/anything"))[0] == 404

        wrong = await a.request("artifacts.download", {"sessionKey": other_key, "artifactId": image["artifactId"]})
        assert not wrong.ok and wrong.error.code == "INVALID_REQUEST"
        assert wrong.error.message == "artifact not found"
        assert wrong.error.details == {"type": "artifact_not_found", "artifactId": image["artifactId"]}

        clock.jump(301)  # past the ticket's 5 minutes on the Gateway's clock
        assert (await _http(sim.port, "GET", url))[0] == 404
        fresh = (await a.request("artifacts.download", {"sessionKey": key, "artifactId": image["artifactId"]})).payload
        assert (await _http(sim.port, "GET", fresh["url"]))[0] == 200


@pytest.mark.virtual_seconds(BOOT_SECONDS)  # the process's boot: never in no time
async def test_a_restart_kills_every_ticket_and_keeps_the_files(clock) -> None:
    key = "agent:main:openwebui-u-c3"
    async with open_simulator(token=TOKEN) as sim:
        sim.media_delay = 0
        run = sim.start_run(key, "r1")
        run.text("Here.").media("chart.png", "image/png", CHART).end()
        await sim.wait_for(lambda: bool(sim.media.files))
        (artifact,) = sim.media.files
        async with raw_client(sim.url, TOKEN) as a:
            url = (await a.request("artifacts.download", {"sessionKey": key, "artifactId": artifact})).payload["url"]
        clock.autojump_threshold = 0  # the boot's own sleep is the next timer: no real waiting
        await sim.restart("crash")
        clock.autojump_threshold = 5
        assert (await _http(sim.port, "GET", url))[0] == 404
        async with raw_client(sim.url, TOKEN) as a:
            fresh = (await a.request("artifacts.download", {"sessionKey": key, "artifactId": artifact})).payload
        assert (await _http(sim.port, "GET", fresh["url"]))[2] == CHART


async def test_over_wss_the_ticket_is_served_over_tls_on_the_same_port(clock) -> None:
    """A ``wss://`` simulator serves the ticket GET over TLS on its port: owc's own fetch (``GatewayMedia``, the
    WebSocket's trust) gets the bytes."""
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    key = "agent:main:openwebui-u-c4"
    async with open_simulator(token=TOKEN, ssl_context=server_ctx) as sim:
        sim.media_delay = 0
        sim.start_run(key, "r1").text("Here.").media("report.pdf", "application/pdf", PDF).end()
        await sim.wait_for(lambda: bool(sim.media.files))
        (item,) = sim.media.files.values()
        settings = GatewayConfig(ssl_context=client_ctx)
        async with open_gateway_connection(sim.url, TOKEN, config=settings) as client:
            await client.wait_connection()
            media = GatewayMedia(client.request, sim.url, settings)
            got = await media.fetch(
                key, DeliveredFile(item.artifact_id, "document", "report.pdf", "application/pdf", len(PDF))
            )
        assert got.data == PDF and got.mime == "application/pdf"


@pytest.mark.virtual_seconds(1)
async def test_files_delivered_while_the_finished_message_is_written_are_taken(clock, tmp_path: Path) -> None:
    """The rewrite and its push come after the finalize read the transcript but before its write ends (a loaded
    box): the push finds nothing watched yet; the files must still reach M (CI, tier W media, under load)."""

    async def body(turn: Turn) -> None:
        write = turn.store.write

        async def slow_write(chat_id: str, message_id: str, **kwargs: Any) -> Any:
            if kwargs.get("done"):
                await trio.sleep(1)  # past the simulator's media delay (0.1 s): the push lands meanwhile
            return await write(chat_id, message_id, **kwargs)

        turn.store.write = slow_write
        await turn.send([Text("Coming."), Media("chart.png", "image/png", CHART), End()])
        with bounded(5, "the file in M (virtual seconds)"):
            message = await turn.until(_done(1))
        assert [e["name"] for e in message["files"]] == ["chart.png"]

    await _env(tmp_path, body, delay=0.1)

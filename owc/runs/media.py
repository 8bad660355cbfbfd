"""The media desk: the files an agent makes, from the run's transcript into its message.

A pump, like the question desk (``owc.runs.questions``): its decisions are the pure ``MediaBook``'s
(``owc.rules.media``: which finished runs still owe files, which files are handled), its words are
``owc.render.files``', what it may fetch is ``owc.rules.media_policy``'s. It runs in the runtime's nursery and is
told two things:

* ``finished(run, history)``: a writer finished run R's message M with the transcript it read (M is watched from
  now on; files already in that transcript, e.g. a progress message's image, are taken at once);
* ``on_changed(session_key)``: the Gateway announced a transcript rewrite (``sessions.changed phase:"message"``),
  which is how a run's files arrive after its final: the session's newest page is read once and each watched run's
  new files are taken.

Taking a file: the Gateway's bytes (``fetch``: ``artifacts.download`` on owc's connection, then the Gateway's own
short-lived URL: ``GatewayMedia``), stored in Open WebUI's file storage as the chat's user (``FileSink``), then
added to M's ``files`` under the chat's row lock and sent to the tabs (``files``: every tab, the shared room too).
A file that cannot be kept is named in M as a status line. One file's failure costs that file, never the next;
a failure that may pass (the connection dropped, the database locked) leaves it for the next look.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from owc.emit import Emitter
from owc.emit.files import FileRefused, FileSink, NoFiles
from owc.gateway.connection import GatewayConfig
from owc.gateway.errors import GatewayError, NotConnected, SessionClosed
from owc.gateway.media_fetch import MediaFetchError, fetch_media, gateway_tls
from owc.protocol import ChatHistory
from owc.protocol.errors import ProtocolError
from owc.protocol.media import DeliveredFile, MediaItem, RefusedFile, run_media
from owc.render import files as shown
from owc.render import output_from_transcript, output_text
from owc.rules.media import MediaBook, Watch, stale_media_lines
from owc.rules.media_policy import (
    DEFAULT_POLICY,
    MediaPolicy,
    Refused,
    UnsafeDownloadUrl,
    download_url,
    not_stored,
    shown_name,
)
from owc.runs.correct import Correction
from owc.runs.run import Run
from owc.runs.writer import history_params, read_history_page
from owc.store import StoreError
from owc.store.store import REFUSALS

log = logging.getLogger("owc.runs")

Request = Callable[[str, dict[str, Any]], Awaitable[Any]]


class NotFetched(Exception):
    """The file's bytes could not be had. ``passing``: it may work at the next look (the connection dropped, the
    Gateway did not answer in time); else the file is named in M: ``str(exc)`` is that whole line."""

    def __init__(self, why: str, *, passing: bool = False) -> None:
        super().__init__(why)
        self.passing = passing


@attrs.frozen
class Fetched:
    """A file's bytes, its checked type and the name it is stored under (``media_policy.safe_filename``)."""

    data: bytes
    mime: str
    name: str


#: ``fetch(session_key, file) -> Fetched``; raises ``NotFetched``.
Fetch = Callable[[str, DeliveredFile], Awaitable[Fetched]]


async def no_fetch(session_key: str, item: DeliveredFile) -> Fetched:
    raise NotFetched(not_stored(shown_name(item.label), "owc has no Gateway connection to fetch it with"))


@attrs.define
class GatewayMedia:
    """A delivered file's bytes from the Gateway: ``artifacts.download`` on owc's own connection (read scope), then
    either the bytes in its answer (``encoding: "base64"``) or one GET of the short-lived ticket URL it answers on
    the Gateway's own origin (``owc.gateway.media_fetch``: 2026.9.6 has no WebSocket-only way for managed files,
    measured). What owc takes at all, and how much, is ``media_policy``'s: decided from the block before any byte
    is asked for. A ticket refused or expired is asked for again once."""

    request: Request
    #: The Gateway's WebSocket URL: its origin, path prefix and TLS are the fetch's.
    url: str
    settings: GatewayConfig
    policy: MediaPolicy = DEFAULT_POLICY

    async def fetch(self, session_key: str, item: DeliveredFile) -> Fetched:
        decided = self.policy.decide(item.mime, item.size, item.label)
        if isinstance(decided, Refused):
            raise NotFetched(decided.reason)
        name = shown_name(item.label, decided.filename)
        for attempt in (1, 2):
            try:
                answer = await self.request(
                    "artifacts.download", {"sessionKey": session_key, "artifactId": item.artifact_id}
                )
            except (SessionClosed, NotConnected) as exc:
                raise NotFetched(str(exc), passing=True) from exc
            except GatewayError as exc:  # ``artifact not found``: gone with its message (a reset, a delete)
                raise NotFetched(not_stored(name, "the Gateway no longer has it")) from exc
            answer = answer if isinstance(answer, dict) else {}
            data = answer.get("data")
            if answer.get("encoding") == "base64" and isinstance(data, str):
                if len(data) > (decided.cap + 2) // 3 * 4 + 4:
                    raise NotFetched(not_stored(name, "it is larger than the Gateway said"))
                try:
                    raw = base64.b64decode(data, validate=True)
                except (binascii.Error, ValueError) as exc:
                    raise NotFetched(not_stored(name, "the Gateway's copy of it was unreadable")) from exc
                if len(raw) > decided.cap:
                    raise NotFetched(not_stored(name, "it is larger than the Gateway said"))
                return Fetched(raw, decided.mime, decided.filename)
            try:
                url = download_url(self.url, answer.get("url"))  # type: ignore[arg-type]
            except UnsafeDownloadUrl as exc:
                log.warning("media.unsafe_url artifact=%s: %s", item.artifact_id, exc)
                raise NotFetched(not_stored(name, "the Gateway named no place owc fetches from")) from exc
            context, pin = gateway_tls(self.url, self.settings)
            try:
                raw = await fetch_media(
                    url, ssl_context=context, pin_sha256=pin, cap=decided.cap, expect_mime=decided.mime
                )
            except MediaFetchError as exc:
                if exc.new_ticket and attempt == 1:
                    continue
                raise NotFetched(not_stored(name, str(exc)), passing=exc.retryable) from exc
            return Fetched(raw, decided.mime, decided.filename)
        raise AssertionError("unreachable")  # the loop returns or raises


@attrs.define
class MediaDesk:
    store: Any = None  # TrioChatStore, set at assembly (the keeper's)
    emitter: Emitter | None = None
    files: FileSink = attrs.field(factory=NoFiles)
    fetch: Fetch = no_fetch
    #: The runtime's ``GatewayClient.request`` (the current connection), set at assembly.
    request: Request | None = None
    #: A message to correct from its transcript at the next tick (``Corrections.add_marked``), set at assembly.
    correct: Callable[[Correction], None] = lambda item: None
    book: MediaBook = attrs.field(factory=MediaBook)
    #: Sessions to look at: a transcript already read (a finalize's), or None for a fresh read (a rewrite's push).
    _pending: dict[str, ChatHistory | None] = attrs.field(factory=dict)
    _wake: trio.Event = attrs.field(factory=trio.Event)
    #: Looks done (each session's transcript taken): what a test or a bench waits on, never a clock.
    looks: int = 0
    _looked: trio.Event = attrs.field(factory=trio.Event)

    # ------------------------------------------------------------------ told

    def finished(self, run: Run, history: ChatHistory | None) -> None:
        """Run R's message M is finished: watch it, and take what its transcript already holds."""
        user = run.ref.user_id
        if user is None:
            return
        self.book.watch(Watch(run.session_key, run.run_id, run.ref.chat_id, run.message_id, user))
        if history is not None and run_media(history, run.run_id):
            self._owe(run.session_key, history)
        elif run.renderer.media_announced:
            # Its stream named files, but the transcript the finalize read holds none yet. The Gateway's rewrite may
            # have come, with its ``phase:"message"`` push, between that read and this watch (the finished message's
            # write in between grows with load): ``on_changed`` then found nothing watched and let it go, and no
            # other push comes. One fresh read now sees such a rewrite; a later one finds the run watched.
            self._owe(run.session_key, None)

    def on_changed(self, session_key: str) -> None:
        """The Gateway rewrote a transcript message of this session: files may have arrived."""
        if self.book.watches(session_key):
            self._owe(session_key, None)

    def _owe(self, session_key: str, history: ChatHistory | None) -> None:
        if session_key in self._pending and self._pending[session_key] is None:
            return  # a fresh read is owed already: it sees at least as much
        self._pending[session_key] = history
        self._wake.set()

    # ------------------------------------------------------------------ the pump

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            while self._pending:
                session_key = next(iter(self._pending))
                history = self._pending.pop(session_key)
                try:
                    await self._look(session_key, history)
                except Exception:  # one session's trouble never stops the desk
                    log.exception("media.look_failed session=%s", session_key)
                self.looks += 1
                self._looked.set()
                self._looked = trio.Event()

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Returns once ``predicate()`` holds, looking again after each look the desk has done."""
        while not predicate():
            await self._looked.wait()

    async def _look(self, session_key: str, history: ChatHistory | None) -> None:
        if history is None:
            if self.request is None:
                return
            try:
                history = await read_history_page(self.request, history_params(session_key))
            except (GatewayError, ProtocolError) as exc:
                log.info("media.transcript_unread session=%s error=%s (the next rewrite looks again)", session_key, exc)
                return
        for watch in self.book.watched(session_key):
            due = self.book.due(watch, run_media(history, watch.run_id))
            if due is not None:
                await self._take(watch, due.items, history)

    async def _take(self, watch: Watch, items: tuple[MediaItem, ...], history: ChatHistory) -> None:
        entries: list[dict[str, Any]] = []
        notes: list[dict[str, Any]] = []
        done: list[MediaItem] = []
        for item in items:
            if isinstance(item, RefusedFile):
                notes.append(shown.note(shown.refused_line(item)))
                done.append(item)
                continue
            try:
                got = await self.fetch(watch.session_key, item)
                stored = await self.files.store(watch.user_id, got.name, got.mime, got.data, source=item.artifact_id)
            except NotFetched as exc:
                if exc.passing:
                    log.info("media.fetch_waits run=%s artifact=%s: %s", watch.run_id, item.artifact_id, exc)
                    continue
                log.warning("media.not_stored run=%s artifact=%s (not fetched)", watch.run_id, item.artifact_id)
                notes.append(shown.note(str(exc)))
                done.append(item)
                continue
            except FileRefused as exc:
                log.warning("media.not_stored run=%s artifact=%s (storage refused)", watch.run_id, item.artifact_id)
                notes.append(shown.note(not_stored(shown_name(item.label), str(exc))))
                done.append(item)
                continue
            entries.append(shown.file_entry(item, stored.file_id, stored.url, got.mime, len(got.data)))
            done.append(item)
        if not done:
            return
        try:
            added = await self.store.add_files(watch.chat_id, watch.message_id, entries, notes)
        except (*REFUSALS, StoreError) as exc:
            log.error(
                "media.not_written run=%s message=%s error=%s (the next look tries again)",
                watch.run_id,
                watch.message_id,
                type(exc).__name__,
            )
            return
        self.book.handled(watch, tuple(done))
        log.info(
            "media.added run=%s message=%s files=%d notes=%d",
            watch.run_id,
            watch.message_id,
            len(entries),
            len(notes),
        )
        if added is None:
            return
        try:
            said = output_text(output_from_transcript(history, watch.run_id) or [])
        except Exception:  # an unreadable transcript: M stands as it is
            log.exception("media.transcript_unrendered run=%s", watch.run_id)
            said = None
        if said is not None and stale_media_lines(added.content, said):
            # Finished from the transcript before the Gateway's rewrite: M shows the raw ``MEDIA:`` lines (a host
            # path, for an absolute reference). The rewritten transcript puts its content right at the next tick.
            log.info("media.correct_text run=%s message=%s (read before the rewrite)", watch.run_id, watch.message_id)
            self.correct(
                Correction(
                    watch.session_key, watch.run_id, watch.chat_id, watch.message_id, watch.user_id, terminal_seen=True
                )
            )
        if self.emitter is None:
            return
        events: list[dict[str, Any]] = [{"type": "status", "data": n} for n in added.notes]
        events.append({"type": "files", "data": {"files": list(added.files)}})
        for event in events:
            try:
                await self.emitter.emit(watch.chat_id, watch.message_id, watch.user_id, event)
            except Exception:
                log.exception("media.emit_failed message=%s event=%s", watch.message_id, event["type"])

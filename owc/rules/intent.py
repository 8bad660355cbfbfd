"""Stop or "Send now": what a cancel of an Open WebUI task meant, from the stop requests that caused it (seed 000
case 8; issue 25, item 1).

Open WebUI 0.12.4's page sends one request for its Stop button, the Escape key and "Send now" on a queued message
(``POST /api/tasks/chat/{id}/stop``, same headers, no body), and the completion a "Send now" is followed by looks
like the one a Stop with a queued message is followed by: the server cannot tell them apart (measured). The page
can: owc puts a hook in every tab from page load (``owc.owui.intent_hook``) that tags each stop request with the
control behind it (header ``X-OWC-Stop-Intent: stop|send_now``), and wraps the stop route in-process to keep a
**record** of each request *before* Open WebUI's handler cancels anything (``owc.owui.page``). A cancel is then
read against those records:

* each reader of a chat's records (one Open WebUI task: owc's writer, or a user turn's request) holds a **mark**,
  the records it has already read (taken when it starts: older stops were not about it);
* on a cancel it reads the records it has not read yet, of the **user whose stop can cancel it** (Open WebUI's
  stop cancels only the caller's own tasks: another user's record in a shared chat is not about this task), and
  decides: **any Stop wins** (one stop cancels every task of the chat's user, so a Stop pressed in any tab stops
  the run, whatever another tab pressed meanwhile); else a **Send now** keeps writing (the page's queued message
  is its own next turn); else (a request with no tag: a tab without the hook, a script, a client other than the
  web page; or no request at all: an admin's stop of one task, a deleted chat) the intent is **unknown**, and the
  run goes on: it is never stopped on a guess.

Records carry a unique id rather than a counter: a counter that restarts (a record store trimmed or expired, a
process restarted) would hide new records behind an old mark; an id set cannot. No clock decides anything here.

Pure: no I/O, no Trio. The record store is the shell's (``owc.owui.page``: Redis when Open WebUI has one, so every
worker and instance reads what any other recorded; else this module's ``StopLog`` in the process).
"""

from __future__ import annotations

import enum
import json
from collections import OrderedDict, deque
from collections.abc import Iterable
from typing import Any

import attrs

#: The header the page hook sets on each stop request (lower case: ASGI's header names are).
HEADER = "x-owc-stop-intent"
#: Its values.
STOP = "stop"
SEND_NOW = "send_now"

#: Records kept per chat: a reader reads after each cancel, so a handful between two reads is already many.
KEEP = 16
#: Chats whose records one process keeps (without Redis): the least recently recorded go first.
CHATS = 4096
#: An id or user id longer than this is not one Open WebUI made: the record is refused.
MAX_ID = 200


class Kind(enum.Enum):
    """What one stop request said."""

    STOP = "stop"  # the Stop button, Escape, or any stop the hook could not tie to "Send now"
    SEND_NOW = "send_now"  # "Send now" on a queued message
    UNTOLD = "untold"  # no tag (a tab without the hook, a script, another client): says nothing


class Intent(enum.Enum):
    STOP = "stop"  # stop the run, finalize with what it has
    SEND_NOW = "send_now"  # keep writing; the page sends its queued message as the next turn
    UNKNOWN = "unknown"  # nothing said: keep writing, and put the tabs back in the generating state


def kind_of(value: str | bytes | None) -> Kind:
    """The header's value as a ``Kind``; absent or anything else (an old or hostile page) is ``UNTOLD``."""
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    value = (value or "").strip().lower()
    if value == STOP:
        return Kind.STOP
    if value == SEND_NOW:
        return Kind.SEND_NOW
    return Kind.UNTOLD


@attrs.frozen
class StopRecord:
    """One stop request of one chat: its own id, what it said, and the user who sent it (None: unknown, e.g. a
    request whose credentials owc could not read; such a record is nobody's and decides nothing)."""

    id: str
    kind: Kind
    user_id: str | None = None

    def encode(self) -> str:
        return json.dumps({"id": self.id, "kind": self.kind.value, "user": self.user_id}, separators=(",", ":"))

    @staticmethod
    def decode(raw: str | bytes) -> StopRecord | None:
        """A stored record, or None for anything else (a record store shared with something that is not owc)."""
        try:
            data: Any = json.loads(raw)
            record_id, kind, user = data["id"], Kind(data["kind"]), data.get("user")
        except (ValueError, TypeError, KeyError):
            return None
        if not _plain_id(record_id) or not (user is None or _plain_id(user)):
            return None
        return StopRecord(record_id, kind, user)


def _plain_id(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_ID


@attrs.frozen
class Mark:
    """What one reader has read of a chat's records: their ids (only ids still stored matter, so it stays small)."""

    seen: frozenset[str] = frozenset()


def mark_of(records: Iterable[StopRecord]) -> Mark:
    """A reader that starts now: every record already there is about something before it."""
    return Mark(frozenset(r.id for r in records))


def read(records: Iterable[StopRecord], mark: Mark, user_id: str | None) -> tuple[tuple[StopRecord, ...], Mark]:
    """The records the reader had not read that are ``user_id``'s (the user whose stop cancels the reader's task),
    oldest first, and the reader's mark after reading (every record there now, whoever sent it)."""
    records = tuple(records)
    unread = tuple(r for r in records if r.id not in mark.seen and r.user_id is not None and r.user_id == user_id)
    return unread, mark_of(records)


def decide(records: Iterable[StopRecord]) -> Intent:
    """The intent behind a cancel, from the stop requests read for it. A Stop anywhere wins: it is the one control
    that asks for the run to end, and the hook tags nothing else so."""
    kinds = {r.kind for r in records}
    if Kind.STOP in kinds:
        return Intent.STOP
    if Kind.SEND_NOW in kinds:
        return Intent.SEND_NOW
    return Intent.UNKNOWN


class StopLog:
    """One process's records when Open WebUI runs without Redis (then one process serves every stop request and
    holds every task): the newest ``keep`` of each chat, for the ``chats`` chats stopped most recently."""

    def __init__(self, keep: int = KEEP, chats: int = CHATS) -> None:
        self.keep = keep
        self.chats = chats
        self._chats: OrderedDict[str, deque[StopRecord]] = OrderedDict()

    def add(self, chat_id: str, record: StopRecord) -> None:
        log = self._chats.pop(chat_id, None)
        if log is None:
            log = deque(maxlen=self.keep)
        log.append(record)
        self._chats[chat_id] = log  # the most recently stopped chat last
        while len(self._chats) > self.chats:
            self._chats.popitem(last=False)

    def records(self, chat_id: str) -> tuple[StopRecord, ...]:
        return tuple(self._chats.get(chat_id, ()))

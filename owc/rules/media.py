"""Which runs' files are still owed to their messages, and when to look again. Pure.

The Gateway puts a run's files into its transcript **after** the run's ``chat final`` (0.1 to 2.4 s later,
measured) and announces that rewrite with ``sessions.changed {sessionKey, phase:"message"}``; a later run of the
same session can deliver into its own message the same way (``image_generate``'s completion run). So a finished
run's message is *watched*: its files are taken from the transcript the finalize read, and again from the
transcript read after each ``phase:"message"`` push for its session. An event, never a clock, decides when to look.

The book holds the watched runs, most recent last, at most ``cap`` of them (a count, not a timer: the oldest
leaves first), and per run the files already handled (stored, or named as not kept), so a second look adds
nothing twice. A file whose fetch or store failed is *not* handled: the next look tries it again.
"""

from __future__ import annotations

from collections import OrderedDict

import attrs

from owc.protocol.media import MediaItem, RefusedFile

#: Watched runs kept at once: far above the runs finishing within the seconds their files take.
DEFAULT_CAP = 256


def item_key(item: MediaItem) -> str:
    """What marks a file as handled: its artifact id; a refusal by its code and name."""
    if isinstance(item, RefusedFile):
        return f"refused:{item.code}:{item.label}"
    return item.artifact_id


def _media_lines(text: str) -> set[str]:
    """The standalone ``MEDIA:`` lines of a text (the shipped rule: up to three leading spaces)."""
    out = set()
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("MEDIA:") and len(line) - len(line.lstrip(" ")) <= 3:
            out.add(stripped)
    return out


def stale_media_lines(shown: str, transcript: str) -> bool:
    """M shows a ``MEDIA:`` line its run's transcript no longer holds: its finalize read the transcript before the
    Gateway's rewrite (the raw record keeps absolute references, measured: a host path in the chat). Its content is
    then corrected from the rewritten transcript. A ``MEDIA:`` line the Gateway kept as text (not a file to it) is in
    both, and stays."""
    return bool(_media_lines(shown) - _media_lines(transcript))


@attrs.frozen
class Watch:
    session_key: str
    run_id: str
    chat_id: str
    message_id: str
    user_id: str


@attrs.frozen
class Due:
    """Files of a watched run not handled yet, as the transcript just read shows them."""

    watch: Watch
    items: tuple[MediaItem, ...]


@attrs.define
class MediaBook:
    cap: int = DEFAULT_CAP
    _watched: OrderedDict[tuple[str, str], Watch] = attrs.field(factory=OrderedDict)
    _handled: dict[tuple[str, str], set[str]] = attrs.field(factory=dict)

    def watch(self, watch: Watch) -> None:
        """A run's message is finished: its files are owed from now on (again at a second finalize: kept)."""
        key = (watch.session_key, watch.run_id)
        self._watched[key] = watch
        self._watched.move_to_end(key)
        self._handled.setdefault(key, set())
        while len(self._watched) > self.cap:
            old, _ = self._watched.popitem(last=False)
            self._handled.pop(old, None)

    def watches(self, session_key: str) -> bool:
        """A ``phase:"message"`` push for this session is worth a transcript read."""
        return any(key[0] == session_key for key in self._watched)

    def watched(self, session_key: str) -> tuple[Watch, ...]:
        return tuple(w for key, w in self._watched.items() if key[0] == session_key)

    def due(self, watch: Watch, items: tuple[MediaItem, ...]) -> Due | None:
        """Of ``items`` (the run's files in the transcript just read), those not handled yet."""
        handled = self._handled.get((watch.session_key, watch.run_id))
        if handled is None:
            return None  # no longer watched
        fresh = tuple(i for i in items if item_key(i) not in handled)
        return Due(watch, fresh) if fresh else None

    def handled(self, watch: Watch, items: tuple[MediaItem, ...]) -> None:
        """These are in the message (or named there): never again."""
        handled = self._handled.get((watch.session_key, watch.run_id))
        if handled is not None:
            handled.update(item_key(i) for i in items)

    def __len__(self) -> int:
        return len(self._watched)

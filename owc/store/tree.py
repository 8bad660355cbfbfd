"""The message tree inside ``chat.chat``: where an agent turn anchors, and the writes owc makes. Pure.

``history.messages`` is a tree keyed by id (``parentId`` / ``childrenIds``) and ``history.currentId`` the
message the user's view ends at. owc anchors a new message at the **deepest leaf of the current branch**:
from ``currentId`` it follows the newest valid child down, the way Open WebUI itself recovers a branch, so
an agent turn lands after everything the user sees, never beside it. The legacy linear ``messages`` list is
left alone, as Open WebUI's own backend writers leave it (the frontend rebuilds it on its next save).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from owc.render.status import settle
from owc.rules.finished import CORRECT_MARK, OPEN_MARK
from owc.rules.owner import CUT_OFF, EMPTY_FINISH_NOTES


class TreeError(ValueError):
    """``chat.chat`` does not hold a message tree owc can write into."""


@attrs.frozen
class Inserted:
    """What the tabs must be told about a new message: the message and its parent's new ``childrenIds``."""

    message: dict[str, Any]
    parent_id: str | None
    parent_children: tuple[str, ...]
    current_id: str


def messages_of(chat: Any) -> dict[str, Any]:
    if not isinstance(chat, dict):
        raise TreeError("chat JSON is not an object")
    history = chat.setdefault("history", {"messages": {}, "currentId": None})
    if not isinstance(history, dict):
        raise TreeError("chat.history is not an object")
    messages = history.setdefault("messages", {})
    if not isinstance(messages, dict):
        raise TreeError("chat.history.messages is not an object")
    return messages


def _valid_child(messages: dict[str, Any], parent_id: str, child_id: Any) -> bool:
    child = messages.get(child_id) if isinstance(child_id, str) else None
    return isinstance(child, dict) and child.get("parentId") == parent_id and bool(child.get("role"))


def deepest_leaf(messages: dict[str, Any], start: str) -> str:
    """From ``start``, follow the newest valid child (last in ``childrenIds`` whose ``parentId`` points back)
    until a leaf. Cycles and dangling ids end the walk instead of looping or failing."""
    seen = {start}
    current = start
    while True:
        node = messages.get(current)
        children = node.get("childrenIds") if isinstance(node, dict) else None
        if not isinstance(children, list):
            return current
        nxt = next((c for c in reversed(children) if c not in seen and _valid_child(messages, current, c)), None)
        if nxt is None:
            return current
        seen.add(nxt)
        current = nxt


def anchor(chat: dict[str, Any]) -> str | None:
    """The id a new agent-turn message goes under, or None for a chat with no messages."""
    messages = messages_of(chat)
    if not messages:
        return None
    current = chat["history"].get("currentId")
    if isinstance(current, str) and current in messages:
        return deepest_leaf(messages, current)
    # No usable currentId: the newest message (by timestamp, then insertion order) stands for the view.
    # One pass: this runs under the chat's row lock, where a chat of 20,000 messages must still cost
    # milliseconds (a quadratic version took 9 s there, past Open WebUI's 5 s busy wait).
    newest = max(
        ((_timestamp(m), index, mid) for index, (mid, m) in enumerate(messages.items()) if isinstance(m, dict)),
        default=None,
    )
    return deepest_leaf(messages, newest[2]) if newest is not None else None


def _timestamp(message: dict[str, Any]) -> float:
    ts = message.get("timestamp")
    return ts if isinstance(ts, (int, float)) and not isinstance(ts, bool) else 0


def inherited_model(chat: dict[str, Any], parent: dict[str, Any] | None) -> str | None:
    """The model a new assistant message shows: the leaf's (an assistant's ``model``, a user turn's first
    of ``models``), else the chat's first model."""
    if isinstance(parent, dict):
        if isinstance(parent.get("model"), str):
            return parent["model"]
        models = parent.get("models")
        if isinstance(models, list) and models and isinstance(models[0], str):
            return models[0]
    models = chat.get("models")
    if isinstance(models, list) and models and isinstance(models[0], str):
        return models[0]
    return None


def insert_assistant(
    chat: dict[str, Any],
    message_id: str,
    *,
    run_id: str,
    writer: str,
    user_id: str | None,
    task_id: str | None = None,
    now: int | None = None,
) -> Inserted:
    """Add an empty, unfinished assistant message at the tail (mutates ``chat``). Where runs of one session
    landed out of their start order, the finalize puts them right (``reorder_run_line``)."""
    messages = messages_of(chat)
    if message_id in messages:
        raise TreeError(f"message {message_id} already exists")
    parent_id = anchor(chat)
    parent = messages.get(parent_id) if parent_id else None
    meta: dict[str, Any] = {"openclaw_run": run_id, "openclaw_writer": writer, OPEN_MARK: True}
    if task_id is not None:
        meta["task_id"] = task_id
    message: dict[str, Any] = {
        "id": message_id,
        "parentId": parent_id,
        "childrenIds": [],
        "role": "assistant",
        "content": "",
        "output": [],
        "done": False,
        "model": inherited_model(chat, parent),
        "timestamp": int(time.time()) if now is None else now,
        "meta": meta,
    }
    if user_id is not None:
        message["user_id"] = user_id
    messages[message_id] = message
    children: tuple[str, ...] = ()
    if isinstance(parent, dict):
        child_ids = parent.get("childrenIds")
        if not isinstance(child_ids, list):
            child_ids = parent["childrenIds"] = []
        if message_id not in child_ids:
            child_ids.append(message_id)
        children = tuple(child_ids)
    chat["history"]["currentId"] = message_id
    return Inserted(message=message, parent_id=parent_id, parent_children=children, current_id=message_id)


def insert_user_turn(
    chat: dict[str, Any], user_message_id: str, reply_id: str, *, text: str, user_id: str | None, now: int
) -> list[dict[str, Any]]:
    """A user message at the tail and Open WebUI's empty placeholder for its reply under it, as Open WebUI's
    ``insert_chat_turn`` writes them when a request starts (mutates ``chat``; returns both messages). The
    placeholder has no ``openclaw_writer``: the Pipe's request streams it, and if that request dies it is an
    orphan stub (seed P20)."""
    messages = messages_of(chat)
    parent_id = anchor(chat)
    parent = messages.get(parent_id) if parent_id else None
    model = inherited_model(chat, parent)
    user = {
        "id": user_message_id, "parentId": parent_id, "childrenIds": [reply_id], "role": "user", "content": text,
        "models": [model] if model else [], "timestamp": now, "user_id": user_id,
    }  # fmt: skip
    reply = {
        "id": reply_id, "parentId": user_message_id, "childrenIds": [], "role": "assistant", "content": "",
        "done": False, "model": model, "timestamp": now, "user_id": user_id,
    }  # fmt: skip
    messages[user_message_id], messages[reply_id] = user, reply
    if parent is not None:
        parent["childrenIds"] = [*(parent.get("childrenIds") or []), user_message_id]
    chat["history"]["currentId"] = reply_id
    return [user, reply]


def reorder_run_line(chat: dict[str, Any], message_id: str, order: Sequence[str]) -> list[dict[str, Any]]:
    """Put the unbroken line of owc's messages around ``message_id`` whose runs ``order`` names (a session's
    runs in transcript order, which is their start order) in that order (mutates ``chat``); returns the
    messages whose links changed (empty: already in order). The line is followed up through parents and down
    through only children; it stops at anything else (a user turn, a run ``order`` does not name, a branch), so
    nothing outside it moves.

    Why: a run claimed live, without its transcript, lands at the tail; another process that never saw it begin
    may have given a later run of the same session its message first. The transcript read at the run's end
    puts the line right (issue 11: fuzzer seeds 432, 1830, 5314)."""
    messages = messages_of(chat)
    rank = {run_id: index for index, run_id in enumerate(order)}

    def run_of(node_id: Any) -> int | None:
        node = messages.get(node_id) if isinstance(node_id, str) else None
        meta = node.get("meta") if isinstance(node, dict) else None
        run_id = meta.get("openclaw_run") if isinstance(meta, dict) else None
        if isinstance(node, dict) and node.get("role") == "assistant" and node.get("id") == node_id:
            return rank.get(run_id) if isinstance(run_id, str) else None
        return None

    if run_of(message_id) is None:
        return []
    line, seen = [message_id], {message_id}
    parent = messages[message_id].get("parentId")
    while run_of(parent) is not None and parent not in seen:
        line.insert(0, parent)
        seen.add(parent)
        parent = messages[parent].get("parentId")
    while True:
        children = messages[line[-1]].get("childrenIds")
        if not (isinstance(children, list) and len(children) == 1 and run_of(children[0]) is not None):
            break
        child = children[0]
        if child in seen or messages[child].get("parentId") != line[-1]:
            break
        line.append(child)
        seen.add(child)
    ordered = sorted(line, key=lambda node_id: rank[messages[node_id]["meta"]["openclaw_run"]])
    if ordered == line:
        return []
    above_id = messages[line[0]].get("parentId")
    above = messages.get(above_id) if isinstance(above_id, str) else None
    below = [c for c in (messages[line[-1]].get("childrenIds") or []) if isinstance(c, str)]
    changed: dict[str, dict[str, Any]] = {}
    if isinstance(above, dict):
        above["childrenIds"] = [ordered[0] if c == line[0] else c for c in (above.get("childrenIds") or [])]
        changed[above["id"]] = above
    for index, node_id in enumerate(ordered):
        node = messages[node_id]
        node["parentId"] = above_id if index == 0 else ordered[index - 1]
        node["childrenIds"] = [ordered[index + 1]] if index + 1 < len(ordered) else below
        changed[node_id] = node
    for child_id in below:
        child = messages.get(child_id)
        if isinstance(child, dict):
            child["parentId"] = ordered[-1]
            changed[child_id] = child
    if chat["history"].get("currentId") in seen:
        chat["history"]["currentId"] = deepest_leaf(messages, ordered[-1])  # the view stays on the tail
    return list(changed.values())


def update_message(
    chat: dict[str, Any],
    message_id: str,
    *,
    content: str,
    output: list[Any],
    done: bool,
    error: str | None = None,
    meta: dict[str, Any] | None = None,
    continues: bool = False,
    fills: bool = False,
    status: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """Write a message's content and output (a handover or the finalize); mutates ``chat``. ``status``: entries for
    its ``statusHistory`` (``add_status``); a write that finishes it closes a line left open. ``continues``: the write
    of a continuation of the message's cut run (a recovery linked by rule E, a resume): a cut-off note an earlier
    finish of the message left (``CUT_OFF``: the cut run's own finish, by a process that did not see it continued)
    goes, since the run was continued after all (fuzz seed 40434: the note stayed under the recovery's text).
    ``fills``: a correction from the transcript; the note of an empty finish (``EMPTY_FINISH_NOTES``) goes, since
    the message is no longer empty."""
    messages = messages_of(chat)
    message = messages.get(message_id)
    if not isinstance(message, dict):
        raise TreeError(f"message {message_id} is not in the chat")
    message["content"] = strip_nul(content)
    message["output"] = strip_nul(output)
    message["done"] = done
    if error is not None:
        message["error"] = {"content": strip_nul(error)}
    elif continues and _is_cut_off(message.get("error")):
        del message["error"]
    elif fills and output and _is_nothing_saved(message.get("error")):
        del message["error"]
    old = message.get("meta") if isinstance(message.get("meta"), dict) else {}
    merged = {**old, **(meta or {})}
    # Owed until written finished (``OPEN_MARK``): a later save of Open WebUI's that says ``done`` keeps the mark.
    if done:
        merged.pop(OPEN_MARK, None)
        if not (meta or {}).get(CORRECT_MARK):
            merged.pop(CORRECT_MARK, None)  # only the finishing write that sets it again keeps it
    else:
        merged[OPEN_MARK] = True
    if merged or "meta" in message:
        message["meta"] = merged
    add_status(message, status, finished=done)
    return message


def merge_files(
    existing: Any, new: Sequence[Mapping[str, Any]], *, key: str = "openclaw_artifact"
) -> tuple[list[Any], bool]:
    """M's ``files`` with ``new`` added after what it holds: an entry whose ``key`` is already there is not added
    again (a second pass over the same transcript adds nothing); entries of others (a file Open WebUI or a person
    put there) are kept as they are. Whether anything was added."""
    merged = list(existing) if isinstance(existing, list) else []
    have = {f.get(key) for f in merged if isinstance(f, Mapping) and f.get(key)}
    gained = False
    for entry in new:
        mark = entry.get(key)
        if mark and mark in have:
            continue
        merged.append(dict(entry))
        have.add(mark)
        gained = True
    return merged, gained


def add_status(
    message: dict[str, Any], entries: Sequence[Mapping[str, Any]], *, finished: bool
) -> list[dict[str, Any]]:
    """Append ``entries`` to the message's ``statusHistory`` (Open WebUI's list of its status lines, as
    ``Chats.add_message_status_to_chat_by_id_and_message_id`` appends them), and, when the message is written
    finished, the closing of a line it would leave open (``owc.render.status.settle``). Returns what was appended."""
    history = message.get("statusHistory")
    history = history if isinstance(history, list) else []
    added = settle(history, entries, finished=finished)
    if added:
        message["statusHistory"] = [*history, *added]
    return added


def _is_cut_off(error: Any) -> bool:
    return isinstance(error, dict) and str(error.get("content") or "").startswith(CUT_OFF)


def _is_nothing_saved(error: Any) -> bool:
    return isinstance(error, dict) and str(error.get("content") or "").startswith(EMPTY_FINISH_NOTES)


def strip_nul(value: Any) -> Any:
    """Remove NUL characters, as Open WebUI's ``sanitize_data_for_db`` does (PostgreSQL text cannot hold them)."""
    if isinstance(value, str):
        return value.replace("\x00", "") if "\x00" in value else value
    if isinstance(value, list):
        return [strip_nul(v) for v in value]
    if isinstance(value, dict):
        return {k: strip_nul(v) for k, v in value.items()}
    return value


def continued_past(message: dict[str, Any], run_id: str) -> bool:
    """The message's chain (``meta.openclaw_chain``: the runs it holds, in order) goes on past ``run_id``: a
    continuation of that run has written it."""
    meta = message.get("meta")
    chain = meta.get("openclaw_chain") if isinstance(meta, dict) else None
    if not isinstance(chain, list) or run_id not in chain:
        return False
    return chain.index(run_id) < len(chain) - 1


def holds_run(message: dict[str, Any], run_id: str) -> bool:
    """The message's chain (``meta.openclaw_chain``) names ``run_id``: that run's part is in it."""
    meta = message.get("meta")
    chain = meta.get("openclaw_chain") if isinstance(meta, dict) else None
    return isinstance(chain, list) and run_id in chain


def remove_message(chat: dict[str, Any], message_id: str) -> list[dict[str, Any]]:
    """Take ``message_id`` out of the tree (mutates ``chat``): its children hang from its parent, in its place among
    the parent's children, and a view that ended at it moves to the deepest leaf below its parent. Returns the
    messages whose links changed (the parent, the children), for the ``chat_message`` mirror and the tabs.

    Why: two deploys, a crash under a run that had stored nothing; the deploy back first gave the boot's recovery a
    message of its own (it could not name the run recovered), the other then held the cut run's message. The two
    become one (``ChatStore.absorb_recovery``): the recovery's message goes (issue 24, item 4's shape D)."""
    messages = messages_of(chat)
    message = messages.pop(message_id, None)
    if not isinstance(message, dict):
        return []
    parent_id = message.get("parentId")
    parent = messages.get(parent_id) if isinstance(parent_id, str) else None
    children = [
        c for c in (message.get("childrenIds") or []) if isinstance(c, str) and isinstance(messages.get(c), dict)
    ]
    changed: dict[str, dict[str, Any]] = {}
    if isinstance(parent, dict):
        siblings = [c for c in (parent.get("childrenIds") or []) if isinstance(c, str)]
        if message_id in siblings:
            at = siblings.index(message_id)
            siblings[at : at + 1] = [c for c in children if c not in siblings]
        else:
            siblings.extend(c for c in children if c not in siblings)
        parent["childrenIds"] = siblings
        changed[parent["id"] if isinstance(parent.get("id"), str) else parent_id] = parent
    for child_id in children:
        child = messages[child_id]
        child["parentId"] = parent_id if isinstance(parent, dict) else None
        changed[child_id] = child
    history = chat["history"]
    if history.get("currentId") == message_id:
        if children:
            history["currentId"] = deepest_leaf(messages, children[-1])
        elif isinstance(parent, dict):
            history["currentId"] = deepest_leaf(messages, parent_id)
        else:
            history["currentId"] = None
    return list(changed.values())


def above(messages: dict[str, Any], upper: str, lower: str) -> bool:
    """Message ``upper`` is an ancestor of ``lower`` (``lower`` hangs somewhere below it)."""
    seen: set[str] = set()
    node = messages.get(lower)
    while isinstance(node, dict) and isinstance(node.get("parentId"), str) and node["parentId"] not in seen:
        parent_id = node["parentId"]
        if parent_id == upper:
            return True
        seen.add(parent_id)
        node = messages.get(parent_id)
    return False


def take_place(chat: dict[str, Any], message_id: str, of: str) -> list[dict[str, Any]]:
    """Move ``message_id`` into the place of message ``of``, which goes (mutates ``chat``): ``message_id`` leaves its
    own place (``remove_message``: its children hang from its parent) and takes ``of``'s parent and children. Returns
    the messages whose links changed, ``message_id`` among them.

    Why: a cut run's message M made after its recovery's own message and a later run's (the process holding the cut
    came back last) lies below both; made one reply with the recovery's (``ChatStore.absorb_recovery``), it goes
    where the recovery's message was, above the later run's, in run-start order (fuzz seed 41332, shrunk)."""
    messages = messages_of(chat)
    message, old = messages.get(message_id), messages.get(of)
    if not isinstance(message, dict) or not isinstance(old, dict) or message_id == of:
        return []
    changed = {id(m): m for m in remove_message(chat, message_id) if isinstance(m, dict)}
    messages[message_id] = message
    parent_id = old.get("parentId")
    parent = messages.get(parent_id) if isinstance(parent_id, str) else None
    children = [c for c in (old.get("childrenIds") or []) if isinstance(c, str) and isinstance(messages.get(c), dict)]
    message["parentId"], message["childrenIds"] = parent_id if isinstance(parent, dict) else None, children
    changed[id(message)] = message
    if isinstance(parent, dict):
        parent["childrenIds"] = [message_id if c == of else c for c in (parent.get("childrenIds") or [])]
        changed[id(parent)] = parent
    for child_id in children:
        messages[child_id]["parentId"] = message_id
        changed[id(messages[child_id])] = messages[child_id]
    del messages[of]
    history = chat["history"]
    if history.get("currentId") in (of, message_id) or history.get("currentId") not in messages:
        history["currentId"] = deepest_leaf(messages, message_id)
    changed.pop(id(old), None)
    return list(changed.values())

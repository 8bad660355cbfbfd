"""The variant groups the old Pipe's proactive path left in chats, and their repair (issue 30; seed 000 section 4,
condition G). Pure: a chat's JSON in, a new JSON (or a refusal naming the broken invariant) out.

How the old path made them (inventory E1, E2, section 3.6): a cron wake, a heartbeat, a ``sessions_send`` or a
sub-agent's end was written as a new assistant message, ``*↳ Proactive message*`` / ``*↳ Sub-agent finished...*``
(+ ``<!-- openclaw:taskId=... -->``), under the chat's deepest leaf *at that moment* (``_deepest_leaf_id``: the old
leaf's ``childrenIds`` patched first). An open tab did not see it, so the person's next message went under the
same old leaf: the old leaf then had two children, the bubble and the person's turn, and Open WebUI shows them as
a 1/2 · 2/2 swipe where the chat was one line. The old Pipe healed a group only when the person next wrote in that
chat; 87 such groups were left in one real database.

**The rule that tells them from a person's own variants** (a regeneration or an edit is a sibling group too, and
must not move). A group under parent X is the old path's when:

1. at least one child of X is an old bubble (``is_old_bubble``): an assistant message, not owc's (no
   ``meta.openclaw_run``), whose text starts with ``*↳ Proactive message*`` or ``*↳ Sub-agent`` or holds the
   ``<!-- openclaw:taskId=`` marker;
2. each bubble child heads a chain of bubbles only, one child each (the old path chained later bubbles under the
   first: it followed the newest child down). A bubble with anything else under it is a branch a person continued;
3. at most one child is not a bubble, and it is a **user** message (the person's next turn, typed in a tab that
   had not seen the bubble). Two or more others are the person's own edits or regenerations; an assistant beside
   a bubble is a regeneration of it. Either way the group is kept as it is, and named;
4. time agrees: the bubbles were written when X was still a leaf, so every bubble is no newer than the person's
   turn beside them (``timestamp``, seconds), and the chains put end to end run forward in time.

The repair puts each such group in one line, in time order: X -> bubble chain(s) (oldest first) -> the person's
turn with everything under it. Groups nested under bubbles are done first (a pass repeats until nothing changes).
Nothing else moves: message texts, the legacy ``messages`` list and every other key stay; only ``parentId``,
``childrenIds``, the replies' ``done`` and ``currentId`` change.

A repaired chat must then hold (``violations``): the same messages with the same content; every link both ways
(``parentId`` <-> ``childrenIds``, no duplicates, no cycle, the same roots); each repaired group one line;
``currentId`` a leaf at the end of the line it was on; every reply (assistant message) ``done: true``. The old
bubbles were written without ``done`` (Open WebUI then shows no toolbar under them): they get ``done: true``. A
reply with ``done: false`` is either being written now (by owc or Open WebUI) or a stub the old Pipe left; the
repair would have to finish it, so the chat is refused and named instead. User messages carry no ``done`` in Open
WebUI's own shape (its frontend never writes one), so "every message done" means every reply.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

#: How the old Pipe's proactive bubbles begin (inventory 3.6: ``*↳ Proactive message*\n\n<text>``,
#: ``*↳ Sub-agent finished: <title>*\n\n<text>\n\n<!-- openclaw:taskId=<id> -->``).
PROACTIVE_HEADER = "*↳ Proactive message*"
SUBAGENT_HEADER = "*↳ Sub-agent"
TASK_MARK = "<!-- openclaw:taskId="


def is_old_bubble(message: Any) -> bool:
    """A message the old Pipe's proactive path wrote: an assistant message, none of owc's, with its header or the
    sub-agent task marker."""
    if not isinstance(message, Mapping) or message.get("role") != "assistant":
        return False
    meta = message.get("meta")
    if isinstance(meta, Mapping) and meta.get("openclaw_run"):
        return False
    content = message.get("content")
    if not isinstance(content, str):
        return False
    head = content.lstrip()
    return head.startswith(PROACTIVE_HEADER) or head.startswith(SUBAGENT_HEADER) or TASK_MARK in content


@attrs.frozen
class Group:
    """One repaired group: under ``parent``, the bubbles (every message of their chains, in their new order) and
    then ``continuation`` (the person's turn; None: bubbles only)."""

    parent: str
    bubbles: tuple[str, ...]
    continuation: str | None


@attrs.frozen
class Kept:
    """A sibling group with an old bubble in it that is left as it is, and why (a person's own variants)."""

    parent: str
    children: tuple[str, ...]
    why: str


@attrs.frozen
class Moved:
    message: str
    parent_before: str | None
    parent_after: str | None


@attrs.frozen
class Repair:
    """The repaired chat (a new JSON; the input is not changed) and what changed."""

    chat: dict[str, Any]
    groups: tuple[Group, ...]
    kept: tuple[Kept, ...]
    moved: tuple[Moved, ...]
    #: Replies given ``done: true`` (they had none: the old bubbles).
    finished: tuple[str, ...]
    current_before: str | None
    current_after: str | None
    #: The line the view shows (root ... currentId) before and after.
    line_before: tuple[str, ...]
    line_after: tuple[str, ...]
    count: int  # messages, before and after alike

    @property
    def changed_ids(self) -> tuple[str, ...]:
        """Every message whose stored form changed (its links or its ``done``), in the chat's order."""
        messages = self.chat["history"]["messages"]
        touched = {m.message for m in self.moved} | set(self.finished)
        for group in self.groups:
            touched.add(group.parent)
            touched.update(group.bubbles)
        return tuple(mid for mid in messages if mid in touched)


@attrs.frozen
class Refusal:
    """The chat has old groups, but repairing it would break an invariant (``why``): it is left as it is."""

    why: str
    groups: tuple[Group, ...] = ()
    kept: tuple[Kept, ...] = ()


@attrs.frozen
class NothingToDo:
    """No group of the old path's (``kept``: groups with a bubble that are a person's own variants)."""

    kept: tuple[Kept, ...] = ()


Plan = Repair | Refusal | NothingToDo


def _messages(chat: Any) -> dict[str, Any] | None:
    history = chat.get("history") if isinstance(chat, Mapping) else None
    messages = history.get("messages") if isinstance(history, Mapping) else None
    return messages if isinstance(messages, dict) else None


def _kids(messages: Mapping[str, Any], mid: str) -> list[Any]:
    node = messages.get(mid)
    kids = node.get("childrenIds") if isinstance(node, Mapping) else None
    return list(kids) if isinstance(kids, list) else []


def _ts(message: Any) -> float | None:
    ts = message.get("timestamp") if isinstance(message, Mapping) else None
    return ts if isinstance(ts, (int, float)) and not isinstance(ts, bool) else None


def _bubble_chain(messages: Mapping[str, Any], start: str) -> list[str] | None:
    """The chain of bubbles from ``start`` down (each with at most one child, pointing back), or None when
    anything else hangs below it."""
    chain, seen, current = [start], {start}, start
    while True:
        if not is_old_bubble(messages.get(current)):
            return None
        kids = _kids(messages, current)
        if not kids:
            return chain
        if len(kids) > 1:
            return None
        nxt = kids[0]
        node = messages.get(nxt) if isinstance(nxt, str) else None
        if not isinstance(node, Mapping) or node.get("parentId") != current or nxt in seen:
            return None
        chain.append(nxt)
        seen.add(nxt)
        current = nxt


def _judge(messages: Mapping[str, Any], parent: str) -> tuple[list[list[str]], str | None] | str | None:
    """A sibling group under ``parent``: None (no bubble in it: not the old path's, not reported), a reason to
    keep it (str), or its repair: the bubble chains in time order and the continuation."""
    kids = _kids(messages, parent)
    if len(kids) < 2:
        return None
    if not any(is_old_bubble(messages.get(k)) for k in kids if isinstance(k, str)):
        return None
    for k in kids:
        node = messages.get(k) if isinstance(k, str) else None
        if not isinstance(node, Mapping) or node.get("parentId") != parent or kids.count(k) > 1:
            return f"its links are inconsistent ({str(k)[:40]} does not point back to {parent})"
    bubbles = [k for k in kids if is_old_bubble(messages[k])]
    others = [k for k in kids if k not in bubbles]
    if len(others) > 1:
        return f"beside {len(others)} other replies or edits: a person's own variants"
    if others and messages[others[0]].get("role") != "user":
        role = str(messages[others[0]].get("role"))[:20]
        return f"beside a message of role {role!r}, not a person's turn: a regeneration"
    chains: list[list[str]] = []
    for b in bubbles:
        chain = _bubble_chain(messages, b)
        if chain is None:
            return f"bubble {b} has other messages under it: a branch a person continued"
        chains.append(chain)
    order = {k: i for i, k in enumerate(kids)}
    if any(_ts(messages[c[0]]) is None for c in chains):
        return "a bubble has no timestamp to order it by"
    chains.sort(key=lambda c: (_ts(messages[c[0]]), order[c[0]]))
    line = [mid for chain in chains for mid in chain] + others
    stamps = [_ts(messages[mid]) for mid in line]
    if any(s is None for s in stamps):
        return "a message has no timestamp to order it by"
    for a, b in zip(line, line[1:]):
        if _ts(messages[a]) > _ts(messages[b]):  # type: ignore[operator]
            return f"not in time order: {a} is newer than {b}, which would follow it"
    return chains, (others[0] if others else None)


def _relink(messages: dict[str, Any], parent: str, chains: list[list[str]], continuation: str | None) -> Group:
    """Put one judged group in a line (mutates ``messages``)."""
    line = [mid for chain in chains for mid in chain]
    messages[parent]["childrenIds"] = [line[0]]
    messages[line[0]]["parentId"] = parent
    tails = [chain[-1] for chain in chains]
    heads = [chain[0] for chain in chains[1:]] + ([continuation] if continuation is not None else [])
    for tail, head in zip(tails, heads):
        messages[tail]["childrenIds"] = [head]
        messages[head]["parentId"] = tail
    return Group(parent=parent, bubbles=tuple(line), continuation=continuation)


def _leaf_below(messages: Mapping[str, Any], start: str) -> str:
    """From ``start``, the newest valid child down to a leaf (Open WebUI's own way of extending a branch)."""
    seen, current = {start}, start
    while True:
        kids = _kids(messages, current)
        nxt = next(
            (
                k
                for k in reversed(kids)
                if isinstance(k, str)
                and k not in seen
                and isinstance(messages.get(k), Mapping)
                and messages[k].get("parentId") == current
            ),
            None,
        )
        if nxt is None:
            return current
        seen.add(nxt)
        current = nxt


def line_to(messages: Mapping[str, Any], mid: Any) -> tuple[str, ...]:
    """The parent chain from the root down to ``mid`` (empty for an id that is not a message)."""
    line: list[str] = []
    seen: set[str] = set()
    while isinstance(mid, str) and isinstance(messages.get(mid), Mapping) and mid not in seen:
        line.append(mid)
        seen.add(mid)
        mid = messages[mid].get("parentId")
    return tuple(reversed(line))


def _kept(messages: Mapping[str, Any]) -> tuple[Kept, ...]:
    out = []
    for mid in messages:
        verdict = _judge(messages, mid)
        if isinstance(verdict, str):
            out.append(Kept(parent=mid, children=tuple(str(k) for k in _kids(messages, mid)), why=verdict))
    return tuple(out)


def plan(chat: Any) -> Plan:
    """The repair of one chat's JSON (``chat.chat``), never changing ``chat``: a ``Repair`` holding the new JSON,
    a ``Refusal`` naming the invariant the repair would break, or ``NothingToDo``."""
    messages_in = _messages(chat)
    if not messages_in or not all(isinstance(m, dict) for m in messages_in.values()):
        return NothingToDo()
    new = copy.deepcopy(chat)
    messages = _messages(new)
    assert messages is not None
    groups: list[Group] = []
    changed = True
    while changed:  # nested groups first: each pass repairs what is ready; a repaired group never comes back
        changed = False
        for mid in list(messages):
            verdict = _judge(messages, mid)
            if isinstance(verdict, tuple):
                groups.append(_relink(messages, mid, *verdict))
                changed = True
    kept = _kept(messages)
    if not groups:
        return NothingToDo(kept=kept)
    finished = []
    for mid, message in messages.items():
        if message.get("role") != "assistant" or message.get("done") is True:
            continue
        if message.get("done") is False:
            return Refusal(
                f"reply {mid} is unfinished (done: false): a reply being written now, or a stub the old Pipe left",
                tuple(groups),
                kept,
            )
        message["done"] = True
        finished.append(mid)
    history = new["history"]
    current_before = history.get("currentId")
    if isinstance(current_before, str) and current_before in messages:
        current_after = _leaf_below(messages, current_before)
    else:  # no usable view: the newest message's line stands for it
        newest = max((_ts(m) or 0, i, k) for i, (k, m) in enumerate(messages.items()))
        current_after = _leaf_below(messages, newest[2])
    history["currentId"] = current_after
    moved = tuple(
        Moved(mid, messages_in[mid].get("parentId"), messages[mid].get("parentId"))
        for mid in messages
        if messages_in[mid].get("parentId") != messages[mid].get("parentId")
    )
    repair = Repair(
        chat=new,
        groups=tuple(groups),
        kept=kept,
        moved=moved,
        finished=tuple(finished),
        current_before=current_before if isinstance(current_before, str) else None,
        current_after=current_after,
        line_before=line_to(messages_in, current_before),
        line_after=line_to(messages, current_after),
        count=len(messages),
    )
    broken = violations(chat, repair)
    if broken is not None:
        return Refusal(broken, tuple(groups), kept)
    return repair


def _links(messages: Mapping[str, Any]) -> str | None:
    """The first link that does not hold both ways, or a cycle; None when the tree is sound."""
    for mid, message in messages.items():
        parent = message.get("parentId")
        if parent is not None:
            owner = messages.get(parent)
            if not isinstance(owner, Mapping):
                return f"message {mid}'s parent {parent} is not in the chat"
            if _kids(messages, parent).count(mid) != 1:
                return f"message {mid} is not listed once among its parent {parent}'s children"
        kids = _kids(messages, mid)
        if len(set(map(str, kids))) != len(kids):
            return f"message {mid} lists a child twice"
        for k in kids:
            child = messages.get(k) if isinstance(k, str) else None
            if not isinstance(child, Mapping) or child.get("parentId") != mid:
                return f"message {mid} lists {str(k)[:40]} as a child, which does not point back"
    rooted: set[str] = set()  # messages known to reach a root
    for mid in messages:
        path: list[str] = []
        on_path: set[str] = set()
        node: Any = mid
        while isinstance(node, str) and node not in rooted:
            if node in on_path:
                return f"message {node} is in a cycle"
            path.append(node)
            on_path.add(node)
            node = messages[node].get("parentId")
        rooted.update(path)
    return None


def violations(before: Any, repair: Repair) -> str | None:
    """The first invariant the repaired chat breaks, in words; None when it holds them all."""
    old, new = _messages(before) or {}, repair.chat["history"]["messages"]
    if set(old) != set(new):
        lost, added = set(old) - set(new), set(new) - set(old)
        return f"messages lost {sorted(lost)[:3]} or added {sorted(added)[:3]}"
    for mid, message in old.items():
        for key in set(message) | set(new[mid]):
            if key in ("parentId", "childrenIds", "done"):
                continue
            if message.get(key) != new[mid].get(key):
                return f"message {mid}'s {key} would change"
        if message.get("done") != new[mid].get("done") and not (
            new[mid].get("role") == "assistant" and new[mid].get("done") is True and message.get("done") is not False
        ):
            return f"message {mid}'s done would change"
    broken = _links(new)
    if broken is not None:
        return broken
    if {m for m in old if old[m].get("parentId") is None} != {m for m in new if new[m].get("parentId") is None}:
        return "the chat's first messages (roots) would change"
    for group in repair.groups:
        line = line_to(new, group.continuation or group.bubbles[-1])
        want = [group.parent, *group.bubbles] + ([group.continuation] if group.continuation else [])
        if list(line[-len(want) :]) != want or len(_kids(new, group.parent)) != 1:
            return f"the group under {group.parent} would not be one line"
    current = repair.chat["history"].get("currentId")
    if not isinstance(current, str) or current not in new or _kids(new, current):
        return "currentId would not end a line"
    for mid, message in new.items():
        if message.get("role") == "assistant" and message.get("done") is not True:
            return f"reply {mid} would not be done"
    return None


def summary(plans: Iterable[Plan]) -> dict[str, int]:
    """Counts for a one-line report: chats repaired / refused, groups repaired / kept."""
    counts = {"repaired": 0, "refused": 0, "groups": 0, "kept": 0}
    for p in plans:
        if isinstance(p, Repair):
            counts["repaired"] += 1
            counts["groups"] += len(p.groups)
        elif isinstance(p, Refusal):
            counts["refused"] += 1
        counts["kept"] += len(p.kept)
    return counts

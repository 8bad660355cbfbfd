"""The variant-group rule and its repair (owc/rules/variants.py, issue 30): the old Pipe's fixture chats, then
properties over chats made by a model of the old Pipe's proactive path and a person's own regenerations and edits."""

from __future__ import annotations

import ast
import copy
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from old_pipe_fixture import CHATS, proactive, subagent

from owc.rules import variants

ROOT = Path(__file__).resolve().parents[1]


def _messages(chat: dict[str, Any]) -> dict[str, Any]:
    return chat["history"]["messages"]


def test_pure():
    """The rule imports no I/O shell and no Trio (the core's rule, tests/test_core_purity.py)."""
    tree = ast.parse((ROOT / "owc/rules/variants.py").read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    forbidden = ("trio", "anyio", "sqlalchemy", "owc.store", "owc.gateway", "owc.runs", "owc.owui", "owc.emit")
    assert not [n for n in names if n.startswith(forbidden)], names


def test_bubbles_are_told_by_their_header_or_marker():
    assert variants.is_old_bubble({"role": "assistant", "content": proactive("hi")})
    assert variants.is_old_bubble({"role": "assistant", "content": subagent("x", "t1")})
    assert variants.is_old_bubble({"role": "assistant", "content": subagent("x", "t1", title=None)})
    assert variants.is_old_bubble({"role": "assistant", "content": "done\n\n<!-- openclaw:taskId=t9 -->"})
    assert not variants.is_old_bubble({"role": "user", "content": proactive("quoted by a person")})
    assert not variants.is_old_bubble({"role": "assistant", "content": "A *↳ Proactive message* quoted mid-text"})
    owc_message = {"role": "assistant", "content": proactive("x"), "meta": {"openclaw_run": "r1"}}
    assert not variants.is_old_bubble(owc_message)


def test_fixture_chats():
    for fc in CHATS:
        before = copy.deepcopy(fc.chat)
        plan = variants.plan(fc.chat)
        assert fc.chat == before, "the planner changed its input"
        kind = {"repair": variants.Repair, "keep": variants.NothingToDo, "refuse": variants.Refusal}[fc.expect]
        assert isinstance(plan, kind), (fc.chat_id, plan)
        if isinstance(plan, variants.Repair):
            new = _messages(plan.chat)
            assert variants.plan(plan.chat) == variants.NothingToDo(kept=plan.kept)  # idempotent
            for parent, children in fc.real_groups:  # a person's own variants never move
                assert tuple(new[parent]["childrenIds"]) == children
            assert all(m["content"] == _messages(fc.chat)[k]["content"] for k, m in new.items())


def test_classic_group_becomes_one_line():
    fc = next(c for c in CHATS if c.chat_id == "c1-proactive")
    plan = variants.plan(fc.chat)
    assert isinstance(plan, variants.Repair)
    assert plan.line_before == ("c1-u1", "c1-a1", "c1-u2", "c1-a2")
    assert plan.line_after == ("c1-u1", "c1-a1", "c1-p1", "c1-u2", "c1-a2")
    assert plan.current_after == "c1-a2" and plan.chat["history"]["currentId"] == "c1-a2"
    assert plan.finished == ("c1-p1",) and _messages(plan.chat)["c1-p1"]["done"] is True
    assert plan.moved == (variants.Moved("c1-u2", "c1-a1", "c1-p1"),)
    assert plan.chat["messages"] == fc.chat["messages"]  # the legacy list is left to Open WebUI


def test_stale_view_on_the_bubble_moves_to_the_end_of_the_line():
    fc = next(c for c in CHATS if c.chat_id == "c1-proactive")
    chat = copy.deepcopy(fc.chat)
    chat["history"]["currentId"] = "c1-p1"  # the view ended at the bubble (a reload after it)
    plan = variants.plan(chat)
    assert isinstance(plan, variants.Repair) and plan.current_after == "c1-a2"


def test_refusals_name_the_invariant():
    fc = next(c for c in CHATS if c.chat_id == "c1-proactive")
    chat = copy.deepcopy(fc.chat)
    _messages(chat)["c1-a2"]["childrenIds"].append("ghost")  # a dangling link elsewhere in the chat
    plan = variants.plan(chat)
    assert isinstance(plan, variants.Refusal) and "ghost" in plan.why
    chat = copy.deepcopy(fc.chat)
    _messages(chat)["c1-p1"]["timestamp"] = _messages(chat)["c1-u2"]["timestamp"] + 5  # newer than the turn
    plan = variants.plan(chat)
    assert isinstance(plan, variants.NothingToDo) and "time order" in plan.kept[0].why


# ---------------------------------------------------------------- properties


class _World:
    """The old Pipe's chat as a timeline: a person's tab (its view), the database's ``currentId``, and the old
    proactive path writing at the database's deepest leaf while the tab does not see it."""

    def __init__(self) -> None:
        self.messages: dict[str, dict[str, Any]] = {}
        self.view: str | None = None
        self.db_current: str | None = None
        self.t = 1_000
        self.n = 0

    def _add(self, role: str, parent: str | None, content: str, **extra: Any) -> str:
        self.n += 1
        self.t += 1
        mid = f"m{self.n}"
        self.messages[mid] = {
            "id": mid, "parentId": parent, "childrenIds": [], "role": role, "content": content,
            "timestamp": self.t, **extra,
        }  # fmt: skip
        if parent is not None:
            self.messages[parent]["childrenIds"].append(mid)
        return mid

    def _deepest(self, start: str | None) -> str | None:
        while start is not None and self.messages[start]["childrenIds"]:
            start = self.messages[start]["childrenIds"][-1]
        return start

    def turn(self) -> None:
        u = self._add("user", self.view, f"question {self.n}")
        self.view = self.db_current = self._add("assistant", u, f"answer {self.n}", done=True)

    def bubble(self, sub: bool) -> None:
        leaf = self._deepest(self.db_current)
        if leaf is None:
            return
        text = subagent(f"result {self.n}", f"task-{self.n}") if sub else proactive(f"wake {self.n}")
        self.db_current = self._add("assistant", leaf, text)  # the tab's view stays where it was

    def reload(self) -> None:
        self.view = self._deepest(self.db_current)

    def regenerate(self) -> None:
        if self.view is None or self.messages[self.view]["role"] != "assistant":
            return
        parent = self.messages[self.view]["parentId"]
        self.view = self.db_current = self._add("assistant", parent, f"again {self.n}", done=True)

    def edit(self) -> None:
        node = self.view
        while node is not None and self.messages[node]["role"] != "user":
            node = self.messages[node]["parentId"]
        if node is None:
            return
        u = self._add("user", self.messages[node]["parentId"], f"edited {self.n}")
        self.view = self.db_current = self._add("assistant", u, f"answer {self.n}", done=True)

    def chat(self) -> dict[str, Any]:
        return {"id": "c", "title": "t", "history": {"messages": self.messages, "currentId": self.view}, "messages": []}


def _world(actions: list[str]) -> dict[str, Any]:
    w = _World()
    w.turn()
    for a in actions:
        {
            "turn": w.turn, "bubble": lambda: w.bubble(False), "subagent": lambda: w.bubble(True),
            "reload": w.reload, "regenerate": w.regenerate, "edit": w.edit,
        }[a]()  # fmt: skip
    return w.chat()


OLD_PATH = st.lists(st.sampled_from(["turn", "bubble", "subagent", "reload"]), max_size=30)
WITH_PERSON = st.lists(st.sampled_from(["turn", "bubble", "subagent", "reload", "regenerate", "edit"]), max_size=30)


def _check(before: dict[str, Any], plan: variants.Plan) -> dict[str, Any]:
    """Independent of the planner's own check: nothing lost, links both ways, time order along every link, the
    view a leaf, every reply done, and idempotent."""
    assert not isinstance(plan, variants.Refusal), plan
    if isinstance(plan, variants.NothingToDo):
        return before
    after = plan.chat
    old, new = _messages(before), _messages(after)
    assert set(old) == set(new)
    for mid, m in new.items():
        assert m["content"] == old[mid]["content"] and m["role"] == old[mid]["role"]
        if m["parentId"] is not None:
            assert new[m["parentId"]]["childrenIds"].count(mid) == 1
            assert new[m["parentId"]]["timestamp"] <= m["timestamp"]
        for c in m["childrenIds"]:
            assert new[c]["parentId"] == mid
        if m["role"] == "assistant":
            assert m["done"] is True
    current = after["history"]["currentId"]
    assert current in new and not new[current]["childrenIds"]
    assert isinstance(variants.plan(after), variants.NothingToDo)
    return after


@settings(max_examples=300, deadline=None)
@given(OLD_PATH)
def test_old_path_chats_become_linear(actions):
    """With no variants of a person's own, every group was the old path's: the repaired chat is one line."""
    before = _world(actions)
    plan = variants.plan(before)
    after = _check(before, plan)
    assert all(len(m["childrenIds"]) <= 1 for m in _messages(after).values())
    assert not plan.kept


@settings(max_examples=300, deadline=None)
@given(WITH_PERSON)
def test_a_persons_variants_are_never_moved(actions):
    before = _world(actions)
    plan = variants.plan(before)
    after = _check(before, plan)
    old, new = _messages(before), _messages(after)
    for mid, m in old.items():
        others = [c for c in m["childrenIds"] if not variants.is_old_bubble(old[c])]
        if len(others) >= 2 or any(old[c]["role"] == "assistant" for c in others if len(m["childrenIds"]) > 1):
            assert new[mid]["childrenIds"] == m["childrenIds"], mid  # a person's own group: as it was
    for mid, m in new.items():
        if m["parentId"] != old[mid]["parentId"]:
            assert variants.is_old_bubble(old[mid]) or old[mid]["role"] == "user"
            if old[mid]["role"] == "user":  # moved under a bubble, from beside it
                assert variants.is_old_bubble(new[m["parentId"]])

"""Which agent a chat's message goes to (issue 31: "a chat keeps its agent"). Pure.

Each OpenClaw agent is its own model in Open WebUI's picker, and a chat on agent X lives in X's session
(``agent:X:openwebui-<user>-<chat>``): X's memory of the chat is there. Open WebUI lets a person switch a chat's
model at any time; to it a model is stateless, so the next reply simply comes from the new model with the chat's
text. An agent is not: agent Y has never seen the chat, and a reply from Y would answer without X's tools, files and
memory of it, while X's session goes quiet (its agent turns still land in the chat). So the rule:

* the chat's agent is the agent of its **first** reply owc wrote on one of its own model ids (``chat_agent``); a
  chat with no such reply yet has none, and the picked agent starts it;
* a message on another agent's entry keeps going to the chat's agent, with the session's model left as it is, and
  a status line says so above the reply (``choose``): "This chat stays with Matcha, its agent from the start: start a
  new chat to talk to Saffron." Switching between the chat's own agent's LLM models still works (the same agent).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs


def chat_agent(messages: Any, read: Callable[[str], str | None], *, skip: str | None = None) -> str | None:
    """The agent of the chat's first reply on one of owc's models: ``messages`` is the chat's
    ``history.messages`` (Open WebUI's, ``{id: message}``), ``read`` maps a message's ``model`` (Open WebUI's model id,
    ``openclaw.matcha``) to the agent it ran on, or None when it is not owc's (another Function, a plain LLM) or no
    agent owc lists now; ``skip`` is the reply being made (its stub already names the picked model). The first is
    the oldest by ``timestamp`` (Open WebUI's, seconds), the message id breaking ties. Never raises."""
    if not isinstance(messages, Mapping):
        return None
    replies: list[tuple[float, str, str]] = []
    for message_id, message in messages.items():
        if message_id == skip or not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        model = message.get("model")
        if not isinstance(model, str) or not model:
            continue
        stamp = message.get("timestamp")
        when = float(stamp) if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) else float("inf")
        replies.append((when, str(message_id), model))
    for _, _, model in sorted(replies):
        try:
            agent = read(model)
        except Exception:  # a reader that fails names no agent: the next reply may
            agent = None
        if agent:
            return agent
    return None


@attrs.frozen
class Choice:
    """Where a message goes: ``agent``; ``keep_model``: the session's model is left as it is (the picked entry was
    another agent's, whose model choice means nothing on this agent); ``note``: the status line to show, or None."""

    agent: str
    keep_model: bool = False
    note: str | None = None


def choose(picked: str, kept: str | None, names: Mapping[str, str] | None = None) -> Choice:
    """The agent of a message picked on agent ``picked``'s entry in a chat whose agent is ``kept`` (``chat_agent``;
    None: the chat has none yet). ``names``: agent id -> the name the picker shows, for the note."""
    if kept is None or kept == picked:
        return Choice(picked)
    named = names or {}
    note = (
        f"This chat stays with {named.get(kept) or kept}, its agent from the start: start a new chat to talk to "
        f"{named.get(picked) or picked}."
    )
    return Choice(kept, keep_model=True, note=note)

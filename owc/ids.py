"""The identity rule and session keys (seed 000, section 2.2). Pure.

A run on an Open WebUI chat's session key gets exactly one assistant message, and any connection, deploy or
restarted process must map the run to that message from the run id alone, with no shared memory::

    message_id(key, R) = M                           if R == "msg-<chat36>-<M36>-<suffix>"   (owc started R)
                       = uuid5(AGENT_TURN_NS, "<key>:<R>")   otherwise                    (an agent turn)
                       = None                        if R starts with "owui-action-"     (never a message)

Suffixes owc sends: ``<t>`` (a reply), ``input-<t>`` (user input), ``resume-<t>`` (a resume after an
interrupted run). The chat id inside the run id is not compared with the key's: the run id alone decides,
which is what lets every process agree.

Session keys of Open WebUI chats: ``agent:<agentId>:openwebui-<userId>-<chatId>``. The chat id is a 36-char
UUID at the very end; the user id is everything between ``openwebui-`` and the ``-`` before it, so a user id
may itself contain dashes (Open WebUI user ids are UUIDs). Neither may contain ``:``, which is what keeps
sub-agent keys (``...:subagent:<id>``) and every other key (main, cron, ACP) from matching.

The user a key names is the chat's **owner** (its row's ``user_id``), whoever sends: Open WebUI 0.12.4 lets another
user write into a chat shared with them, and one chat is one session (``Runtime.chat_session_key``). The store
writes a key's runs only into a chat its user owns, so a key never writes where its user cannot see.
"""

from __future__ import annotations

import hashlib
import re
import uuid

import attrs

#: The namespace of agent-turn message ids: ``uuid5(NAMESPACE_URL, "https://github.com/openclaw/owc#agent-turn")``.
#: Changing it would give every agent turn a second message after an upgrade: it is fixed forever.
AGENT_TURN_NS = uuid.UUID("4fb14312-7485-5b8b-b791-6367042b3765")

#: Runs owc starts for Open WebUI actions (e.g. ``/compact``): they never get a message.
ACTION_PREFIX = "owui-action-"
SESSION_KEY_CHANNEL = "openwebui"

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_RUN_ID_RE = re.compile(rf"msg-(?P<chat>{_UUID})-(?P<message>{_UUID})-(?P<suffix>.+)", re.DOTALL)
_SESSION_KEY_RE = re.compile(rf"agent:(?P<agent>[^:]+):openwebui-(?P<user>[^:]+?)-(?P<chat>{_UUID})")


@attrs.frozen
class SessionRef:
    """An Open WebUI chat's session key, parsed."""

    agent_id: str
    user_id: str
    chat_id: str

    @property
    def key(self) -> str:
        return session_key(self.agent_id, self.user_id, self.chat_id)


@attrs.frozen
class RunRef:
    """A run id owc itself sent: ``msg-<chat>-<message>-<suffix>``; ``kind`` is reply, input or resume."""

    chat_id: str
    message_id: str
    kind: str
    token: str


def session_key(agent_id: str, user_id: str, chat_id: str) -> str:
    return f"agent:{agent_id}:{SESSION_KEY_CHANNEL}-{user_id}-{chat_id}"


def parse_session_key(key: str) -> SessionRef | None:
    """The chat a session key belongs to, or ``None`` for every key that is not an Open WebUI chat's."""
    if not isinstance(key, str):
        return None
    m = _SESSION_KEY_RE.fullmatch(key)
    if m is None:
        return None
    return SessionRef(agent_id=m["agent"], user_id=m["user"], chat_id=m["chat"])


def parse_run_id(run_id: str) -> RunRef | None:
    """The parts of a run id owc started, or ``None`` for any other run id."""
    if not isinstance(run_id, str):
        return None
    m = _RUN_ID_RE.fullmatch(run_id)
    if m is None:
        return None
    suffix = m["suffix"]
    kind, token = "reply", suffix
    for prefix in ("input-", "resume-"):
        if suffix.startswith(prefix) and len(suffix) > len(prefix):
            kind, token = prefix[:-1], suffix[len(prefix) :]
            break
    return RunRef(chat_id=m["chat"], message_id=m["message"], kind=kind, token=token)


def is_action_run(run_id: str) -> bool:
    return isinstance(run_id, str) and run_id.startswith(ACTION_PREFIX)


def _uuid5(namespace: uuid.UUID, name: str) -> uuid.UUID:
    # uuid.uuid5 encodes with strict UTF-8 and raises on a lone surrogate; a run id is foreign input, so
    # encode with surrogatepass (identical bytes for every valid string) and never raise.
    digest = hashlib.sha1(namespace.bytes + name.encode("utf-8", "surrogatepass"), usedforsecurity=False).digest()
    return uuid.UUID(bytes=digest[:16], version=5)


def agent_turn_message_id(session_key: str, run_id: str) -> str:
    return str(_uuid5(AGENT_TURN_NS, f"{session_key}:{run_id}"))


def message_id(session_key: str, run_id: str) -> str | None:
    """The id of run ``run_id``'s assistant message on ``session_key``, or ``None`` if it never has one."""
    if is_action_run(run_id):
        return None
    ref = parse_run_id(run_id)
    if ref is not None:
        return ref.message_id
    return agent_turn_message_id(str(session_key), str(run_id))


def reply_run_id(chat_id: str, message_id: str, token: str) -> str:
    """The run id of a user turn's reply: the reply message id rides in it."""
    return f"msg-{chat_id}-{message_id}-{token}"


def input_run_id(chat_id: str, message_id: str, token: str) -> str:
    return f"msg-{chat_id}-{message_id}-input-{token}"


def resume_run_id(chat_id: str, message_id: str, token: str) -> str:
    """A resume after an interrupted run: the identity rule maps it into the interrupted run's message."""
    return f"msg-{chat_id}-{message_id}-resume-{token}"


def action_run_id(action: str, chat_id: str, token: str) -> str:
    return f"{ACTION_PREFIX}{action}-{chat_id}-{token}"

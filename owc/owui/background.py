"""Open WebUI's background tasks, answered by owc itself and never sent to the agent (no Gateway call).

Open WebUI 0.12.4 calls a Pipe's ``pipe()`` for its own helper tasks too (``open_webui/constants.py:136-149``):
``__task__`` is ``metadata['task']`` and ``__task_body__`` is ``metadata['task_body']`` (``functions.py:243-244``),
the task route's own request body with the chat's real ``messages`` (``routers/tasks.py:195`` and alike), while
``body['messages']`` holds only Open WebUI's task prompt. These prompts are Open WebUI talking about a chat, not
the user talking to the agent: sent to the Gateway they would land in the agent's session. So each gets the
reply text Open WebUI's own parser accepts, built from ``task_body`` alone (``body`` is not needed). Pure: no I/O.

Streaming: every task route asks with ``stream: False`` (``routers/tasks.py:191,258,323,382,459,535,590``; tool
selection: ``utils/middleware.py:1043``) except the merge of responses, which passes the caller's ``stream``
(``routers/tasks.py:645``; the page sends ``true``). A plain ``str`` from ``pipe()`` serves both: Open WebUI wraps
it as one completion (``functions.py:337-338``) or as one chunk followed by ``[DONE]`` (``functions.py:306-321``).

JSON replies are cut out of the text by ``find('{')``/``rfind('{')`` and ``rfind('}')`` (``utils/middleware.py:1278,
1631,1733,3663``), and the page's title parser turns ``' ‘ ’ ``` into ``"`` before ``JSON.parse``
(``src/lib/apis/index.ts:826``, read from the frontend's source maps). ``_json`` therefore writes braces and those
quotes inside strings as ``\\u`` escapes: both parsers then read back exactly the text owc meant.
"""

from __future__ import annotations

import json
import re

# Open WebUI's own title for a chat that has none (``models/chats.py:625``).
DEFAULT_TITLE = "New Chat"
# The default title prompt asks for "2-4 words" (``config.py:2283``); the cap keeps a long URL from becoming one.
TITLE_WORDS = 5
TITLE_CHARS = 50

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_ESCAPES = (("{", "\\u007b"), ("}", "\\u007d"), ("'", "\\u0027"), ("`", "\\u0060"))


def answer(task: str, body: dict | None, task_body: dict | None) -> str:
    """The model reply Open WebUI expects for ``task``; never raises, whatever the inputs hold.

    * ``title_generation`` -> ``{"title": ...}`` from the first user message: Open WebUI reads ``.get('title')``
      (``utils/middleware.py:3663-3666``; page: ``src/lib/apis/index.ts:826-841``), and an empty reply would make
      it fall back to the assistant's content or ``messages[0]['content']`` raw (``utils/middleware.py:3658,3671``).
    * ``follow_up_generation`` -> ``{"follow_ups": []}``: ``parse_follow_ups`` (``utils/task.py:348-365``) gives
      ``[]``; inventing questions for an agent owc did not consult would mislead.
    * ``tags_generation`` -> ``{"tags": []}`` (``utils/middleware.py:3715-3718``). Harmless: the page asks only on a
      chat's first exchange (``Chat.svelte:4455-4463``), when the chat has no tags to replace
      (``models/chats.py:973-997``).
    * ``query_generation`` -> ``{"queries": [last user message]}``: what Open WebUI itself searches with when query
      generation fails or is disabled (``utils/middleware.py:1293-1295``) and its retrieval fallback for ``[]``
      (``utils/middleware.py:1759-1760``). ``[]`` would skip a requested web search (``utils/middleware.py:1302-1313``).
    * ``image_prompt_generation`` -> ``{"prompt": last user message}``, Open WebUI's own fallback
      (``utils/middleware.py:1508,1630-1645``).
    * ``autocomplete_generation`` -> ``{"text": ""}``: no suggestion (``src/lib/apis/index.ts:1091-1107``).
    * ``moa_response_generation`` -> the first non-blank response to merge, shown as the merged answer
      (``Chat.svelte:4747-4775``): owc cannot synthesize without the agent.
    * ``emoji_generation``, ``function_calling`` and anything else -> ``""``: the call overlay then shows no emoji
      (``src/lib/apis/index.ts:965-973``), and no tool is chosen (``utils/middleware.py:1085-1086``).
    """
    fields = task_body if isinstance(task_body, dict) else {}
    messages = fields.get("messages")
    texts = _user_texts(messages if isinstance(messages, list) else [])
    last = texts[-1] if texts else _text(fields.get("prompt")).strip()
    match task:
        case "title_generation":
            return _json({"title": title(texts)})
        case "follow_up_generation":
            return _json({"follow_ups": []})
        case "tags_generation":
            return _json({"tags": []})
        case "query_generation":
            return _json({"queries": [last] if last else []})
        case "image_prompt_generation":
            return _json({"prompt": last})
        case "autocomplete_generation":
            return _json({"text": ""})
        case "moa_response_generation":
            return _first_response(fields.get("responses"))
        case _:
            return ""


def title(texts: list[str]) -> str:
    """A few words of the first user message with any text, on one line; ``DEFAULT_TITLE`` when there is none.

    Control characters (newlines, tabs, NUL, which PostgreSQL refuses in text) become spaces; ``split`` with a
    limit keeps a very long message cheap.
    """
    for text in texts:
        words = _CONTROL.sub(" ", text).split(None, TITLE_WORDS)[:TITLE_WORDS]
        if words:
            return " ".join(words)[:TITLE_CHARS].rstrip()
    return DEFAULT_TITLE


def _user_texts(messages: list[object]) -> list[str]:
    """The non-blank texts of the user messages, oldest first (image-only messages carry none)."""
    texts = (_text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "user")
    return [text.strip() for text in texts if text.strip()]


def _text(content: object) -> str:
    """A message content's text: a string as is, or the ``text`` parts of a list of parts joined (images skipped)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = (p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text")
        return " ".join(part for part in parts if isinstance(part, str))
    return ""


def _first_response(responses: object) -> str:
    """The first non-blank string among the responses to merge, else ``""``."""
    if isinstance(responses, list):
        return next((r for r in responses if isinstance(r, str) and r.strip()), "")
    return ""


def _json(obj: dict[str, object]) -> str:
    """``obj`` as JSON whose only raw braces are its own and with no raw ``'`` or `````, so every parser above
    cuts out and reads the same object (the module docstring says which parsers and why)."""
    text = json.dumps(obj, ensure_ascii=True)
    inner = text[1:-1]
    for raw, escaped in _ESCAPES:
        inner = inner.replace(raw, escaped)
    return "{" + inner + "}"

"""owc's local answers to Open WebUI's background tasks, read back with Open WebUI 0.12.4's own parsing.

open_webui is not installed here, so each parser is replicated line for line, citing where it lives (paths under
``open_webui/``; ``src/lib/...`` is the page's source, from the frontend's source maps).
"""

from __future__ import annotations

import enum
import json

import pytest

from owc.owui.background import DEFAULT_TITLE, TITLE_CHARS, answer

TASKS = (  # open_webui/constants.py:141-149
    "title_generation",
    "follow_up_generation",
    "tags_generation",
    "emoji_generation",
    "query_generation",
    "image_prompt_generation",
    "autocomplete_generation",
    "function_calling",
    "moa_response_generation",
)


def chat(*contents: object) -> dict:
    """A task body as the task routes get it: the chat's messages, users and an assistant in between."""
    messages = [{"role": "user", "content": c} for c in contents]
    return {"model": "owc.agent", "messages": [{"role": "assistant", "content": "hi"}, *messages]}


def backend_object(reply: str, key: str, default: object) -> object:
    """utils/middleware.py:3663-3668 (title), 3715-3718 (tags): cut find('{')..rfind('}'), loads, .get(key)."""
    try:
        return json.loads(reply[reply.find("{") : reply.rfind("}") + 1]).get(key, default)
    except Exception:
        return ""


def backend_rfind(reply: str, key: str) -> object:
    """utils/middleware.py:1277-1288 (web search), 1630-1641 (image prompt): cut rfind('{')..rfind('}')."""
    try:
        return json.loads(reply[reply.rfind("{") : reply.rfind("}") + 1]).get(key, [])
    except Exception:
        return [reply]


def page_title(reply: str) -> str | None:
    """src/lib/apis/index.ts:823-843: quotes become '"', indexOf('{')..lastIndexOf('}'), JSON.parse, .title."""
    text = reply.translate(str.maketrans({"'": '"', "‘": '"', "’": '"', "`": '"'}))
    start, end = text.find("{"), text.rfind("}")
    return json.loads(text[start : end + 1]).get("title") or None if start != -1 and end != -1 else None


def parse_follow_ups(content: str, max_count: int = 5) -> list[str]:
    """utils/task.py:348-365."""
    content = content[content.find("{") : content.rfind("}") + 1]
    try:
        data = json.loads(content)
    except (ValueError, TypeError):
        return []
    suggestions = data.get("follow_ups") if isinstance(data, dict) else None
    if not isinstance(suggestions, list) or any(not isinstance(item, str) for item in suggestions):
        return []
    return [s.strip() for s in suggestions if s.strip()][:max_count]


def page_autocomplete(reply: str) -> str:
    """src/lib/apis/index.ts:1091-1112."""
    start, end = reply.find("{"), reply.rfind("}")
    return (json.loads(reply[start : end + 1]).get("text") or "") if start != -1 and end != -1 else reply


def test_title_is_a_few_words_of_the_first_user_message() -> None:
    reply = answer("title_generation", {"messages": [{"role": "user", "content": "PROMPT"}]}, chat("Plan my trip", "x"))
    assert backend_object(reply, "title", None) == page_title(reply) == "Plan my trip"


@pytest.mark.parametrize(
    ("contents", "expected"),
    [
        (("  first\nline\t\x00two  \r\nthree four five six",), "first line two three four"),
        (("word " * 100_000,), "word word word word word"),
        (("x" * 10_000,), "x" * TITLE_CHARS),
        (([{"type": "image_url", "image_url": {"url": "data:"}}], "then text"), "then text"),
        (([{"type": "image_url"}, {"type": "text", "text": "what is\nthis"}],), "what is this"),
        (('It\'s {"a"} `b` ‘c’ ]',), 'It\'s {"a"} `b` ‘c’ ]'),
        (("   ", None, 7, [{"type": "text", "text": None}]), DEFAULT_TITLE),
    ],
)
def test_title_from_odd_messages(contents: tuple[object, ...], expected: str) -> None:
    reply = answer("title_generation", {}, chat(*contents))
    assert "\n" not in reply
    assert backend_object(reply, "title", None) == page_title(reply) == expected


@pytest.mark.parametrize(
    "task_body",
    [None, {}, {"messages": None}, {"messages": "nope"}, {"messages": [None, 3, {"role": "user"}]}, ["x"], "x"],
)
def test_odd_bodies_never_raise(task_body: object) -> None:
    for task in TASKS:
        answer(task, None, task_body)  # type: ignore[arg-type]
    assert backend_object(answer("title_generation", None, task_body), "title", None) == DEFAULT_TITLE  # type: ignore[arg-type]
    assert backend_rfind(answer("query_generation", None, task_body), "queries") == []  # type: ignore[arg-type]


def test_tags_and_follow_ups_are_empty_and_accepted() -> None:
    assert backend_object(answer("tags_generation", {}, chat("hi")), "tags", None) == []
    reply = answer("follow_up_generation", {}, chat("hi"))
    assert reply == '{"follow_ups": []}' and parse_follow_ups(reply) == []


def test_queries_are_the_last_user_message_read_back_exactly() -> None:
    tricky = "what's {new} in `trio`? }{"
    reply = answer("query_generation", {}, chat("old question", tricky))
    assert backend_rfind(reply, "queries") == [tricky]
    # utils/middleware.py:1731-1744 (retrieval): the same rfind cut, else {'queries': [reply]}
    assert json.loads(reply[reply.rfind("{") : reply.rfind("}") + 1])["queries"] == [tricky]
    web = {"model": "m", "messages": [], "prompt": "only the prompt", "type": "web_search"}
    assert backend_rfind(answer("query_generation", {}, web), "queries") == ["only the prompt"]


def test_image_prompt_is_the_last_user_message() -> None:
    reply = answer("image_prompt_generation", {}, chat("a cat", "a {red} fox"))
    assert backend_rfind(reply, "prompt") == "a {red} fox"


def test_autocomplete_suggests_nothing() -> None:
    reply = answer("autocomplete_generation", {}, {"prompt": "hel", "type": "search query"})
    assert reply == '{"text": ""}' and page_autocomplete(reply) == ""


def test_moa_returns_the_first_response() -> None:
    assert answer("moa_response_generation", {}, {"prompt": "q", "responses": ["", 4, "one", "two"]}) == "one"
    assert answer("moa_response_generation", {}, {"responses": None}) == ""


@pytest.mark.parametrize("task", ["emoji_generation", "function_calling", "something_new", "", None])
def test_other_tasks_answer_empty(task: object) -> None:
    # emoji: src/lib/apis/index.ts:965-973 gives null for ""; tools: utils/middleware.py:1085-1086 skips on "".
    assert answer(task, {}, chat("hello")) == ""  # type: ignore[arg-type]


def test_open_webui_task_enum_matches() -> None:
    """Open WebUI passes ``str(TASKS.X)`` (routers/tasks.py:194); its ``str`` Enum itself matches too."""

    class Tasks(str, enum.Enum):  # noqa: UP042 - as open_webui/constants.py:136-142 declares it
        TAGS_GENERATION = "tags_generation"

    assert json.loads(answer(Tasks.TAGS_GENERATION, {}, None)) == {"tags": []}

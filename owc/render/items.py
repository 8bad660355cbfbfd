"""Open WebUI's output items (Responses-API shapes its middleware builds and its frontend folds).

Item ids are derived from the run id, so the same run renders to the same ids in every process and every
replay (a live stream and its finalize agree on ids): ``msg_`` / ``fco_`` + 24 hex; a function call's id is
its call id, as Open WebUI's own tool items have it. Items are built frozen (``owc.render.frozen``): a changed item
is a new one, so an item once handed out can be shared without a copy.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from owc.render.frozen import FrozenDict, FrozenList


def item_id(prefix: str, run_id: str, key: str) -> str:
    digest = hashlib.sha1(
        f"{run_id}\x00{prefix}\x00{key}".encode("utf-8", "surrogatepass"), usedforsecurity=False
    ).hexdigest()
    return f"{prefix}_{digest[:24]}"


def message_item(item_id_: str, text: str, *, done: bool) -> FrozenDict:
    return FrozenDict(
        type="message",
        id=item_id_,
        status="completed" if done else "in_progress",
        role="assistant",
        content=FrozenList((FrozenDict(type="output_text", text=text),)),
    )


def arguments_json(args: Any) -> str:
    if isinstance(args, str):
        return args
    try:
        return orjson.dumps({} if args is None else args).decode()
    except TypeError:  # nested deeper than orjson writes (254 levels), or not JSON at all
        return _json_iterative(args)


def _json_iterative(value: Any) -> str:
    """Compact JSON of ``value`` with an explicit stack, so no depth can raise (valid JSON tool arguments
    nested 1,000 deep once crashed the writer with RecursionError). What is not JSON is written as its
    type's name."""
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Raw):
            out.append(item.text)
        elif isinstance(item, dict):
            out.append("{")
            parts: list[Any] = []
            for i, (key, val) in enumerate(item.items()):
                parts += [_Raw(("," if i else "") + orjson.dumps(str(key)).decode() + ":"), val]
            stack.append(_Raw("}"))
            stack.extend(reversed(parts))
        elif isinstance(item, (list, tuple)):
            out.append("[")
            parts = []
            for i, val in enumerate(item):
                parts += [_Raw(","), val] if i else [val]
            stack.append(_Raw("]"))
            stack.extend(reversed(parts))
        else:
            try:
                out.append(orjson.dumps(item).decode())
            except TypeError:
                out.append(orjson.dumps(f"<{type(item).__name__}>").decode())
    return "".join(out)


class _Raw:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def function_call_item(call_id: str, name: str, args: Any, *, status: str) -> FrozenDict:
    return FrozenDict(
        type="function_call",
        id=call_id,
        call_id=call_id,
        name=name,
        arguments=arguments_json(args),
        status=status,
    )


def function_call_output_item(item_id_: str, call_id: str, text: str, *, is_error: bool) -> FrozenDict:
    return FrozenDict(
        type="function_call_output",
        id=item_id_,
        call_id=call_id,
        output=FrozenList((FrozenDict(type="input_text", text=text),)),
        status="failed" if is_error else "completed",
    )


def result_text(result: Any) -> str:
    """A tool result as text: ``{content: [{type: text, text}]}`` (the Gateway's shape), a string, or JSON."""
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    if isinstance(result, dict) and isinstance(result.get("content"), list):
        return _text_parts(result["content"])
    if isinstance(result, list):
        return _text_parts(result)
    return arguments_json(result)


def _text_parts(parts: list[Any]) -> str:
    """The ``text`` parts joined; a part whose text is not a string (null, a number) is shown as JSON rather
    than failing the whole result (one odd part must not leave a message unfinished)."""
    out = []
    for p in parts:
        if isinstance(p, dict) and p.get("type") == "text":
            text = p.get("text")
            out.append(text if isinstance(text, str) else "" if text is None else arguments_json(text))
    return "".join(out)


def output_text(output: list[dict[str, Any]]) -> str:
    """A message's ``content`` from its output, by Open WebUI's own rule (``get_output_text``): the text of
    each ``message`` item that is not blank, one item a line."""
    texts = []
    for item in output:
        if not isinstance(item, dict) or item.get("type") != "message" or not isinstance(item.get("content"), list):
            continue
        text = "".join(str(c.get("text")) for c in item["content"] if isinstance(c, dict) and c.get("text") is not None)
        if text and not text.isspace():
            texts.append(text)
    return "\n".join(texts)


def count_cards(output: list[dict[str, Any]]) -> int:
    return sum(1 for item in output if item.get("type") == "function_call")

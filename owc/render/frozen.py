"""Immutable output items, so one item can be handed to the tabs, the live copy and a recording without copies.

A writer flushes after every change it sees; every flush used to deep-copy the whole output (the recording
emitter's copy of the live copy, the snapshot event's copy): the profile's largest share on a long run, growing
with the run. The renderer now builds its items once, frozen, and never changes one: a changed item is a new
item. Whoever keeps an event or an output can then share every frozen part and copy only what is still mutable
(``own``).

``FrozenDict`` and ``FrozenList`` are ``dict`` and ``list`` subclasses, so everything that reads items (orjson,
``json``, Open WebUI's ``isinstance(parts, list)`` checks, equality with plain dicts in tests) sees what it saw
before; only a change in place raises. Open WebUI treats output items the same way (its
``handle_responses_streaming_event`` copies an item before changing it: ``item.copy()`` gives a plain dict).
``copy.copy`` and ``copy.deepcopy`` give plain, mutable copies: a copy is the caller's to change (``apply_events``
folds into one). Pure.
"""

from __future__ import annotations

import copy
from typing import Any, NoReturn


def _refuse(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(f"{type(self).__name__} is immutable: an output item is replaced, never changed in place")


class FrozenDict(dict[str, Any]):
    """A ``dict`` that refuses changes in place."""

    __slots__ = ()

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse  # type: ignore[assignment]

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {key: copy.deepcopy(value, memo) for key, value in self.items()}

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))


class FrozenList(list[Any]):
    """A ``list`` that refuses changes in place."""

    __slots__ = ()

    __setitem__ = __delitem__ = append = extend = insert = pop = remove = clear = sort = reverse = _refuse  # type: ignore[assignment]
    __iadd__ = __imul__ = _refuse  # type: ignore[assignment]

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(value, memo) for value in self]

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))


EMPTY: FrozenList = FrozenList()

_ATOMS = (str, int, float, bool, type(None))


def freeze(value: Any) -> Any:
    """``value`` with every dict and list in it frozen; frozen parts are kept as they are (no copy)."""
    if isinstance(value, (FrozenDict, FrozenList)) or isinstance(value, _ATOMS):
        return value
    if isinstance(value, dict):
        return FrozenDict({key: freeze(item) for key, item in value.items()})
    if isinstance(value, (list, tuple)):
        return FrozenList(freeze(item) for item in value)
    return copy.deepcopy(value)


def own(value: Any) -> Any:
    """A copy of ``value`` that nobody else can change: frozen parts are shared, every mutable container is
    copied (what a recording keeps, in O(what is not frozen))."""
    if isinstance(value, (FrozenDict, FrozenList)) or isinstance(value, _ATOMS):
        return value
    if isinstance(value, dict):
        return {key: own(item) for key, item in value.items()}
    if isinstance(value, list):
        return [own(item) for item in value]
    if isinstance(value, tuple):
        return tuple(own(item) for item in value)
    return copy.deepcopy(value)

"""No task without an owner on Open WebUI's asyncio side, and one guarded way into Trio (issue 26, item 4), enforced.

owc's Trio side is structured by Trio itself. Its asyncio side (``owc/owui``) runs on Open WebUI's loop, where a bare
``create_task`` outlives whatever made it: so every asyncio task owc starts there is a task of the host's anyio
task group (``TrioHost.start_asyncio``, ``run_in_asyncio``). This test reads ``owc/owui`` and fails on any other
way to make a task or a thread: ``create_task``, ``ensure_future``, ``as_completed``, ``gather``,
``run_coroutine_threadsafe``, ``asyncio.TaskGroup`` / ``Task``, ``asyncio.to_thread``, ``run_in_executor``
(blocking calls go through ``anyio.to_thread.run_sync``), and ``shield`` / ``wait`` / ``wait_for`` handed a
coroutine (each makes it a task). Two calls are exempt, by name:

* ``open_webui.tasks.create_task``: Open WebUI's own API; the task it makes is Open WebUI's (its Stop cancels it),
  holding a coroutine that only waits for owc's ``release``. Called in ``OpenWebUISurface.create_task`` and, by the
  emitter, through its ``Surface`` (``self._surface.create_task``);
* the host's own asyncio side (``TrioHost._launch``): the task the group lives in, which ``aclose`` waits for.

And every ``run_sync_soon`` into the Trio guest goes through the host (``TrioHost.run_sync_soon`` or the host's
own ``_soon``), whose ``_guarded`` wrapper keeps a raising callback from ending the guest run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OWUI = ROOT / "owc" / "owui"

#: Calls that make an asyncio task or a thread outside the host's task group, whatever their arguments.
TASK_MAKERS = frozenset(
    {
        "create_task", "ensure_future", "as_completed", "gather", "run_coroutine_threadsafe", "TaskGroup", "Task",
        "to_thread", "run_in_executor",
    }
)  # fmt: skip
#: Calls that make a task only when handed a coroutine (a future is awaited as it is).
WRAPPERS = frozenset({"shield", "wait", "wait_for"})
#: (file, function) where a bare task is the design: the host's asyncio side, the group's own host.
ROOT_TASK = ("owc/owui/trio_host.py", "TrioHost._launch")
#: Open WebUI's task registry reached through the emitter's ``Surface`` (``OpenWebUISurface.create_task``).
SURFACE_CALL = "self._surface.create_task"
#: The one place that calls a Trio token's ``run_sync_soon``.
CROSSING = ("owc/owui/trio_host.py", "_soon")


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _open_webui_names(function: ast.AST) -> set[str]:
    """Names a function binds to ``open_webui.tasks.create_task`` (``from open_webui.tasks import create_task``)."""
    names = set()
    for node in ast.walk(function):
        if isinstance(node, ast.ImportFrom) and node.module == "open_webui.tasks":
            names |= {alias.asname or alias.name for alias in node.names if alias.name == "create_task"}
    return names


def _functions(tree: ast.Module) -> list[tuple[str, ast.AST]]:
    """Every function with its qualified name (``Class.method``), innermost last; the module itself as ''."""
    found: list[tuple[str, ast.AST]] = [("", tree)]

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    found.append((name, child))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def _enclosing(tree: ast.Module) -> dict[int, tuple[str, ast.AST]]:
    """For each call node (by id), the innermost function around it."""
    where: dict[int, tuple[str, ast.AST]] = {}
    for name, function in _functions(tree):  # outer before inner: the innermost one is written last
        for node in ast.walk(function):
            if isinstance(node, ast.Call):
                where[id(node)] = (name, function)
    return where


def bare_tasks(source: str, path: str = "owc/owui/x.py") -> list[tuple[int, str]]:
    """The lines of ``source`` that make an asyncio task or thread no anyio task group owns, with the call."""
    tree = ast.parse(source)
    where = _enclosing(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _called_name(node)
        function_name, function = where.get(id(node), ("", tree))
        if name in TASK_MAKERS:
            if (path, function_name) == ROOT_TASK and name == "create_task":
                continue
            if isinstance(node.func, ast.Name) and name in _open_webui_names(function):
                continue  # Open WebUI's own task registry: its task, not owc's
            if ast.unparse(node.func) == SURFACE_CALL:
                continue  # the same, through the Surface
            found.append((node.lineno, name))
        elif name in WRAPPERS and any(isinstance(arg, ast.Call) for arg in node.args):
            found.append((node.lineno, f"{name}(<coroutine>)"))
    return sorted(found)


def unguarded_crossings(source: str, path: str) -> list[int]:
    """Lines calling ``run_sync_soon`` on anything but the host (``host``, ``self._host``), outside ``_soon``."""
    tree = ast.parse(source)
    where = _enclosing(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr != "run_sync_soon":
            continue
        if (path, where.get(id(node), ("", tree))[0]) == CROSSING:
            continue
        receiver = ast.unparse(node.func.value)
        if receiver.split(".")[-1] not in ("host", "_host"):
            found.append(node.lineno)
    return found


def _sources(folder: Path) -> list[tuple[str, str]]:
    return [(str(p.relative_to(ROOT)), p.read_text()) for p in sorted(folder.rglob("*.py"))]


def test_no_task_without_an_owner_in_owc_owui() -> None:
    offenders = [f"{path}:{line}: {call}" for path, source in _sources(OWUI) for line, call in bare_tasks(source, path)]
    assert offenders == [], "an asyncio task or thread outside the host's task group (TrioHost.start_asyncio)"


def test_the_exemptions_are_where_they_say() -> None:
    """Each exemption names a call that exists: a renamed function must not leave a dead exemption behind."""
    surface = (OWUI / "emitter.py").read_text()
    assert "from open_webui.tasks import create_task" in surface and f"await {SURFACE_CALL}(" in surface
    host = ast.parse((ROOT / ROOT_TASK[0]).read_text())
    [launch] = [f for name, f in _functions(host) if name == ROOT_TASK[1]]
    assert [n for n in ast.walk(launch) if isinstance(n, ast.Call) and _called_name(n) == "create_task"]
    assert [name for name, _ in _functions(host) if name == CROSSING[1]] == [CROSSING[1]]


def test_every_crossing_into_trio_goes_through_the_host() -> None:
    offenders = [
        f"{path}:{line}" for path, source in _sources(ROOT / "owc") for line in unguarded_crossings(source, path)
    ]
    assert offenders == [], "run_sync_soon on a Trio token outside trio_host._soon (use TrioHost.run_sync_soon)"
    # And only the host module holds a Trio token at all.
    holders = [path for path, source in _sources(ROOT / "owc") if "current_trio_token" in source]
    assert holders == [CROSSING[0]]


@pytest.mark.parametrize(
    "source",
    [
        "import asyncio\ndef f(c):\n    asyncio.get_running_loop().create_task(c())\n",
        "import asyncio\ndef f(c):\n    asyncio.create_task(c())\n",
        "import asyncio\ndef f(c):\n    asyncio.ensure_future(c())\n",
        "import asyncio\nasync def f(cs):\n    for x in asyncio.as_completed(cs):\n        await x\n",
        "import asyncio\nasync def f(a, b):\n    await asyncio.gather(a(), b())\n",
        "import asyncio\nasync def f(c):\n    await asyncio.shield(c())\n",
        "import asyncio\nasync def f(c):\n    await asyncio.wait_for(c(), 1)\n",
        "import asyncio\nasync def f(g):\n    await asyncio.to_thread(g)\n",
        "import asyncio\nasync def f(g):\n    await asyncio.get_running_loop().run_in_executor(None, g)\n",
        "import asyncio\nasync def f(c):\n    async with asyncio.TaskGroup() as tg:\n        tg.create_task(c())\n",
        "from asyncio import create_task\ndef f(c):\n    create_task(c())\n",
        # Open WebUI's name imported elsewhere does not exempt a bare create_task here.
        "def g():\n    from open_webui.tasks import create_task\n\ndef f(c):\n    import asyncio\n"
        "    asyncio.create_task(c())\n",
    ],
)
def test_the_check_finds_bare_tasks(source: str) -> None:
    assert bare_tasks(source), source


@pytest.mark.parametrize(
    "source",
    [
        "import asyncio\nasync def f(fut):\n    await asyncio.shield(fut)\n",  # a future: no task made
        "import asyncio\nasync def f(fut):\n    await asyncio.wait((fut,))\n",
        "import anyio\nasync def f(g):\n    await anyio.to_thread.run_sync(g)\n",
        "async def f(host, g):\n    host.start_asyncio(g)\n",
        "async def f(self, c):\n    await self._surface.create_task(c, 'chat')\n",
        "async def f(redis, c):\n    from open_webui.tasks import create_task\n\n"
        "    await create_task(redis, c, id='x')\n",
    ],
)
def test_the_check_passes_owned_work(source: str) -> None:
    assert bare_tasks(source) == [], source


def test_the_crossing_check() -> None:
    assert unguarded_crossings("def f(token, g):\n    token.run_sync_soon(g)\n", "owc/owui/x.py") == [2]
    assert unguarded_crossings("def f(self, g):\n    self._host.run_sync_soon(g)\n", "owc/owui/x.py") == []
    assert unguarded_crossings("def _soon(token, g):\n    token.run_sync_soon(g)\n", CROSSING[0]) == []

"""owc hosted the way Open WebUI hosts it (``owc/owui/process.py``): started once from the loop's asyncio side, an
agent turn from the Gateway simulator written into the database and told to the tabs through the Open WebUI emitter,
closed by the shutdown sink.

The simulator runs in its own thread (``trio.run``), on loopback, as a Gateway is its own process; owc runs as a Trio
guest on this test's asyncio loop with ``FakeOpenWebUI`` (``tests/owui/fake_surface.py``) standing for Open WebUI's
socket and task registry. Nothing waits on a clock: the test waits on events the other side sets.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from owc import ids
from owc.owui import process, trio_host
from owc.owui.process import HostSettings, SettingsError, settings_from
from owc.store import ChatStore, make_engine

from owui.fake_surface import FakeOpenWebUI
from owui.simthread import simulator_thread

TOKEN = "host-test-token-" + uuid.uuid4().hex
USER = "u-host"


class WatchedOpenWebUI(FakeOpenWebUI):
    """Sets an asyncio event when a message's final ``chat:completion`` reaches the tabs."""

    def __init__(self) -> None:
        super().__init__()
        self.finished = asyncio.Event()
        self.streamed = asyncio.Event()

    async def save_response_stream(self, task_id: str, chat_id: str, message_id: str, output: list[Any]) -> None:
        await super().save_response_stream(task_id, chat_id, message_id, output)
        self.streamed.set()

    async def event_emitter(self, user_id: str, chat_id: str, message_id: str) -> Any:
        inner = await super().event_emitter(user_id, chat_id, message_id)

        async def emit(event: dict[str, Any]) -> None:
            await inner(event)
            if event.get("type") == "chat:completion" and event["data"].get("done"):
                self.finished.set()

        return emit


def test_settings_come_from_the_valves_then_the_environment_and_never_show_the_token(tmp_path: Path, caplog) -> None:
    env = {"OWC_GATEWAY_URL": "ws://env:1", "OWC_GATEWAY_TOKEN": "env-token", "DATA_DIR": str(tmp_path / "data")}
    from_env = settings_from({}, env, database_url="sqlite:///x.db")
    assert (from_env.gateway_url, from_env.token, from_env.agent_id) == ("ws://env:1/", "env-token", "main")
    valves = {"GATEWAY_URL": "https://valve:2", "GATEWAY_TOKEN": "valve-token", "AGENT_ID": "ops"}
    from_valves = settings_from(valves, env, database_url="sqlite:///x.db")
    # what people paste (the dashboard's https:// address) is the Gateway's wss:// URL
    assert (from_valves.gateway_url, from_valves.token, from_valves.agent_id) == (
        "wss://valve:2/",
        "valve-token",
        "ops",
    )
    bare = settings_from({**valves, "GATEWAY_URL": " gateway.lan "}, env, database_url="x")
    assert bare.gateway_url == "ws://gateway.lan:18789/"
    with pytest.raises(SettingsError, match="the GATEWAY_URL valve 'ftp://gw/' has the scheme ftp://"):
        settings_from({**valves, "GATEWAY_URL": "ftp://gw/"}, env, database_url="x")
    assert "valve-token" not in repr(from_valves)
    token_file = tmp_path / "token"
    token_file.write_text("file-token\n")
    token_file.chmod(0o600)
    from_file = settings_from(
        {"GATEWAY_TOKEN_FILE": str(token_file)}, {}, database_url="sqlite:///x.db", data_dir=tmp_path
    )
    assert from_file.token == "file-token"
    # A token file that is a link (a Kubernetes secret volume's files are): the warning names the setting an
    # Open WebUI admin has, never owc run's --token-file.
    link = tmp_path / "token-link"
    link.symlink_to(token_file)
    with caplog.at_level(logging.WARNING, logger="owc"):
        settings_from({"GATEWAY_TOKEN_FILE": str(link)}, {}, database_url="x", data_dir=tmp_path)
        settings_from({}, {"OWC_GATEWAY_TOKEN_FILE": str(link)}, database_url="x", data_dir=tmp_path)
    said = [r.getMessage() for r in caplog.records if "symbolic link" in r.getMessage()]
    assert len(said) == 2 and not any("--token-file" in line for line in said), said
    assert "point the GATEWAY_TOKEN_FILE valve at a regular file" in said[0]
    assert "point OWC_GATEWAY_TOKEN_FILE at a regular file" in said[1]
    with pytest.raises(SettingsError, match="no Gateway token"):
        settings_from({}, {}, database_url="sqlite:///x.db")
    with pytest.raises(SettingsError, match="holds a credential") as refused:
        settings_from({"GATEWAY_URL": "ws://gw:1/?token=leaked", "GATEWAY_TOKEN": "t"}, {}, database_url="x")
    assert "leaked" not in str(refused.value)


def test_the_device_lives_in_open_webuis_data_folder_and_the_valves_set_it_and_tls(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(process, "open_webui_data_dir", lambda: None)  # as outside Open WebUI
    base = {"GATEWAY_TOKEN": "valve-token"}
    default = settings_from(base, {}, database_url="x", data_dir=tmp_path / "data")
    assert default.device_dir == tmp_path / "data" / "owc"  # survives a container rebuild, as DATA_DIR does
    assert default.gateway_config().device_dir == tmp_path / "data" / "owc"
    assert settings_from(base, {"DATA_DIR": "/srv/webui"}, database_url="x").device_dir == Path("/srv/webui/owc")
    chosen = settings_from({**base, "DEVICE_DIR": str(tmp_path / "dev")}, {}, database_url="x", data_dir=tmp_path)
    assert chosen.device_dir == tmp_path / "dev"
    assert settings_from({**base, "DEVICE_DIR": "off"}, {}, database_url="x", data_dir=tmp_path).device_dir is None
    with pytest.raises(SettingsError, match="DEVICE_DIR valve must be an absolute path"):
        settings_from({**base, "DEVICE_DIR": "rel/dir"}, {}, database_url="x", data_dir=tmp_path)
    with pytest.raises(SettingsError, match="set the Pipe's DEVICE_DIR valve"):
        settings_from(base, {}, database_url="x")  # outside Open WebUI, no DATA_DIR: say where to set it
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    pin = "AB:" * 31 + "AB"
    tls = settings_from(
        {**base, "GATEWAY_CA_FILE": str(ca), "GATEWAY_TLS_PIN": pin}, {}, database_url="x", data_dir=tmp_path
    )
    assert (tls.ca_file, tls.pin_sha256) == (ca, "ab" * 32)
    assert tls.gateway_config().pin_sha256 == "ab" * 32 and tls.gateway_config().ca_file == ca
    with pytest.raises(SettingsError, match="GATEWAY_TLS_PIN valve: a TLS pin is the certificate's SHA-256"):
        settings_from({**base, "GATEWAY_TLS_PIN": "abc"}, {}, database_url="x", data_dir=tmp_path)
    with pytest.raises(SettingsError, match="GATEWAY_CA_FILE valve names"):
        settings_from({**base, "GATEWAY_CA_FILE": str(tmp_path / "nope.pem")}, {}, database_url="x", data_dir=tmp_path)


def test_an_agent_turn_reaches_the_database_and_the_tabs_and_shutdown_closes_cleanly(tmp_path: Path, caplog) -> None:
    url = f"sqlite:///{tmp_path / 'webui.db'}"
    store = ChatStore(make_engine(url))
    store.create_tables()
    chat_id = str(uuid.uuid4())
    store.create_chat(chat_id, USER)
    store.engine.dispose()
    key = ids.session_key("main", USER, chat_id)
    message_id = ids.message_id(key, "agent-turn")

    with simulator_thread(TOKEN) as (sim, sim_token):

        async def body() -> None:
            owui = WatchedOpenWebUI()
            settings = HostSettings(gateway_url=sim.url, token=TOKEN, database_url=url)
            runtime = await process.ensure_started(settings, owui)
            try:
                assert await process.ensure_started(settings, owui) is runtime  # the Pipe's call after the startup hook
                changed = attrs.evolve(settings, agent_id="ops")  # a valve read on each call: no reconnect
                assert await process.ensure_started(changed, owui) is runtime
                assert await process.ensure_started(changed, owui) is runtime
                await trio_host.process_host().run_in_trio(runtime.connected)

                def start_run() -> None:
                    sim.start_run(key, "agent-turn").text("Cron says hi.").tool("ls", {}, "a b").end()

                await asyncio.to_thread(trio.from_thread.run_sync, start_run, trio_token=sim_token)
                await owui.finished.wait()
                writers = list(owui.tasks.values())
                await asyncio.gather(*writers)  # the writer's task ends with it, not by a cancel
                kinds = [e["type"] for _, c, m, e in owui.emitted if (c, m) == (chat_id, message_id)]
                assert kinds[0] == "chat:messages" and "chat:completion" in kinds
                # introduced, then the finished message again for tabs that loaded the chat meanwhile (seed 003)
                assert kinds.count("chat:messages") == 2 and kinds[-1] == "chat:active"
                assert len(writers) == 1 and owui.item_tasks.get(chat_id) == []
                assert runtime.client.connections_opened == 1  # the agent id changed no connection setting
            finally:
                await process.shutdown()
            assert trio_host.process_host().ended
            assert not any("owui.settings_applied" in r.getMessage() for r in caplog.records)

        with asyncio.Runner() as runner:
            runner.run(body())

    store = ChatStore(make_engine(url))
    message = store.read_chat(chat_id)["history"]["messages"][message_id]
    store.engine.dispose()
    assert message["done"] is True and message["content"].startswith("Cron says hi.")
    assert any(item.get("type") == "function_call" for item in message["output"])
    assert message["meta"]["task_id"].startswith("t")  # registered as a task of the chat, as Open WebUI's replies are


def test_a_run_still_going_when_open_webui_stops_leaves_its_message_to_the_next_process(tmp_path: Path) -> None:
    """Issue 25, item 1: Open WebUI stops (its shutdown sink closes owc) while an agent turn goes on at the Gateway.
    owc lets go of the message its writer held, so the next process takes it at once and streams the run with a
    working Stop (before, the next process stood by until the run's end: the tab kept open across the restart
    showed neither the run nor a Stop that could reach it). The message stays owed its finish."""
    url = f"sqlite:///{tmp_path / 'webui.db'}"
    store = ChatStore(make_engine(url))
    store.create_tables()
    chat_id = str(uuid.uuid4())
    store.create_chat(chat_id, USER)
    store.engine.dispose()
    key = ids.session_key("main", USER, chat_id)
    message_id = ids.message_id(key, "going-on")

    with simulator_thread(TOKEN) as (sim, sim_token):

        async def body() -> None:
            owui = WatchedOpenWebUI()
            settings = HostSettings(gateway_url=sim.url, token=TOKEN, database_url=url)
            runtime = await process.ensure_started(settings, owui)
            try:
                await trio_host.process_host().run_in_trio(runtime.connected)

                def start_run() -> None:
                    sim.start_run(key, "going-on").text("Still working.")

                await asyncio.to_thread(trio.from_thread.run_sync, start_run, trio_token=sim_token)
                while not owui.response_streams:  # the writer streams: it holds the message
                    await owui.streamed.wait()
                    owui.streamed.clear()
            finally:
                await process.shutdown()

        with asyncio.Runner() as runner:
            runner.run(body())

    store = ChatStore(make_engine(url))
    message = store.read_chat(chat_id)["history"]["messages"][message_id]
    store.engine.dispose()
    assert message["done"] is False and message["meta"]["openclaw_open"] is True
    assert "openclaw_writer" not in message["meta"]  # nobody's: the next process's writer takes it at once


def test_a_persons_turn_is_stopped_though_the_cancel_lands_outside_its_stream(tmp_path: Path) -> None:
    """Issue 25, item 1: Open WebUI's middleware is awaiting something else (the socket, its own save) when a stop
    request cancels the request's task, and swallows the cancel (``process_chat`` does): the Pipe's stream never sees
    a ``CancelledError``, only its close. owc reads the stop request's record at the request task's end all the same
    (the task ends with its cancel still counted), so the Stop aborts the agent's run at the Gateway. A "Send now"
    the same way leaves the run going. (Before, the intent was read only in the stream's ``except``: measured on the
    real server, a "Send now" and a Stop landing there were never read.)"""
    from owc.owui import pipe

    url = f"sqlite:///{tmp_path / 'webui.db'}"
    store = ChatStore(make_engine(url))
    store.create_tables()
    chats = [str(uuid.uuid4()) for _ in range(2)]
    for chat_id in chats:
        store.create_chat(chat_id, USER)
        store.add_turn(chat_id, f"u-{chat_id}", f"m-{chat_id}", text="SLOW please")
    store.engine.dispose()

    with simulator_thread(TOKEN) as (sim, sim_token):

        async def request(owui: WatchedOpenWebUI, chat_id: str, said: str) -> Any:
            """Open WebUI's request task for one turn: it streams the Pipe's output, awaiting the socket between
            items, where the stop request's cancel lands; it closes the stream and swallows the cancel. Returns the
            simulator's run."""
            key = ids.session_key("main", USER, chat_id)
            turn = pipe.Turn(
                chat_id=chat_id,
                message_id=f"m-{chat_id}",
                user_id=USER,
                session_key=key,
                run_id=ids.input_run_id(chat_id, f"m-{chat_id}", "t"),
                text="SLOW please",
                model=None,
            )
            first, socket = asyncio.Event(), asyncio.Event()

            async def middleware() -> None:
                stream = pipe.user_turn(turn)
                try:
                    async for _ in stream:
                        first.set()
                        await socket.wait()  # never set: the cancel lands here, outside the stream
                except asyncio.CancelledError:
                    await stream.aclose()  # the stream sees only its close
                    return  # "Chat processing was cancelled"

            task = asyncio.get_running_loop().create_task(middleware())
            await first.wait()
            run = await asyncio.to_thread(trio.from_thread.run_sync, lambda: sim.active_run(key), trio_token=sim_token)
            owui.record_stop(chat_id, said, USER)  # owc's stop route, before Open WebUI cancels the request
            task.cancel()
            await task
            return run

        async def body() -> None:
            owui = WatchedOpenWebUI()
            settings = HostSettings(gateway_url=sim.url, token=TOKEN, database_url=url)
            runtime = await process.ensure_started(settings, owui)
            try:
                await trio_host.process_host().run_in_trio(runtime.connected)
                stopped = await request(owui, chats[0], "stop")
                kept = await request(owui, chats[1], "send_now")

                def ended(run: Any) -> Any:
                    async def wait() -> None:
                        with trio.move_on_after(30):  # timer-ok: a harness bound; the assertion below says what failed
                            await sim.wait_for(lambda: run.run.terminal is not None)

                    return wait

                await asyncio.to_thread(trio.from_thread.run, ended(stopped), trio_token=sim_token)
                assert stopped.run.terminal == "aborted"  # the Gateway's own record
                assert kept.run.terminal is None  # "Send now": the run goes on

                def finish() -> None:
                    kept.text(" and done.").end()

                await asyncio.to_thread(trio.from_thread.run_sync, finish, trio_token=sim_token)
                await asyncio.to_thread(trio.from_thread.run, ended(kept), trio_token=sim_token)
                assert kept.run.terminal == "final"
            finally:
                await process.shutdown()

        with asyncio.Runner() as runner:
            runner.run(body())

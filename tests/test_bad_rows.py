"""One session row of an unexpected type costs only itself (issue 11): the rest of a ``sessions.list`` counts,
and nothing is concluded about the unreadable row's session (its runs are not ended by their "absence")."""

from __future__ import annotations

from owc import ids
from owc.gateway import ActiveRuns
from owc.protocol import parse_sessions_list

from harness import open_env

KEY = "agent:main:openwebui-u-5f0c9f2e-8a51-4b1e-9d7a-0c6f2b1e4a55"
OTHER = "agent:main:openwebui-u-6f0c9f2e-8a51-4b1e-9d7a-0c6f2b1e4a55"


def test_a_bad_row_is_skipped_and_named(caplog) -> None:
    listed = parse_sessions_list(
        {
            "sessions": [
                {"key": KEY, "hasActiveRun": False, "activeRunIds": []},
                {"key": OTHER, "updatedAt": "yesterday"},
                {"updatedAt": 1, "lastRunError": {"code": 1}},
                {"key": "agent:main:main", "hasActiveRun": "yes"},
            ]
        }
    )
    assert [row.key for row in listed.sessions] == [KEY]
    assert listed.unreadable == 3 and listed.unreadable_keys == (OTHER, "agent:main:main")
    assert not listed.complete  # one unreadable row has no key: the list cannot say what is absent
    assert sum("protocol.bad_session_row" in r.getMessage() for r in caplog.records) == 3


def test_runs_of_an_unreadable_row_are_not_ended_by_it() -> None:
    active = ActiveRuns()
    active.carry([(OTHER, "r1"), (KEY, "r2")])
    listed = parse_sessions_list({"sessions": [{"key": KEY, "activeRunIds": []}, {"key": OTHER, "hasActiveRun": "x"}]})
    assert listed.complete  # every unreadable row named its key
    resync = active.resync(listed.sessions, "gap", complete=listed.complete, unreadable_keys=listed.unreadable_keys)
    assert resync.ended == ((KEY, "r2"),)  # r1's session could not be read: nothing is concluded about it


async def test_a_bad_row_in_the_subscribe_does_not_stop_owc(tmp_path, clock) -> None:
    """Before, one row with ``hasActiveRun: "yes"`` failed the whole subscribe: owc reconnected forever and
    processed nothing."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        real_list = env.sim.rpc._list

        def with_a_bad_row(params):
            listed = real_list(params)
            listed["sessions"].append({"key": "agent:main:main", "hasActiveRun": "yes", "updatedAt": "now"})
            return listed

        env.sim.rpc._list = with_a_bad_row
        keeper = await env.connect()
        env.sim.start_run(key, "despite").text("Shown despite a bad row.").end()
        await env.settled()
        assert env.clients["A"].connections_opened == 1
        message = (await env.messages(chat_id))[ids.message_id(key, "despite")]
        assert message["done"] and message["content"] == "Shown despite a bad row."
        assert keeper.totals() == (1, 1)

"""The usage line after a finished reply (issue 28, inventory C9/C10): the pure formatter against the shapes measured
on the real Gateway 2026.9.6 (``docs/measured/usage-thinking-2026.9.6.md``), and owc with the simulator: the lines
land on the finished message and its tabs, only for a reply that ended done, and not at all with the option off."""

from __future__ import annotations

import pytest

from owc import ids
from owc.render import usage
from owc.sim.model import PROVIDER

from harness import open_env

RUN = "run-1"
#: ``sessions.describe`` after a run, as measured (the fields the usage line reads, the rest trimmed).
DESCRIBED = {
    "session": {
        "key": "agent:main:openwebui-u-c",
        "status": "done",
        "lastRunId": RUN,
        "inputTokens": 10,
        "outputTokens": 10,
        "totalTokens": 115_000,
        "totalTokensFresh": True,
        "contextTokens": 1_000_000,
        "modelProvider": "anthropic",
        "model": "claude",
    }
}
NOW = 1_796_184_692_918
STATUS = {
    "updatedAt": NOW,
    "providers": [
        {"provider": "openai", "displayName": "OpenAI", "windows": [{"label": "5h", "usedPercent": 99}]},
        {
            "provider": "anthropic",
            "displayName": "Claude",
            "windows": [
                {"label": "5h", "usedPercent": 24, "resetAt": NOW + 22 * 60_000},
                {"label": "Week", "usedPercent": 60.4, "resetAt": NOW + 3 * 86_400_000},
            ],
        },
    ],
}


def describe(**fields: object) -> dict:
    return {"session": {**DESCRIBED["session"], **fields}}


def test_context_limits_and_the_combined_line_last() -> None:
    assert usage.lines(usage.usage_of(DESCRIBED, STATUS, RUN)) == (
        "Context 115k / 1.0m (11.5%)",
        "5h 76% left, resets in 22m",
        "Week 40% left, resets in 3d",
        "115k / 1.0m (11.5%) context · 5h 76% left · Week 40% left",
    )


def test_the_measured_offline_gateway_gives_the_context_alone() -> None:
    offline = describe(totalTokens=10, contextTokens=128_000, modelProvider="fake")
    assert usage.lines(usage.usage_of(offline, {"updatedAt": NOW, "providers": []}, RUN)) == (
        "Context 10 / 128k (0.0%)",
    )


@pytest.mark.parametrize(
    ("session", "why"),
    [
        ({"lastRunId": "another-run"}, "the row is another run's"),
        ({"status": "failed"}, "a failed run's row keeps the previous run's counts"),
        ({"status": "killed"}, "a stopped run"),
        ({"totalTokensFresh": False}, "the count is not this run's"),
        ({"totalTokens": 0}, "nothing counted"),
        ({"totalTokens": None}, "missing is unknown, never 0"),
    ],
)
def test_nothing_rather_than_something_stale(session: dict, why: str) -> None:
    assert usage.lines(usage.usage_of(describe(**session), None, RUN)) == (), why


def test_an_unknown_session_or_failed_reads_show_nothing() -> None:
    assert usage.lines(usage.usage_of({"session": None}, STATUS, RUN)) == ()
    assert usage.lines(usage.usage_of(None, None, RUN)) == ()
    # The limits are the session's provider's: without the describe, no provider, no windows.
    assert usage.lines(usage.usage_of(None, STATUS, RUN)) == ()


def test_a_summary_stands_in_for_windows_and_a_goal_is_said() -> None:
    status = {"updatedAt": NOW, "providers": [{"provider": "anthropic", "summary": " Balance $4.58 ", "windows": []}]}
    goal = {"status": "active", "objective": "Ship   the\nrelease", "tokensUsed": 12_000, "tokenBudget": 50_000}
    got = usage.lines(usage.usage_of(describe(goal=goal), status, RUN))
    assert got == (
        "Context 115k / 1.0m (11.5%)",
        "Balance $4.58",
        "Goal: Ship the release (12k / 50k tokens)",
        "115k / 1.0m (11.5%) context · Balance $4.58 · goal active",
    )


def test_a_paused_goal_and_bad_windows_are_left_out() -> None:
    status = {
        "updatedAt": NOW,
        "providers": [
            {"provider": "anthropic", "windows": [{"label": "5h", "usedPercent": 140}, {"usedPercent": 5}, "x"]}
        ],
    }
    got = usage.lines(usage.usage_of(describe(goal={"status": "paused", "objective": "x"}), status, RUN))
    assert got == ("Context 115k / 1.0m (11.5%)",)


def test_a_provider_in_error_shows_no_windows() -> None:
    status = {"updatedAt": NOW, "providers": [{"provider": "anthropic", "error": "HTTP 401", "windows": []}]}
    assert usage.lines(usage.usage_of(describe(), status, RUN)) == ("Context 115k / 1.0m (11.5%)",)


@pytest.mark.parametrize(
    ("n", "shown"), [(950, "950"), (1_500, "1.5k"), (12_000, "12k"), (115_000, "115k"), (1_000_000, "1.0m")]
)
def test_tokens_read_as_a_person_reads_them(n: int, shown: str) -> None:
    assert usage.tokens(n) == shown


@pytest.mark.parametrize(
    ("ms", "shown"), [(0, "0m"), (22 * 60_000, "22m"), (90 * 60_000, "1h 30m"), (3 * 86_400_000, "3d")]
)
def test_reset_times(ms: int, shown: str) -> None:
    assert usage.relative(ms) == shown


def test_resets_count_from_the_gateways_time_not_owcs() -> None:
    # The same read says the same, whenever owc formats it.
    assert usage.window_line(usage.Window("5h", 24, NOW + 60_000), NOW) == "5h 76% left, resets in 1m"
    assert usage.window_line(usage.Window("5h", 24, NOW - 1), NOW) == "5h 76% left"  # already reset: no time


# ---------------------------------------------------------------------------------------------- owc + simulator


def _lines(message: dict) -> list[str]:
    return [e["description"] for e in message.get("statusHistory") or []]


async def test_a_finished_agent_turn_ends_with_its_usage_line(tmp_path, clock) -> None:
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        env.sim.rpc.session_usage[key] = {"totalTokens": 115_000, "totalTokensFresh": True, "contextTokens": 1_000_000}
        env.sim.rpc.usage_providers.append(
            {
                "provider": PROVIDER,
                "windows": [{"label": "5h", "usedPercent": 24, "resetAt": env.sim.now_ms() + 1_320_000}],
            }
        )
        env.sim.start_run(key, "u-1").text("Done.").end()
        await env.settled()
        m = ids.message_id(key, "u-1")
        message = (await env.messages(chat_id))[m]
        assert message["content"] == "Done." and message["done"] is True
        assert _lines(message)[-3:] == [
            "Context 115k / 1.0m (11.5%)",
            "5h 76% left, resets in 22m",
            "115k / 1.0m (11.5%) context · 5h 76% left",
        ]
        assert all(e["done"] is True for e in message["statusHistory"])
        told = [e.event["data"]["description"] for e in env.emitter.of(m, "status")]
        assert told[-1] == "115k / 1.0m (11.5%) context · 5h 76% left"  # the tabs were told, live


async def test_a_failed_reply_gets_no_usage_line(tmp_path, clock) -> None:
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        env.sim.rpc.session_usage[key] = {"totalTokens": 115_000, "totalTokensFresh": True, "contextTokens": 1_000_000}
        env.sim.start_run(key, "u-2").text("Trying.").end("error", error="boom")
        await env.settled()
        message = (await env.messages(chat_id))[ids.message_id(key, "u-2")]
        assert not any("Context" in line for line in _lines(message))


async def test_the_option_off_reads_nothing(tmp_path, clock) -> None:
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        keeper.usage_line = False  # the valve, saved: from the next reply
        env.sim.rpc.session_usage[key] = {"totalTokens": 115_000, "totalTokensFresh": True, "contextTokens": 1_000_000}
        env.sim.start_run(key, "u-3").text("Done.").end()
        await env.settled()
        message = (await env.messages(chat_id))[ids.message_id(key, "u-3")]
        assert not any("Context" in line for line in _lines(message))
        assert env.sim.requests["usage.status"] == 0

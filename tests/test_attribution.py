"""Every episode's outcome lands on its own episode: a policy that raises or hangs at some seeds of a
vectorized benchmark fails those seeds' episodes alone, and every other seed plays to its own end."""

from __future__ import annotations

from typing import Literal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toys
from conftest import toy
from toys import fate_steps
from yardstick.engine import Component, RunRequest, Work, evaluate
from yardstick.engine.failures import FailureKind
from yardstick.sdk.episode import Episode
from yardstick.wire.server.host import PolicyHost

Fate = Literal["ok", "raise", "hang"]
SEEDS = range(12)
# Short enough that a few hangs cost a few seconds; long enough that a quiet call never overruns it.
CALL_LIMIT_S = 0.5


def fates() -> st.SearchStrategy[dict[int, Fate]]:
    """A fate for each seed, at most two hangs (each costs a call limit)."""
    return st.lists(st.sampled_from(["ok", "ok", "raise", "hang"]), min_size=12, max_size=12).map(
        lambda drawn: _at_most_two_hangs(dict(enumerate(drawn)))
    )


def _at_most_two_hangs(drawn: dict[int, Fate]) -> dict[int, Fate]:
    hangs = [seed for seed, fate in drawn.items() if fate == "hang"]
    return {seed: ("ok" if seed in hangs[2:] else fate) for seed, fate in drawn.items()}


def played(fate_of: dict[int, Fate], *, worlds: int, workers: int = 0) -> dict[int, dict[str, object]]:
    policy = Component(
        toy("Fated"),
        {
            "raise_at": [s for s, f in fate_of.items() if f == "raise"],
            "hang_at": [s for s, f in fate_of.items() if f == "hang"],
        },
    )
    work = Work(Component(toy("Fates")), policy, call_timeout_s=CALL_LIMIT_S, worlds=worlds)
    outcome = evaluate(RunRequest(work=work, trials=len(SEEDS), workers=workers))
    assert len(outcome.results) == len(SEEDS)
    return {r.seed: r.outcome() for r in outcome.results}


def check(fate_of: dict[int, Fate], by_seed: dict[int, dict[str, object]]) -> None:
    assert sorted(by_seed) == list(SEEDS)  # every seed played, each once
    for seed, fate in fate_of.items():
        got = by_seed[seed]
        if fate == "raise":
            assert got["failure"] == FailureKind.POLICY_CRASH, (seed, got)
            assert f"boom at seed {seed}" in str(got["error"])
        elif fate == "hang":
            assert got["failure"] == FailureKind.POLICY_TIMEOUT, (seed, got)
            assert f"{CALL_LIMIT_S:g} s limit" in str(got["error"])
        else:
            assert got["error"] is None, (seed, got)
            assert got["steps"] == fate_steps(seed) and got["success"] == (seed % 2 == 0)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fates())
def test_each_seeds_error_hang_or_success_is_its_own_on_four_worlds(fate_of: dict[int, Fate]) -> None:
    check(fate_of, played(fate_of, worlds=4))


def test_four_worlds_give_the_outcomes_of_one_world_at_a_time() -> None:
    fate_of: dict[int, Fate] = {s: ("raise" if s in (1, 6) else "hang" if s == 3 else "ok") for s in SEEDS}
    together = played(fate_of, worlds=4)
    check(fate_of, together)
    alone = played(fate_of, worlds=1)
    strip = {"wall_seconds", "timing"}
    assert {s: {k: v for k, v in o.items() if k not in strip} for s, o in together.items()} == {
        s: {k: v for k, v in o.items() if k not in strip} for s, o in alone.items()
    }


def test_a_batched_policy_raising_for_one_world_fails_that_worlds_episode_alone() -> None:
    raise_at = [1, 6]
    work = Work(
        Component(toy("Fates")),
        Component(toy("FatedBatch"), {"raise_at": raise_at}),
        call_timeout_s=CALL_LIMIT_S,
        worlds=4,
    )
    outcome = evaluate(RunRequest(work=work, trials=len(SEEDS), workers=0))
    check(
        {s: ("raise" if s in raise_at else "ok") for s in SEEDS},
        {r.seed: r.outcome() for r in outcome.results},
    )


def test_in_a_pool_each_seed_keeps_its_own_outcome() -> None:
    fate_of: dict[int, Fate] = {s: ("raise" if s in (2, 5) else "hang" if s == 7 else "ok") for s in SEEDS}
    check(fate_of, played(fate_of, worlds=4, workers=1))


def test_a_policy_server_begins_each_episode_before_its_first_answer_however_requests_batch() -> None:
    host = PolicyHost(toys.SessionsKept, model_id="kept", reference="toys:SessionsKept")
    episodes = [Episode(id=name, task="walk", description="", seed=0, trial=0) for name in "ABCD"]
    # Queued before the slot thread runs, as four worlds' sessions open at once: each episode's start,
    # then its first request. Gathering a batch meets the next start; it must not be called late.
    futures = []
    for episode in episodes:
        futures.append(host.begin(episode))
        futures.append(host.infer(episode, {"t": 0}, 0))
    host.start()
    try:
        for future in futures:
            future.result(timeout=60)
    finally:
        host.stop()


def test_an_episode_that_fails_to_start_on_the_only_world_leaves_the_rest_to_play() -> None:
    work = Work(Component(toy("Tally")), Component(toy("NoStartAtOne")), call_timeout_s=5.0)
    outcome = evaluate(RunRequest(work=work, tasks=["three"], trials=4, workers=0))
    by_seed = {r.seed: r for r in outcome.results}
    assert sorted(by_seed) == [0, 1, 2, 3]
    assert by_seed[1].failure == FailureKind.POLICY_SETUP_CRASH and "restarting" in str(by_seed[1].error)
    assert all(by_seed[s].finished for s in (0, 2, 3))

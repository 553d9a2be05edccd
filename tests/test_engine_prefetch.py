"""A prefetching policy (the Sequences contract's playback) is asked `action_chunk_exec_len` steps into the
chunk playing and its answer plays once that chunk's rows have: the exact step each row plays at, the same
playback as today's when the two lengths are equal, and the same over a unix socket as in process."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import toy

sys.path.insert(0, str(Path(__file__).parent))
import toys
from yardstick.engine import Component, Playback, RunRequest, Work, evaluate
from yardstick.engine.guard import Guard
from yardstick.engine.loop import play
from yardstick.engine.results import EpisodeResult, EpisodeSpec
from yardstick.engine.worlds import SingleWorld
from yardstick.sdk.calls import InProcessPolicy
from yardstick.sdk.decorators import benchmark_spec, infer, policy, policy_spec
from yardstick.wire.server.host import PolicyHost
from yardstick.wire.server.serve import PolicyServer, ServeOptions


def numbered(rows: int, **declared: Any) -> type:
    """A policy whose chunk asked at step t holds rows t*100 + i, i < rows: what plays says when it was
    asked and which row it is."""

    @policy(hz=10, **declared)
    class Numbered:
        @infer
        def act(self, obs: dict[str, Any]) -> np.ndarray:
            return np.array([[obs["t"] * 100 + i] for i in range(rows)], dtype=np.float64)

    return Numbered


def played(
    policy_cls: type, task: str = "ten", playback: Playback = Playback()
) -> tuple[list[float], EpisodeResult]:
    bench = toys.Tally()
    spec = benchmark_spec(toys.Tally)
    driver = InProcessPolicy(policy_cls(), policy_spec(policy_cls))
    with Guard(5.0) as guard:
        [result] = play(
            iter([EpisodeSpec(index=0, task=task, trial=0, seed=0)]),
            SingleWorld(bench, spec),
            driver,
            spec,
            guard,
            playback,
        )
    return [float(np.asarray(a).ravel()[0]) for a in bench.played], result


def test_an_answer_asked_at_replan_at_plays_from_valid_len() -> None:
    # Valid 4, replan at 2: asked at steps 0, 2, 6; the chunk asked at 2 plays from step 4 (its row 0 at
    # step 4), the one asked at 6 from step 8; in between the chunk playing plays all of its 4 rows.
    rows, result = played(numbered(4, action_chunk_len=4, action_chunk_exec_len=2, prefetch=True))
    assert rows == [0, 1, 2, 3, 200, 201, 202, 203, 600, 601]
    assert (result.steps, result.inferences) == (10, 3)


def test_a_chunk_shorter_than_valid_len_is_swapped_when_its_rows_run_out() -> None:
    # Valid 8, replan at 2, answers of 3 rows: the next plays when the 3 rows have played.
    rows, result = played(numbered(3, action_chunk_len=8, action_chunk_exec_len=2, prefetch=True))
    assert rows == [0, 1, 2, 200, 201, 202, 500, 501, 502, 800]
    assert result.inferences == 4  # asked at steps 0, 2, 5 and 8


def test_a_replan_at_the_last_valid_row_asks_when_the_rows_run_out() -> None:
    rows, _ = played(numbered(4, action_chunk_len=4, action_chunk_exec_len=3, prefetch=True))
    assert rows == [0, 1, 2, 3, 300, 301, 302, 303, 700, 701]


CASES = [
    ({"action_chunk_len": 4, "action_chunk_exec_len": 4}, 4, Playback()),
    ({"action_chunk_len": 4}, 6, Playback()),  # exec_len unset: asked when the valid rows run out
    ({"action_chunk_len": 8, "action_chunk_exec_len": 8}, 3, Playback()),  # answers shorter than valid
    ({"action_chunk_len": 1, "action_chunk_exec_len": 1}, 1, Playback()),
    ({"action_chunk_len": 4, "action_chunk_exec_len": 4}, 4, Playback(charge_inference=True, latency_ms=250)),
]


@pytest.mark.parametrize(("declared", "rows", "playback"), CASES)
def test_with_replan_at_equal_to_valid_len_prefetch_is_todays_playback(
    declared: dict[str, Any], rows: int, playback: Playback
) -> None:
    today, before = played(numbered(rows, **declared), "never", playback)
    ahead, after = played(numbered(rows, **declared, prefetch=True), "never", playback)
    assert ahead == today
    assert after.outcome() == before.outcome()
    assert len(today) == 20  # the whole episode (2 s at 10 Hz), not a prefix


def test_without_prefetch_the_answer_plays_at_once() -> None:
    rows, _ = played(numbered(4, action_chunk_len=4, action_chunk_exec_len=2))
    assert rows == [0, 1, 200, 201, 400, 401, 600, 601, 800, 801]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    socket = tmp_path_factory.mktemp("prefetch") / "rows.sock"
    host = PolicyHost(toys.PrefetchRows, model_id="rows", reference=toy("PrefetchRows"))
    server = PolicyServer({"rows": host}, ServeOptions(port=None, uds=str(socket))).start()
    try:
        yield f"ws+unix://{socket}/api/v1/session"
    finally:
        server.stop()


def test_a_prefetching_policy_over_a_unix_socket_plays_as_in_process(served: str) -> None:
    def outcomes(policy_ref: str) -> list[dict[str, Any]]:
        work = Work(
            Component(toy("Tally")), Component(policy_ref), call_timeout_s=10.0, startup_timeout_s=5.0
        )
        outcome = evaluate(RunRequest(work=work, workers=0, tasks=["ten"], trials=2))
        return [r.outcome() for r in outcome.results]

    here = outcomes(toy("PrefetchRows"))
    assert outcomes(served) == here
    # The totals are the sums of the rows played: 0+1+2+3 + 200..203 + 600+601.
    assert [r["metrics"]["total"] for r in here] == [1.0 * (6 + 806 + 1201)] * 2

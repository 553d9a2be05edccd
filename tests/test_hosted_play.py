"""A hosted benchmark played in a box, its policy served in another and reached on a unix socket, gives the
episodes `yardstick eval run` gives in process; the box has no network and writes only its scratch; a crash
or a hang in it fails its episode alone; closing a box or a server leaves nothing running."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hosted_helpers import bundle_of, example, listening, needs_bwrap, processes_mentioning
from yardstick.engine import Component, RunRequest, Work, evaluate
from yardstick.engine.failures import FailureKind
from yardstick.engine.recording import Recording
from yardstick.engine.results import EpisodeSpec
from yardstick.worker.boxes.player import BoxedExecutor
from yardstick.worker.boxes.server import BoxedPolicyServer, ServerFailed

pytestmark = needs_bwrap

ZERO_POLICY = """\
import seq


@seq.policy(name="zero", hz=10, action_chunk_valid_len=1)
class Zero:
    @seq.infer
    def infer(self, obs):
        return [[0.0]]
"""

PROBES = """\
import os
import signal
import socket
import time

import seq


@seq.benchmark(tasks={"ok": "", "exit": "", "hang": "", "slow": "", "probe": ""}, seeds=[0], max_seconds=0.3)
class Probes:
    def __init__(self, port: int = 0, target: str = ""):
        self.port, self.target = port, target

    @seq.reset
    def reset(self, task, seed):
        self.task = task
        return {"task": task}

    @seq.step
    def step(self, action):
        if self.task == "exit":
            os._exit(3)
        if self.task == "hang":
            # Stuck where no alarm reaches (as C code is): only the box's death ends it.
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            time.sleep(1000)
        if self.task == "slow":
            time.sleep(1000)
        metrics = {}
        if self.task == "probe":
            where = ("127.0.0.1", self.port)
            metrics["reached"] = _tried(lambda: socket.create_connection(where, timeout=1).close())
            metrics["wrote"] = _tried(lambda: open(os.path.join(self.target, "evil"), "w").close())
        return {"task": self.task}, True, True, metrics


def _tried(call):
    try:
        call()
        return 1.0
    except OSError:
        return 0.0
"""


@pytest.fixture
def sockets() -> Iterator[Path]:
    # Short: a unix socket's path is at most 107 bytes.
    folder = Path(tempfile.mkdtemp(prefix="ys-sock-"))
    yield folder
    shutil.rmtree(folder)


def outcomes(results: Any) -> list[dict[str, Any]]:
    return [r.outcome() for r in sorted(results, key=lambda r: r.index)]


def test_boxed_episodes_are_those_played_in_process(tmp_path: Path, sockets: Path) -> None:
    bench = bundle_of(example("reach_bench.py", "benchmark.py"), tmp_path / "bench").folder
    policy = bundle_of(example("reach_policy.py", "policy.py"), tmp_path / "policy").folder
    here = evaluate(
        RunRequest(
            work=Work(
                Component(f"{bench}/benchmark.py:ReachBench"), Component(f"{policy}/policy.py:ReachPolicy")
            ),
            trials=3,
            workers=0,
        )
    )
    assert len(here.results) == 6 and all(r.finished for r in here.results)
    server = BoxedPolicyServer(policy, "policy:ReachPolicy", {}, sockets)
    try:
        assert server.spec.hz == 10.0 and server.url.startswith("ws+unix://")
        work = Work(Component("benchmark:ReachBench"), Component(server.url), call_timeout_s=10.0)
        with BoxedExecutor(bench) as boxed:
            assert outcomes(boxed.run(work, here.planned)) == outcomes(here.results)
            # Kept warm: a second batch plays in the same box.
            assert outcomes(boxed.run(work, here.planned[:2])) == outcomes(here.results[:2])
            assert len(boxed.cold_starts) == 1
        assert processes_mentioning(str(bench)) == []
    finally:
        server.close()
    assert processes_mentioning(str(server.socket)) == [] and not server.alive()
    assert list(sockets.iterdir()) == []  # its socket and its folder went with it


def test_a_boxed_benchmark_reaches_no_network_and_writes_nothing_outside(tmp_path: Path) -> None:
    folder = bundle_of({"benchmark.py": PROBES, "policy.py": ZERO_POLICY}, tmp_path / "b").folder
    outside = tmp_path / "outside"
    outside.mkdir()
    episode = [EpisodeSpec(index=0, task="probe", trial=0, seed=0)]
    with listening() as port:
        params = {"port": port, "target": str(outside)}
        work = Work(Component("benchmark:Probes", params), Component("policy:Zero"))
        with BoxedExecutor(folder) as boxed:
            [boxed_result] = boxed.run(work, episode)
        # The same episode in process reaches both, so the box is what stops them.
        [here] = evaluate(
            RunRequest(
                work=Work(
                    Component(f"{folder}/benchmark.py:Probes", params), Component(f"{folder}/policy.py:Zero")
                ),
                tasks=["probe"],
                workers=0,
            )
        ).results
    assert (boxed_result.metrics["reached"], boxed_result.metrics["wrote"]) == (0.0, 0.0)
    assert (here.metrics["reached"], here.metrics["wrote"]) == (1.0, 1.0)


def test_a_crash_or_a_hang_in_the_box_fails_its_episode_alone(tmp_path: Path) -> None:
    folder = bundle_of({"benchmark.py": PROBES, "policy.py": ZERO_POLICY}, tmp_path).folder
    tasks = ["ok", "exit", "ok", "hang", "slow", "ok"]
    episodes = [EpisodeSpec(index=i, task=t, trial=0, seed=0) for i, t in enumerate(tasks)]
    work = Work(Component("benchmark:Probes"), Component("policy:Zero"), call_timeout_s=1.0)
    with BoxedExecutor(folder, hang_grace_s=1.0) as boxed:
        results = {r.index: r for r in boxed.run(work, episodes)}
        assert [results[i].failure for i in range(len(tasks))] == [
            None,
            FailureKind.BENCHMARK_CRASH,
            None,
            FailureKind.BENCHMARK_TIMEOUT,
            FailureKind.BENCHMARK_TIMEOUT,
            None,
        ]
        assert "exited with status 3" in (results[1].error or "")
        assert "did not yield to the alarm" in (results[3].error or "")
        assert "ran past its 1 s limit" in (results[4].error or "")  # cut by the alarm: the box lived on
        assert all(results[i].success for i in (0, 2, 5))
        # A box for the first episodes, one after the crash, one after the hang.
        assert len(boxed.cold_starts) == 3
    assert processes_mentioning(str(folder)) == []


def test_a_recording_lands_in_the_runs_folder(tmp_path: Path) -> None:
    folder = bundle_of({"benchmark.py": PROBES, "policy.py": ZERO_POLICY}, tmp_path / "b").folder
    recorded = tmp_path / "recordings"
    work = Work(
        Component("benchmark:Probes"),
        Component("policy:Zero"),
        recording=Recording(trajectory=True, folder=str(recorded)),
    )
    with BoxedExecutor(folder) as boxed:
        [result] = boxed.run(work, [EpisodeSpec(index=7, task="ok", trial=0, seed=0)])
    assert result.artifacts and result.recording_error is None
    assert all((recorded / relative).is_file() for relative in result.artifacts)


def test_a_policy_the_box_cannot_reach_is_refused(tmp_path: Path) -> None:
    folder = bundle_of({"benchmark.py": PROBES}, tmp_path).folder
    work = Work(Component("benchmark:Probes"), Component("ws://127.0.0.1:8000/api/v1/session"))
    with BoxedExecutor(folder) as boxed, pytest.raises(ValueError, match="no network"):
        list(boxed.run(work, [EpisodeSpec(index=0, task="ok", trial=0, seed=0)]))


def test_a_policy_that_cannot_be_served_says_why(tmp_path: Path, sockets: Path) -> None:
    broken = ZERO_POLICY.replace(
        "class Zero:", "class Zero:\n    def __init__(self):\n        raise RuntimeError('no checkpoint')\n"
    )
    folder = bundle_of({"policy.py": broken}, tmp_path).folder
    with pytest.raises(ServerFailed) as failed:
        BoxedPolicyServer(folder, "policy:Zero", {}, sockets, start_timeout_s=30)
    assert failed.value.kind is FailureKind.POLICY_SETUP_CRASH
    assert "no checkpoint" in failed.value.reason
    assert processes_mentioning(str(folder)) == []


# The benchmark speaks on its runner's own channel, as only the runner should.
FORGER = """\
import gc

import seq


def channel():
    return next(o for o in gc.get_objects() if type(o).__name__ == "_Channel")


@seq.benchmark(tasks={"files": "", "result": "", "robot_time": ""}, seeds=[0], max_seconds=0.3)
class Forger:
    @seq.reset
    def reset(self, task, seed):
        self.task = task
        return {"task": task}

    @seq.step
    def step(self, action):
        if self.task == "files":
            channel().send({"file": "../../../etc/passwd", "data": "eA=="})
        if self.task == "result":
            channel().send({"result": {"index": 99, "task": "files", "trial": 0, "seed": 0, "repeat": False}})
        return {"task": self.task}, True, True
"""


def test_a_box_that_forges_its_runners_messages_fails_its_own_episode(tmp_path: Path) -> None:
    folder = bundle_of({"benchmark.py": FORGER, "policy.py": ZERO_POLICY}, tmp_path / "b").folder
    recorded = tmp_path / "recordings"
    work = Work(
        Component("benchmark:Forger"),
        Component("policy:Zero"),
        recording=Recording(trajectory=True, folder=str(recorded)),
    )
    episodes = [EpisodeSpec(index=i, task=t, trial=0, seed=0) for i, t in enumerate(["files", "result"])]
    with BoxedExecutor(folder) as boxed:
        results = {r.index: r for r in boxed.run(work, episodes)}
    assert results[0].failure is FailureKind.BENCHMARK_CRASH and "out of turn" in (results[0].error or "")
    assert results[1].failure is FailureKind.BENCHMARK_CRASH
    assert "not playing" in (results[1].error or ""), results[1].error
    assert not any("passwd" in str(p) for p in recorded.rglob("*"))  # nothing landed outside its episode


def test_robot_time_is_its_steps_at_the_rate_the_platform_knows(tmp_path: Path) -> None:
    folder = bundle_of({"benchmark.py": FORGER, "policy.py": ZERO_POLICY}, tmp_path / "b").folder
    work = Work(Component("benchmark:Forger"), Component("policy:Zero"))
    episode = [EpisodeSpec(index=0, task="robot_time", trial=0, seed=0)]
    with BoxedExecutor(folder, policy_hz=4.0) as boxed:
        [result] = boxed.run(work, episode)
    assert result.steps == 1 and result.robot_seconds == 0.25  # at 4 Hz, whatever the box figured (10 Hz)

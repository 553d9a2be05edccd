"""Right numbers through the Sequences door, with the real `seq` CLI: on a vectorized benchmark an error is
recorded against the seed that raised it, and a deployment's `timeouts.request` is one answer's limit."""

from __future__ import annotations

import csv
import io
import re
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import fresh_database, one_database
from hosted_helpers import eval_id_of, seq_cli
from platform_harness import Harness, running_platform

# A vectorized benchmark whose observations say their world's seed: a row of the CSV can be checked
# against the seed that made it.
SEEDED_BENCH = """\
import seq


@seq.benchmark(name="seeded-bench", gpu="cpu", tasks={"walk": "done after 3 steps"}, seeds=[0, 1, 2, 3, 4, 5],
               max_seconds=2.0, init={"worlds": "{num_worlds}"})
class Seeded:
    def __init__(self, worlds):
        self.at = [(0, 0)] * worlds

    @seq.reset
    def reset(self, worlds, tasks, seeds):
        for w, s in zip(worlds, seeds, strict=True):
            self.at[w] = (s, 0)
        return [{"seed": s, "t": 0} for s in seeds]

    @seq.step
    @seq.concurrent(sizes=[4])
    def step(self, worlds, actions):
        out = []
        for w in worlds:
            seed, t = self.at[w][0], self.at[w][1] + 1
            self.at[w] = (seed, t)
            done = t >= 3 + seed % 3
            out.append(({"seed": seed, "t": t}, done, done and seed % 2 == 0))
        return out
"""

# The same episodes one world at a time.
SEEDED_ONE = """\
import seq


@seq.benchmark(name="seeded-one", gpu="cpu", tasks={"walk": "done after 3 steps"}, seeds=[0, 1, 2, 3, 4, 5],
               max_seconds=2.0)
class SeededOne:
    @seq.reset
    def reset(self, task, seed):
        self.seed, self.t = seed, 0
        return {"seed": seed, "t": 0}

    @seq.step
    def step(self, action):
        self.t += 1
        done = self.t >= 3 + self.seed % 3
        return {"seed": self.seed, "t": self.t}, done, done and self.seed % 2 == 0
"""

# A policy of other I/O ({"world": ...} in, {"move": ...} out) and the adapter between it and both benchmarks.
OTHER_POLICY = """\
import seq


@seq.policy(name="other-io", gpu="cpu", hz=10, action_chunk_valid_len=1, action_chunk_replan_at=1)
class OtherIO(seq.Policy):
    @seq.infer
    def infer(self, obs, *, scale: float = 1.0):
        return {"move": [scale * obs["world"]["seed"]]}
"""

ADAPTER = """\
import seq


@seq.adapter(name="to-other", pairs=[("seeded-bench", "other-io"), ("seeded-one", "other-io")])
class ToOther:
    @seq.observation
    def to_policy(self, obs):
        return {"world": obs}

    @seq.action
    def to_env(self, answer):
        return [answer["move"]]
"""

POLICY = """\
import time

import seq


@seq.policy(name="{name}", gpu="cpu", hz=10, action_chunk_valid_len=1, action_chunk_replan_at=1)
class Fated(seq.Policy):
    @seq.infer
    def infer(self, obs):
        if obs["t"] == 1 and obs["seed"] == {seed}:
            {what}
        return [[0.0]]
"""


@pytest.fixture(scope="module", params=one_database("sqlite"))
def platform(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    folder = tmp_path_factory.mktemp(request.param)
    with fresh_database(request.param, folder) as url, running_platform(folder, url, per_day=200) as harness:
        harness.wait_for_workers(60)
        yield harness


def seq(platform: Harness, *args: str) -> subprocess.CompletedProcess[str]:
    return seq_cli(platform.url, platform.keys["alice"], *args)


def deploy(platform: Harness, folder: Path, file: str, source: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / file).write_text(textwrap.dedent(source))
    done = seq(platform, "deploy", str(folder))
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def bench(platform: Harness, tmp_path_factory: pytest.TempPathFactory) -> str:
    deploy(platform, tmp_path_factory.mktemp("bench") / "seeded-bench", "benchmark.py", SEEDED_BENCH)
    return "seeded-bench"


def episodes(platform: Harness, eval_id: str) -> list[dict[str, str]]:
    """The eval's episodes as its CSV has them, once one failed or all played (the CLI stops following an
    eval at its first failed episode)."""
    deadline = time.monotonic() + 120
    while True:
        shown = seq(platform, "eval", "episodes", eval_id, "--csv")
        rows = list(csv.DictReader(io.StringIO(shown.stdout))) if shown.returncode == 0 else []
        if any(r["error"] for r in rows) or (rows and all(r["steps"] for r in rows)):
            return rows
        assert time.monotonic() < deadline, rows
        time.sleep(0.5)


def test_an_error_at_one_seed_of_four_worlds_is_that_seeds_own(
    platform: Harness, bench: str, tmp_path: Path
) -> None:
    source = POLICY.format(name="raises-at-2", seed=2, what='raise RuntimeError("boom at seed 2")')
    deploy(platform, tmp_path / "raises-at-2", "policy.py", source)
    ran = seq(platform, "eval", "run", "raises-at-2", "--benchmark", bench, "--trials", "6")
    assert ran.returncode != 0
    rows = episodes(platform, eval_id_of(ran.stdout + ran.stderr))
    errored = [r for r in rows if r["error"]]
    assert [r["seed"] for r in errored] == ["2"], rows
    assert "boom at seed 2" in errored[0]["error"]
    played = [r for r in rows if r["steps"] and not r["error"]]
    assert all(int(r["steps"]) == 3 + int(r["seed"]) % 3 for r in played), rows


def test_timeouts_request_fails_a_hung_answer_at_its_limit_naming_it(
    platform: Harness, bench: str, tmp_path: Path
) -> None:
    source = POLICY.format(name="hangs-at-1", seed=1, what="time.sleep(40)")
    deploy(platform, tmp_path / "hangs-at-1", "policy.py", source)
    changed = seq(platform, "policy", "set", "hangs-at-1", "timeouts.request=2")
    assert changed.returncode == 0, changed.stdout + changed.stderr
    ran = seq(platform, "eval", "run", "hangs-at-1", "--benchmark", bench, "--tasks", "walk", "--trials", "2")
    assert ran.returncode != 0
    rows = episodes(platform, eval_id_of(ran.stdout + ran.stderr))
    [hung] = [r for r in rows if r["error"]]
    assert hung["seed"] == "1" and hung["timed_out"] == "true", rows
    assert "within 2 s" in hung["error"] and "/tmp" not in hung["error"] and "sock" not in hung["error"]
    # Cut at its 2 s: not at most of the platform's 60 s call limit, nor after the 40 s sleep.
    assert 2 <= float(hung["wall_s"]) < 15, hung


def test_an_adapter_plays_four_worlds_to_the_outcomes_of_one_world_at_a_time(
    platform: Harness, bench: str, tmp_path: Path
) -> None:
    deploy(platform, tmp_path / "seeded-one", "benchmark.py", SEEDED_ONE)
    deploy(platform, tmp_path / "other-io", "policy.py", OTHER_POLICY)
    deploy(platform, tmp_path / "to-other", "adapter.py", ADAPTER)
    outcomes = {}
    for benchmark in (bench, "seeded-one"):
        ran = seq(platform, "eval", "run", "other-io", "--benchmark", benchmark, "--trials", "6",
                  "--adapter", "to-other@v1")  # fmt: skip
        assert ran.returncode == 0, ran.stdout + ran.stderr
        rows = episodes(platform, eval_id_of(ran.stdout))
        outcomes[benchmark] = sorted((r["seed"], r["steps"], r["success"], r["error"]) for r in rows)
    assert outcomes[bench] == outcomes["seeded-one"]
    assert [(seed, steps, success) for seed, steps, success, _ in outcomes[bench]] == [
        (str(s), str(3 + s % 3), "true" if s % 2 == 0 else "false") for s in range(6)
    ]


def test_a_parameter_set_on_a_deployment_is_checked_against_its_declared_type(
    platform: Harness, tmp_path: Path
) -> None:
    deploy(platform, tmp_path / "other-io", "policy.py", OTHER_POLICY)
    refused = seq(platform, "policy", "set", "other-io", "params.scale=abc")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "changes['params.scale']: 'abc' is not a float" in refused.stderr
    assert "abc" not in seq(platform, "policy", "settings", "other-io").stdout  # nothing stored
    taken = seq(platform, "policy", "set", "other-io", "params.scale=2")
    assert taken.returncode == 0, taken.stdout + taken.stderr
    assert re.search(r"params\.scale\s+2\.0\b", seq(platform, "policy", "settings", "other-io").stdout)


def test_another_class_takes_a_deployments_name_only_with_replace(platform: Harness, tmp_path: Path) -> None:
    first = POLICY.format(name="held-name", seed=99, what="pass")
    deploy(platform, tmp_path / "one" / "held-name", "policy.py", first)
    other = tmp_path / "two" / "held-name"
    other.mkdir(parents=True)
    (other / "policy.py").write_text(first.replace("class Fated", "class Other"))
    refused = seq(platform, "deploy", str(other))
    assert refused.returncode == 5, refused.stdout + refused.stderr
    assert "policy:Fated" in refused.stderr and "--replace" in refused.stderr, refused.stderr
    taken = seq(platform, "deploy", str(other), "--replace")
    assert taken.returncode == 0, taken.stdout + taken.stderr


def test_benchmark_tasks_answers_the_version_asked(platform: Harness, tmp_path: Path) -> None:
    first = SEEDED_ONE.replace('name="seeded-one"', 'name="versioned-bench"')
    deploy(platform, tmp_path / "v1" / "versioned-bench", "benchmark.py", first)
    second = first.replace('tasks={"walk": "done after 3 steps"}', 'tasks={"walk": "done", "run": "also"}')
    deploy(platform, tmp_path / "v2" / "versioned-bench", "benchmark.py", second)
    older = seq(platform, "--json", "benchmark", "tasks", "versioned-bench@v1")
    assert older.returncode == 0, older.stdout + older.stderr
    assert '"version": 1' in older.stdout and '"run"' not in older.stdout, older.stdout
    newer = seq(platform, "--json", "benchmark", "tasks", "versioned-bench")
    assert '"version": 2' in newer.stdout and '"run"' in newer.stdout, newer.stdout
    missing = seq(platform, "benchmark", "tasks", "versioned-bench@v9")
    assert missing.returncode == 4 and "has no v9 (it has v1, v2)" in missing.stderr, missing.stderr

"""Yardstick's own `seq`: a file written for the Sequences SDK (`import seq`) is a Yardstick benchmark or
policy, held to the SDK's rules with errors that name the field, its deployment-only arguments kept and not
enforced, its timing and episode hooks played as the contract says; and `yardstick eval run` runs such
files, even where another `seq` is installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from yardstick.engine.guard import Guard
from yardstick.engine.loop import play
from yardstick.engine.results import EpisodeSpec
from yardstick.engine.worlds import SingleWorld
from yardstick.sdk.calls import InProcessPolicy, instantiate
from yardstick.sdk.decorators import benchmark_spec, policy_spec
from yardstick.sdk.errors import LoadError, SpecError
from yardstick.sdk.load import SEQ_SHIM, load_object

EXAMPLES = Path("/work/shared/sequences/examples")
YARDSTICK = Path(sys.executable).parent / "yardstick"

if SEQ_SHIM not in sys.path:
    sys.path.insert(0, SEQ_SHIM)
import seq  # noqa: E402  (Yardstick's own, from hosted/shim)


def write(folder: Path, name: str, source: str) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(textwrap.dedent(source))
    return str(folder / name)


@pytest.fixture
def examples(tmp_path: Path) -> Path:
    for file in EXAMPLES.glob("*.py"):
        (tmp_path / file.name).write_text(file.read_text())
    return tmp_path


def test_the_shim_is_yardsticks() -> None:
    assert seq.benchmark.__module__ == "yardstick.hosted.seq_api.benchmark"
    assert seq.replay.scene(0, b"glb") is None and seq.replay.frame(0, 0.0, [], [], []) is None


def test_the_sdks_examples_are_yardstick_benchmarks_and_policies(examples: Path) -> None:
    reach = benchmark_spec(load_object(f"{examples}/reach_bench.py:ReachBench"))
    assert (reach.name, list(reach.tasks), reach.seeds, reach.max_seconds) == (
        "reach-bench",
        ["left", "right"],
        (0, 1),
        5.0,
    )
    assert (reach.reset_method, reach.step_method, reach.worlds) == ("reset", "step", None)
    vec_cls = load_object(f"{examples}/vec_bench.py:VecBench")
    vec = benchmark_spec(vec_cls)
    assert vec.worlds == 8 and vec.limit("b/1") == 4.0
    assert vec.constructor.kwargs == {"worlds": "{num_worlds}", "hz": "{policy.hz}"}
    assert vec_cls.__seq__["params"] == {
        "noise_std": {"type": "float", "default": 0.02},
        "label": {"type": "str", "default": "x"},
    }
    policy = policy_spec(load_object(f"{examples}/reach_policy.py:ReachPolicy"))
    assert (policy.name, policy.hz, policy.action_chunk_len, policy.replan_every, policy.prefetch) == (
        "reach-policy",
        10.0,
        1,
        1,
        False,
    )
    assert "seed" in policy.infer_keywords


def bench(**overrides: Any) -> type:
    declared: dict[str, Any] = {"tasks": {"a": "first"}, "seeds": [0, 1], "max_seconds": 2.0, **overrides}

    @seq.benchmark(**declared)
    class Bench:
        def __init__(self, noise: float = 0.0) -> None:
            self.noise = noise

        @seq.reset
        def reset(self, task: str, seed: int) -> dict[str, int]:
            self.t = 0
            return {"t": 0}

        @seq.step
        def step(self, action: Any) -> tuple[Any, bool, bool]:
            self.t += 1
            return {"t": self.t}, self.t >= 3, True

    return Bench


RULES = [
    ({"tasks": {"bad name!": ""}}, "tasks['bad name!']", "letters, digits"),
    ({"tasks": {"a": "x" * 301}}, "tasks['a']", "at most 300"),
    ({"tasks": {}}, "tasks", "at least one task"),
    ({"seeds": []}, "seeds", "at least one seed"),
    ({"seeds": [0, 0]}, "seeds", "each seed once"),
    ({"seeds": ["zero"]}, "seeds", "whole numbers"),
    ({"max_seconds": 0}, "max_seconds", "above 0"),
    ({"max_seconds": {"a": 1.0, "ghost": 1.0}}, "max_seconds['ghost']", "does not have"),
    ({"max_seconds": {"a": -1.0}}, "max_seconds['a']", "above 0"),
    ({"worlds": 8}, "worlds", "@seq.concurrent"),
    ({"flavour": "x"}, "flavour", "not an argument"),
    ({"init": {"noise": "{weights}"}}, "init", "no weights"),
    ({"init": {"noise": "{policy.action_chunk_len}"}}, "init", "now {policy.action_chunk_valid_len}"),
    ({"init": {"noise": "{num_worlds}"}}, "init", "vectorized"),
    ({"init": {"speed": 1.0}}, "init", "does not fit"),
    ({"name": "no spaces"}, "name", "letters"),
]


@pytest.mark.parametrize(("overrides", "field", "rule"), RULES)
def test_each_benchmark_rule_names_its_field(overrides: dict[str, Any], field: str, rule: str) -> None:
    with pytest.raises(seq.BenchmarkDefinitionError) as refused:
        bench(**overrides)
    assert refused.value.field == field
    assert rule in refused.value.rule, refused.value.rule
    assert isinstance(refused.value, SpecError)  # Yardstick's CLI shows it as any bad declaration


def test_a_reset_or_step_may_take_more_arguments_with_defaults() -> None:
    @seq.benchmark(tasks={"a": ""}, seeds=[0], max_seconds=1.0)
    class Gymish:
        @seq.reset
        def reset(self, task: str, seed: int, options: Any = None) -> None: ...

        @seq.step
        def step(self, action: Any, *, render: bool = False) -> Any: ...

    assert benchmark_spec(Gymish).reset_method == "reset"
    with pytest.raises(seq.BenchmarkDefinitionError, match="takes"):

        @seq.benchmark(tasks={"a": ""}, seeds=[0], max_seconds=1.0)
        class Needy:
            @seq.reset
            def reset(self, task: str, seed: int, scene: Any) -> None: ...

            @seq.step
            def step(self, action: Any) -> Any: ...


def test_params_are_public_identifiers_and_at_most_32() -> None:
    with pytest.raises(seq.BenchmarkDefinitionError) as refused:

        @seq.benchmark(tasks={"a": ""}, seeds=[0], max_seconds=1.0)
        class Many:
            def __init__(self, **_: Any) -> None: ...

            exec("def __init__(self, " + ", ".join(f"p{i}: int = {i}" for i in range(33)) + "): pass")

            @seq.reset
            def reset(self, task: str, seed: int) -> None: ...

            @seq.step
            def step(self, action: Any) -> Any: ...

    assert "at most 32" in refused.value.rule


def test_deployment_arguments_are_kept_and_not_enforced() -> None:
    image = seq.Image.debian_slim().uv_pip_install("gymnasium==1.0")
    cls = bench(
        gpu="H100:8",
        cpu=64,
        memory=512,
        image=image,
        secrets=[seq.Secret.from_name("LAB")],
        assets=seq.Volume.from_name("scenes"),
        replay=seq.Replay(engine="own"),
    )
    deployment = cls.__seq__["deployment"]
    assert deployment["gpu"] == "H100:8" and deployment["cpu"] == 64 and deployment["memory"] == 512
    assert deployment["image"] == {
        "base": "debian:12-slim",
        "steps": [{"uv_pip_install": ["gymnasium==1.0"]}],
    }
    assert deployment["secrets"] == [{"name": "LAB"}] and deployment["assets"] == {"name": "scenes"}
    assert cls.__seq__["params"] == {"noise": {"type": "float", "default": 0.0}}
    assert benchmark_spec(cls).name == "Bench"


def test_a_policys_timing_is_the_contracts() -> None:
    def declared(**timing: Any) -> Any:
        @seq.policy(hz=15, **timing)
        class P(seq.Policy):
            @seq.infer
            def infer(self, obs: Any, *, seed: int | None = None, temperature: float = 1.0) -> Any:
                return [[0.0]]

        return P

    ahead = declared(action_chunk_valid_len=15, action_chunk_replan_at=8)
    spec = policy_spec(ahead)
    assert (spec.action_chunk_len, spec.replan_every, spec.prefetch) == (15, 8, True)
    assert ahead.__seq__["params"] == {"temperature": {"type": "float", "default": 1.0}}
    assert policy_spec(declared(action_chunk_valid_len=4, action_chunk_replan_at=4)).prefetch is False
    unbounded = policy_spec(declared())
    assert (unbounded.action_chunk_len, unbounded.action_chunk_exec_len, unbounded.prefetch) == (
        100_000,
        None,
        False,
    )
    for timing, field in [
        ({"action_chunk_valid_len": 4, "action_chunk_replan_at": 5}, "action_chunk_replan_at"),
        ({"action_chunk_len": 4}, "action_chunk_len"),
        ({"action_chunk_valid_len": 0}, "action_chunk_valid_len"),
    ]:
        with pytest.raises(seq.PolicyDefinitionError) as refused:
            declared(**timing)
        assert refused.value.field == field
    with pytest.raises(seq.PolicyDefinitionError) as refused:
        seq.policy(gpu="L4")
    assert refused.value.field == "hz"


def test_a_policys_reset_starts_an_episode_and_its_on_episode_ends_it() -> None:
    calls: list[str] = []

    @seq.policy(hz=10, action_chunk_valid_len=2, action_chunk_replan_at=1)
    class Tracked:
        @seq.reset
        def clear(self) -> None:
            calls.append("reset")

        @seq.on_episode
        def done(self, episode: Any) -> None:
            calls.append(f"end {episode.task}")

        @seq.infer
        def infer(self, obs: Any) -> Any:
            calls.append(f"act {obs['t']}")
            return np.array([[obs["t"] * 100 + i] for i in range(2)], dtype=float)

    benchmark = bench()
    spec = benchmark_spec(benchmark)
    driver = InProcessPolicy(Tracked(), policy_spec(Tracked))
    with Guard(5.0) as guard:
        [result] = play(
            iter([EpisodeSpec(0, "a", 0, 0)]), SingleWorld(benchmark(), spec), driver, spec, guard
        )
    # Valid 2, replan at 1: asked at steps 0 and 1 (its answer played from step 2), then 3.
    assert calls == ["reset", "act 0", "act 1", "end a"]
    assert result.steps == 3 and result.inferences == 2


def test_a_policy_reads_how_many_answers_came_before_as_episode_steps() -> None:
    seen: list[int] = []

    @seq.policy(hz=10, action_chunk_valid_len=1, action_chunk_replan_at=1)
    class Counting:
        @seq.infer
        def infer(self, obs: Any, *, episode: Any) -> Any:
            seen.append(episode.steps)
            return np.zeros((1, 1))

    benchmark = bench()
    spec = benchmark_spec(benchmark)
    driver = InProcessPolicy(Counting(), policy_spec(Counting))
    with Guard(5.0) as guard:
        [result] = play(
            iter([EpisodeSpec(0, "a", 0, 0)]), SingleWorld(benchmark(), spec), driver, spec, guard
        )
    assert result.error is None and result.inferences == 3
    assert seen == [0, 1, 2]  # 0 on the first answer, one more each answer after


def test_a_benchmarks_policy_fields_are_filled_under_the_contracts_names() -> None:
    @seq.benchmark(
        tasks={"a": ""},
        seeds=[0],
        max_seconds=1.0,
        init={
            "rate": "{policy.hz}",
            "chunk": "{policy.action_chunk_valid_len}",
            "replan": "{policy.action_chunk_replan_at}",
        },
    )
    class Reads:
        def __init__(self, rate: float = 0.0, chunk: int = 0, replan: int = 0) -> None:
            self.seen = (rate, chunk, replan)

        @seq.reset
        def reset(self, task: str, seed: int) -> None: ...

        @seq.step
        def step(self, action: Any) -> Any: ...

    fields = {"hz": 15.0, "action_chunk_len": 8, "action_chunk_exec_len": 4}
    assert instantiate(Reads, benchmark_spec(Reads), policy=fields).seen == (15.0, 8, 4)
    # At a registration check no policy is evaluated: each keyword that is a field alone keeps its default.
    assert instantiate(Reads, benchmark_spec(Reads)).seen == (0.0, 0, 0)


def test_retired_and_platform_names_say_what_to_do() -> None:
    with pytest.raises(AttributeError, match="task at a seed"):
        _ = seq.Condition
    with pytest.raises(AttributeError, match="Yardstick's seq"):
        _ = seq.deploy
    with pytest.raises(seq.BenchmarkDefinitionError, match="constructor"):
        seq.setup(lambda self: None)
    assert seq.config("deploy.yml", lr=0.1) == {"$config": "deploy.yml", "$set": {"lr": 0.1}}


def test_a_file_that_imports_seq_loads_and_a_bad_one_says_why(tmp_path: Path) -> None:
    ref = write(
        tmp_path / "bad",
        "benchmark.py",
        """\
        import seq

        @seq.benchmark(tasks={"a": ""}, seeds=[], max_seconds=1.0)
        class Empty:
            @seq.reset
            def reset(self, task, seed): ...

            @seq.step
            def step(self, action): ...
        """,
    )
    with pytest.raises(LoadError, match="seeds: names at least one seed"):
        load_object(f"{ref}:Empty")


def eval_run(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = subprocess.run(
        [str(YARDSTICK), "eval", "run", *args, "--in-process", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_yardstick_eval_run_plays_sequences_files_even_beside_another_seq(
    examples: Path, tmp_path: Path
) -> None:
    # Another `seq` on the path, as an installed sequence-ai is: Yardstick's own still wins for its files.
    write(tmp_path / "site" / "seq", "__init__.py", "raise ImportError('the wrong seq was imported')\n")
    report = eval_run(
        "-b",
        f"{examples}/reach_bench.py:ReachBench",
        "-p",
        f"{examples}/reach_policy.py:ReachPolicy",
        "--out",
        str(tmp_path / "run"),
        env={"PYTHONPATH": str(tmp_path / "site")},
    )
    assert report["summary"]["overall"]["success"]["value"] == 1.0
    assert report["episodes"]["finished"] == 4
    assert report["summary"]["tasks"]["left"]["mean_steps"] == 5.0

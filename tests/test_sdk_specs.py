"""Declarations: every rule refuses with the field it concerns and the rule, and good ones read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import yardstick as ys
from yardstick.sdk.decorators import benchmark_spec, policy_spec
from yardstick.sdk.errors import LoadError, SpecError
from yardstick.sdk.load import load_object


def declare_benchmark(**overrides: Any) -> type:
    declared: dict[str, Any] = {"tasks": {"pick": "Pick the cube"}, "seeds": [0, 1], "max_seconds": 5.0}
    declared.update(overrides)

    @ys.benchmark(**declared)
    class Bench:
        @ys.reset
        def reset(self, task: str, seed: int) -> Any: ...

        @ys.step
        def step(self, action: Any) -> Any: ...

    return Bench


def refusal(make: Any) -> SpecError:
    with pytest.raises(SpecError) as refused:
        make()
    return refused.value


def test_a_good_benchmark_reads_back() -> None:
    spec = benchmark_spec(
        declare_benchmark(seeds=range(3), max_seconds={"pick": 2.5}, init={"hz": "{policy.hz}"})
    )
    assert spec.seeds == (0, 1, 2) and spec.limit("pick") == 2.5
    assert spec.constructor.kwargs == {"hz": "{policy.hz}"} and spec.worlds is None
    assert (spec.reset_method, spec.step_method) == ("reset", "step")


@pytest.mark.parametrize(
    ("overrides", "field", "rule"),
    [
        ({"tasks": {}}, "tasks", "at least one task"),
        ({"tasks": {"-bad": ""}}, "tasks['-bad']", "starting with a letter or digit"),
        ({"tasks": {"a b": ""}}, "tasks['a b']", "letters, digits"),
        ({"tasks": {"x" * 129: ""}}, "tasks", "1-128"),
        ({"tasks": {"ok": "d" * 301}}, "tasks['ok']", "at most 300"),
        ({"seeds": []}, "seeds", "at least one seed"),
        ({"seeds": [1, 1, 2]}, "seeds", "each seed once"),
        ({"max_seconds": 0}, "max_seconds", "above 0"),
        ({"max_seconds": {"pick": -1.0}}, "max_seconds['pick']", "above 0"),
        ({"max_seconds": {"pick": 1.0, "place": 1.0}}, "max_seconds['place']", "does not have"),
        ({"tasks": {"a": "", "b": ""}, "max_seconds": {"a": 1.0}}, "max_seconds", "missing: b"),
        ({"init": 5}, "init", "dict by name or a list by position"),
        ({"action_space": ([0.0, 1.0], [1.0])}, "action_space", "equal length"),
    ],
)
def test_each_benchmark_rule_names_its_field(overrides: dict[str, Any], field: str, rule: str) -> None:
    error = refusal(lambda: declare_benchmark(**overrides))
    assert error.field.startswith(field) and rule in str(error)


def test_task_names_allow_the_documented_characters() -> None:
    name = "Robo/arm:pick_up.cube-1"
    assert name in benchmark_spec(declare_benchmark(tasks={name: "", "x" * 128: ""}, max_seconds=1.0)).tasks


def test_a_benchmark_marks_reset_and_step() -> None:
    def without_step() -> None:
        @ys.benchmark(tasks={"a": ""}, seeds=[0], max_seconds=1.0)
        class B:
            @ys.reset
            def reset(self, task: str, seed: int) -> Any: ...

    error = refusal(without_step)
    assert error.field == "step" and "def step(self, action)" in str(error)


def test_a_benchmark_step_takes_one_action() -> None:
    def two_args() -> None:
        @ys.benchmark(tasks={"a": ""}, seeds=[0], max_seconds=1.0)
        class B:
            @ys.reset
            def reset(self, task: str, seed: int) -> Any: ...

            @ys.step
            def step(self, action: Any, extra: Any) -> Any: ...

    assert "takes (action)" in str(refusal(two_args))


def test_a_vectorized_benchmark_hands_num_worlds_to_its_constructor_and_takes_worlds() -> None:
    def vectorized(init: Any, reset_arity: int = 3) -> type:
        @ys.benchmark(tasks={"a": ""}, seeds=[0], max_seconds=1.0, init=init)
        class V:
            if reset_arity == 3:

                @ys.reset
                def reset(self, worlds: Any, tasks: Any, seeds: Any) -> Any: ...
            else:

                @ys.reset
                def reset(self, task: Any, seed: Any) -> Any: ...

            @ys.step
            @ys.concurrent(sizes=[2, 8])
            def step(self, worlds: Any, actions: Any) -> Any: ...

        return V

    assert benchmark_spec(vectorized({"n": "{num_worlds}"})).worlds == 8
    assert benchmark_spec(vectorized({"cfg": {"deep": ["x{num_worlds}"]}})).worlds == 8
    error = refusal(lambda: vectorized({"n": 4}))
    assert error.field == "init" and "{num_worlds}" in str(error)
    assert "(worlds, tasks, seeds)" in str(refusal(lambda: vectorized({"n": "{num_worlds}"}, reset_arity=2)))
    with pytest.raises(SpecError, match="sizes"):
        ys.concurrent(sizes=[0])


def declare_policy(**overrides: Any) -> type:
    declared: dict[str, Any] = {"hz": 10}
    declared.update(overrides)

    @ys.policy(**declared)
    class P:
        @ys.infer
        def act(self, obs: Any, *, seed: int) -> Any: ...

    return P


def test_a_good_policy_reads_back() -> None:
    spec = policy_spec(declare_policy(hz=15, action_chunk_len=8, action_chunk_exec_len=4, batch_sizes=[1, 4]))
    assert (spec.hz, spec.action_chunk_len, spec.replan_every, spec.batch_sizes) == (15, 8, 4, (1, 4))
    assert spec.infer_keywords == frozenset({"seed"}) and spec.infer_method == "act"
    assert spec.fields() == {"hz": 15, "action_chunk_len": 8, "action_chunk_exec_len": 4}
    assert (
        policy_spec(declare_policy(action_chunk_len=5)).replan_every == 5
    )  # asks again when the chunk is done


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"hz": 0}, "hz"),
        ({"hz": -5}, "hz"),
        ({"action_chunk_len": 0}, "action_chunk_len"),
        ({"action_chunk_len": 4, "action_chunk_exec_len": 5}, "action_chunk_exec_len"),
        ({"action_chunk_exec_len": 0}, "action_chunk_exec_len"),
        ({"batch_sizes": []}, "batch_sizes"),
        ({"batch_sizes": [4, 1]}, "batch_sizes"),
        ({"batch_sizes": [0]}, "batch_sizes"),
    ],
)
def test_each_policy_rule_names_its_field(overrides: dict[str, Any], field: str) -> None:
    assert refusal(lambda: declare_policy(**overrides)).field == field


def test_hz_is_required() -> None:
    with pytest.raises(TypeError, match="hz"):
        ys.policy()  # type: ignore[call-arg]


def test_a_policy_marks_infer_and_marks_belong_to_their_kind() -> None:
    def no_infer() -> None:
        @ys.policy(hz=5)
        class P:
            def act(self, obs: Any) -> Any: ...

    def step_on_policy() -> None:
        @ys.policy(hz=5)
        class P:
            @ys.infer
            def act(self, obs: Any) -> Any: ...

            @ys.step
            def play(self, action: Any) -> Any: ...

    assert refusal(no_infer).field == "infer"
    assert "benchmark" in str(refusal(step_on_policy))


def test_an_undecorated_class_is_not_a_benchmark_or_policy() -> None:
    assert refusal(lambda: benchmark_spec(dict)).field == "@benchmark"
    assert refusal(lambda: policy_spec(dict)).field == "@policy"


def test_load_by_module_and_by_file(tmp_path: Path) -> None:
    assert load_object("collections:OrderedDict").__name__ == "OrderedDict"
    (tmp_path / "helper_mod.py").write_text("VALUE = 41\n")
    (tmp_path / "my_policy.py").write_text(
        "import helper_mod\nimport yardstick as ys\n"
        "@ys.policy(hz=3)\nclass Mine:\n    @ys.infer\n"
        "    def act(self, obs):\n        return [[helper_mod.VALUE]]\n"
    )
    loaded = load_object(f"{tmp_path / 'my_policy.py'}:Mine")
    assert policy_spec(loaded).hz == 3
    assert load_object(f"{tmp_path / 'my_policy.py'}:Mine") is loaded  # a second load reuses the module


@pytest.mark.parametrize(
    ("reference", "says"),
    [
        ("no_colon", "a reference is"),
        ("collections:", "a reference is"),
        ("no_such_module_xyz:Thing", "no module named"),
        ("collections:NoSuchThing", "has no 'NoSuchThing'"),
        ("/nope/missing.py:Thing", "no such file"),
    ],
)
def test_bad_references_are_refused_clearly(reference: str, says: str) -> None:
    with pytest.raises(LoadError, match=says):
        load_object(reference)


def test_a_file_that_raises_on_import_is_refused_with_its_error(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("raise RuntimeError('no GPU here')\n")
    with pytest.raises(LoadError, match="RuntimeError: no GPU here"):
        load_object(f"{tmp_path / 'broken.py'}:X")

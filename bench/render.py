"""What a camera costs in Yardstick against `mujoco.Renderer` alone with the same scene settings (ceiling).

Meta-World's `corner` camera, the expert playing push-v3, at 128² and 224², with the table's reflections off
(the demo's setting) and on (MT10's default). After each step of the episode (which draws its own frame)
its state is drawn again by both, interleaved so that a change in the machine's load falls on both, and
first by each on every other step:
  renderer   a `mujoco.Renderer` of the same model, multisampling and shadows off and reflections as
             asked, `update_scene` + `render` and nothing else (the ceiling)
  ours       the frame as MT10's observation carries it (`image.corner`, turned upright), timed as the
             engine reports rendering, drawn again on the state the step left
Prints ms a frame for each, the ratio ours / renderer (target <= 1.05), and what a step of the whole engine
costs with the camera against without it. The machine is shared and noisy: each figure is the median over
the frames of `--rounds` episodes. Run with `make bench`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings
from typing import Any

from machine import machine

os.environ.setdefault("MUJOCO_GL", "egl")
TASK = "push-v3"
SIZES = (128, 224)


def frames(size: int, reflections: bool, rounds: int) -> tuple[list[float], list[float]]:
    """Seconds a frame: (the bare renderer's, ours), one of each per step of `rounds` episodes."""
    import mujoco
    from metaworld.policies import ENV_POLICY_MAP

    from yardstick.catalog.metaworld import MT10
    from yardstick.sdk import timing

    bench = MT10(cameras=["corner"], image_size=size, reflections=reflections)
    bench.reset(TASK, 0)
    world = bench._world
    assert world is not None
    env = world.env
    # The ceiling's renderer: the same settings as ours (tuned_renderer), set here by hand from mujoco's API.
    bare = mujoco.Renderer(env.model, size, size)
    bare.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
    bare.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = reflections
    assert env.model.vis.quality.offsamples == 0  # set by ours on the shared model: no multisampling either
    ceiling: list[float] = []
    ours: list[float] = []
    try:
        for seed in range(rounds):
            obs = bench.reset(TASK, seed)
            timing.drain("rendering")
            expert_class: Any = ENV_POLICY_MAP[TASK]  # typed by its abstract base; each entry is concrete
            expert = expert_class()
            for step in range(200):
                obs, done, _, _ = bench.step(expert.get_action(obs["state"]))
                timing.drain("rendering")
                # The state the step left, drawn again by both, the bare renderer first on every other step
                # and second on the rest: whichever draws first pays for what the second finds warm.
                if step % 2:
                    ceiling.append(bare_frame(bare, env.data))
                bench._observe(world, obs["state"])
                ours.append(timing.drain("rendering"))
                if not step % 2:
                    ceiling.append(bare_frame(bare, env.data))
                if done:
                    break
    finally:
        bare.close()
        bench.close()
    return ceiling, ours


def bare_frame(renderer: Any, data: Any) -> float:
    """Seconds the bare renderer takes to draw the corner camera on `data`."""
    started = time.perf_counter()
    renderer.update_scene(data, camera="corner")
    renderer.render()
    return time.perf_counter() - started


def engine_step(size: int | None, reflections: bool) -> float:
    """Seconds a step of MT10's push-v3 through the engine in this process, with the corner camera at `size`
    or none: its episodes' wall time over their steps, once the world and its renderer are built."""
    from yardstick.engine import Component, RunRequest, Work, prepare
    from yardstick.engine.runtime import Runtime

    params: dict[str, Any] = {}
    if size is not None:
        params = {"cameras": ["corner"], "image_size": size, "reflections": reflections}
    work = Work(Component("mt10", params), Component("expert"))
    _, _, episodes = prepare(RunRequest(work=work, tasks=[TASK], trials=3))
    runtime = Runtime(work)
    try:
        list(runtime.run(episodes[:1]))  # builds the world and its renderer
        results = list(runtime.run(episodes))
    finally:
        runtime.close()
    assert all(r.finished for r in results)
    return sum(r.wall_seconds for r in results) / sum(r.steps for r in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="episodes per setting")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message=r"Constant\(s\) may be too high")
    print(machine(), flush=True)
    plain = engine_step(None, False)
    print(f"MT10 {TASK}, camera 'corner', expert: ms a frame (median of each step's frame)")
    print(f"{'size':>5} {'reflections':>12} {'renderer':>9} {'ours':>7} {'ratio':>6}   engine ms a step")
    for size in SIZES:
        for reflections in (False, True):
            ceiling, ours = frames(size, reflections, args.rounds)
            bare_ms = statistics.median(ceiling) * 1000
            ours_ms = statistics.median(ours) * 1000
            ratio = ours_ms / bare_ms
            step = engine_step(size, reflections)
            print(
                f"{size:>5} {'on' if reflections else 'off':>12} {bare_ms:>9.2f} {ours_ms:>7.2f} "
                f"{ratio:>6.3f}"
                f"   {step * 1000:.2f} with the camera, {plain * 1000:.2f} without"
                f"  (target ours/renderer <= 1.05: {'met' if ratio <= 1.05 else 'NOT met'})",
                flush=True,
            )


if __name__ == "__main__":
    main()

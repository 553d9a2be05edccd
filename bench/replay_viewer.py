"""The 3D replay viewer's frame rate in headless Chromium, on a LIBERO scene (the heaviest we ship:
robosuite's meshes and textures, ~20 MB of glTF).

Records one LIBERO-10 episode with `--record replay` (the random policy, one camera at 64² so the recording
is quick; the replay is the same whatever the camera), opens its run folder's replay.html as a file in
Debian's Chromium (WebGL drawn by SwiftShader, on the CPU: no GPU here), and prints:

  load     seconds from opening the page to the first frame drawn (three.js, the scene, the replay)
  play     frames a second the page draws while playing (requestAnimationFrame: at most the display's 60)
  draw     frames a second drawn back to back, each waited for (`measure`): what the machine can draw
  scene    the scene's triangles and draw calls

at the viewport given (1280×800 by default; the canvas is about 1250×560 of it). A GPU draws this at the
display's rate; the figure here is the floor, a browser without one.
Run with `make bench` or `python bench/replay_viewer.py [--task T] [--frames N]`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from machine import machine

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

# tests/chromium.py: how the tests launch Debian's Chromium (imported by name: tests/ is not a package)
chromium: Any = importlib.import_module("chromium")


def record(folder: Path, task: str) -> None:
    ran = subprocess.run(
        [
            str(Path(sys.executable).parent / "yardstick"),
            "eval",
            "run",
            "--benchmark",
            "libero_10",
            "--policy",
            "random",
            "--tasks",
            task,
            "--trials",
            "1",
            "--in-process",
            "--param",
            'benchmark.cameras=["agentview"]',
            "--param",
            "benchmark.image_size=64",
            "--record",
            "replay",
            "--out",
            str(folder),
        ],
        capture_output=True,
        text=True,
    )
    if ran.returncode != 0:
        raise SystemExit(f"recording the LIBERO episode failed:\n{ran.stderr}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task", default="k3-turn-on-stove-moka", help="a LIBERO-10 task")
    parser.add_argument("--frames", type=int, default=60, help="frames drawn back to back")
    parser.add_argument("--play-seconds", type=float, default=4.0)
    args = parser.parse_args()
    print(machine())
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "run"
        started = time.perf_counter()
        record(folder, args.task)
        print(f"LIBERO-10 {args.task}: one episode recorded in {time.perf_counter() - started:.0f} s")
        scene = next((folder / "scenes").glob("*.glb"))
        replay = folder / "episodes" / "000000" / "replay.seqreplay"
        sizes = scene.stat().st_size / 2**20, replay.stat().st_size / 2**10
        print(f"  scene {sizes[0]:.1f} MiB, replay {sizes[1]:.0f} KiB")
        with chromium.launched("bench/replay_viewer.py") as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            opened = time.perf_counter()
            page.goto((folder / "replay.html").as_uri() + "?episode=0")
            page.wait_for_function("() => window.yardstickReplay?.ready", timeout=600_000)
            load = time.perf_counter() - opened
            # 4×: 80 replay frames a second (LIBERO records 20), more than a display shows: a frame to draw at
            # every animation frame, and the 26 s episode lasts the 4 s counted.
            page.evaluate("() => { window.yardstickReplay.player.speed = 4; }")
            drawn = page.evaluate("() => window.yardstickReplay.state().drawn[0]")
            page.click("#play")
            time.sleep(args.play_seconds)  # a bench, not a test: it measures over this much wall time
            played = page.evaluate("() => window.yardstickReplay.state()")
            page.evaluate("() => window.yardstickReplay.player.pause()")
            draw = page.evaluate(f"() => window.yardstickReplay.player.measure({args.frames})")
            info = page.evaluate("() => window.yardstickReplay.player.panes[0].view.renderer.info.render")
            renderer = page.evaluate(
                """() => { const gl = document.createElement('canvas').getContext('webgl2');
                           const i = gl.getExtension('WEBGL_debug_renderer_info');
                           return i ? gl.getParameter(i.UNMASKED_RENDERER_WEBGL) : 'unknown'; }"""
            )
    print(f"  Chromium's WebGL: {renderer}")
    print(f"  load  {load:6.1f} s to the first frame")
    print(f"  play  {(played['drawn'][0] - drawn) / args.play_seconds:6.1f} frames a second while playing")
    print(f"  draw  {draw:6.1f} frames a second back to back ({args.frames} frames)")
    print(f"  scene {info['triangles']} triangles in {info['calls']} draw calls")


if __name__ == "__main__":
    main()

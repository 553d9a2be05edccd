"""A registration's image: the default runs on the worker's Python; uv_pip_install steps install into an
environment of the version's own (once), where yardstick stays importable and the build check runs; every
step Yardstick cannot honour is refused by name (a system of its own needs the install's mirror:
test_sequence_images builds one)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hosted_helpers import bundle_of, needs_bwrap
from yardstick.hosted.errors import ImageRefused
from yardstick.worker.boxes.check import check_benchmark
from yardstick.worker.boxes.environments import PrepareFailed, marker, plan, prepare, worker_python

DEFAULT = {"base": "debian:12-slim", "steps": []}
# Pure Python, small, and in none of our environments (six is: botocore brings it).
PKG = "inflection==0.5.1"


def test_the_default_image_runs_on_the_workers_python(tmp_path: Path) -> None:
    own = {"base": None, "steps": [], "python": worker_python()}
    variables = {**DEFAULT, "steps": [{"env": {"MUJOCO_GL": "egl"}}]}  # variables alone need no system
    for image in (DEFAULT, None, {"steps": []}, own, variables):
        environment = prepare(image, tmp_path / "env")
        assert environment.python == sys.executable and environment.folder is None
        assert environment.root is None
    assert not (tmp_path / "env").exists()


REFUSED: list[tuple[dict[str, Any], str, str]] = [
    # A system of its own is built only from the install's registry mirror, which these name none of.
    ({"base": "nvidia/cuda:12.4.1-runtime-ubuntu22.04", "steps": []}, "image.base", "registry mirror"),
    ({"dockerfile": "FROM debian:12\n", "steps": []}, "image.dockerfile", "registry mirror"),
    ({**DEFAULT, "steps": [{"apt_install": ["ffmpeg"]}]}, "image.base", "registry mirror"),
    (
        {**DEFAULT, "steps": [{"uv_pip_install": [PKG]}, {"run_commands": ["make"]}]},
        "image.base",
        "mirror",
    ),
    ({"base": "debian:12-slim", "steps": [], "python": "3.13"}, "image.python", "worker's Python"),
    ({"base": "debian:12-slim", "steps": [], "python": "image"}, "image.python", "worker's Python"),
    ({**DEFAULT, "steps": [{"env": {"1A": "1"}}]}, "image.steps[0].env.1A", "variable's name"),
    (
        {**DEFAULT, "steps": [{"apt_install": ["rm -rf /"]}]},
        "image.steps[0].apt_install[0]",
        "Debian package",
    ),
    (
        {**DEFAULT, "steps": [{"run_commands": ["make"], "secrets": [{"name": "gh"}]}]},
        "image.steps[0].secrets",
        "sees no secret",
    ),
    (
        {**DEFAULT, "steps": [{"add_local": {"src": "a", "dst": "/a"}}]},
        "image.steps[0].add_local",
        "deployed",
    ),
    ({**DEFAULT, "steps": [{"project": {"root": ""}}]}, "image.steps[0].project", "deployed folder"),
    (
        {**DEFAULT, "steps": [{"uv_pip_install": ["--index-url=http://evil"]}]},
        "image.steps[0].uv_pip_install[0]",
        "pip option",
    ),
    (
        {**DEFAULT, "steps": [{"uv_pip_install": ["not a requirement !"]}]},
        "image.steps[0].uv_pip_install[0]",
        "not a requirement",
    ),
    ({**DEFAULT, "steps": [{"brew": ["x"]}]}, "image.steps[0]", "no known step"),
    ({**DEFAULT, "gpu": "L4"}, "image.gpu", "not a field"),
]


@pytest.mark.parametrize(("image", "field", "rule"), REFUSED)
def test_what_cannot_be_honoured_is_refused_by_name(
    tmp_path: Path, image: dict[str, Any], field: str, rule: str
) -> None:
    with pytest.raises(ImageRefused) as refused:
        prepare(image, tmp_path / "env")
    assert refused.value.field == field
    assert rule in refused.value.rule, refused.value.rule
    assert not (tmp_path / "env").exists()


@needs_bwrap
def test_pip_steps_install_into_an_environment_of_the_versions_own_once(tmp_path: Path) -> None:
    image = {**DEFAULT, "steps": [{"uv_pip_install": [PKG]}]}
    assert plan(image) == (PKG,)
    environment = prepare(image, tmp_path / "env")
    assert environment.folder == (tmp_path / "env").resolve() and environment.requirements == (PKG,)
    seen = subprocess.run(
        [
            environment.python,
            "-c",
            "import importlib.metadata as m, inflection, numpy, yardstick; print(m.version('inflection'))",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert seen.stdout.strip() == "0.5.1", seen.stderr
    # The worker's own Python has no inflection: it is the version's alone.
    assert subprocess.run([sys.executable, "-c", "import inflection"], capture_output=True).returncode != 0
    made = marker(tmp_path / "env").stat().st_mtime_ns
    assert prepare(image, tmp_path / "env") == environment
    assert marker(tmp_path / "env").stat().st_mtime_ns == made  # found made, not made again

    # The build check runs with it: a benchmark that imports what its image installs.
    uses_it = {
        "benchmark.py": """\
        import inflection
        import seq

        @seq.benchmark(tasks={"a": inflection.underscore("UsesInflection")}, seeds=[0], max_seconds=1.0)
        class UsesInflection:
            @seq.reset
            def reset(self, task, seed):
                return {}

            @seq.step
            def step(self, action):
                return {}, True, True
        """
    }
    folder = bundle_of(uses_it, tmp_path / "b").folder
    assert check_benchmark(folder, "benchmark:UsesInflection", python=environment.python, timeout_s=60).ready
    assert not check_benchmark(folder, "benchmark:UsesInflection", timeout_s=60).ready


@needs_bwrap
def test_an_install_that_fails_says_what_pip_said_and_leaves_no_environment(tmp_path: Path) -> None:
    with pytest.raises(PrepareFailed, match=r"six==0\.0\.1"):
        prepare({**DEFAULT, "steps": [{"uv_pip_install": ["six==0.0.1"]}]}, tmp_path / "env", timeout_s=120)
    assert not (tmp_path / "env").exists()

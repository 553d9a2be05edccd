"""A Sequences benchmark whose image has a system of its own: `seq deploy` with the real SDK of a benchmark
whose image installs a Debian package (apt_install), runs build commands (run_commands) and sets variables
(env), built by podman from the install's registry mirror (a registry on loopback serving Debian 12's
minimal system, made by mmdebstrap: nothing is pulled from outside), and played in a box on that system."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import image_helpers
from conftest import free_port
from deadlines import give_up_at
from hosted_helpers import seq_cli
from platform_harness import Harness, running_platform

pytestmark = pytest.mark.skipif(
    not (image_helpers.available() and shutil.which("mmdebstrap")),
    reason="needs podman, runc, docker-registry and mmdebstrap: make containers installs them",
)
EXAMPLES = Path(__file__).parent / "seq_examples"
WAIT_S = 600.0
BASE = "localhost/yardstick-tests-base/debian:12-slim"
BENCH = """
import os
import shutil

import seq

TASKS = {"left": "move the point to the target on the left", "right": "to the right"}
IMAGE = (
    seq.Image.debian_slim()
    .apt_install("figlet")
    .run_commands(
        "figlet -v | head -n 1 > /opt/figlet-version",
        "python3 -c 'import socket; socket.create_connection((\\"127.0.0.1\\", GATEWAY_PORT), 2)' "
        "&& echo reached > /opt/gateway || echo unreachable > /opt/gateway",
    )
    .env({"BENCH_MARK": "from-image"})
)


@seq.benchmark(name="figlet-bench", gpu="cpu", cpu=1, memory=2, tasks=TASKS, seeds=range(2), max_seconds=3.0,
               image=IMAGE)
class FigletBench:
    def __init__(self):
        found = shutil.which("figlet")
        assert found, "figlet is not in the image's system"
        with open("/opt/gateway") as said:
            gateway = said.read().strip()
        print(f"figlet at {found}; the build reached the gateway: {gateway}; "
              f"BENCH_MARK={os.environ.get('BENCH_MARK')}", flush=True)
        self.targets = {"left": -0.5, "right": 0.5}

    @seq.reset
    def reset(self, task, seed):
        self.x, self.target = 0.01 * seed, self.targets[task]
        return {"x": self.x, "target": self.target}

    @seq.step
    def step(self, action):
        self.x += float(action[0])
        reached = abs(self.x - self.target) < 0.05
        return {"x": self.x, "target": self.target}, reached, reached, {}
"""

POLICY = """
import shutil

import seq

IMAGE_OF_THE_BENCHMARK


@seq.policy(name="figlet-policy", gpu="cpu", hz=10, action_chunk_valid_len=1, action_chunk_replan_at=1,
            image=IMAGE)
class FigletPolicy(seq.Policy):
    @seq.infer
    def infer(self, obs, *, seed=None):
        if obs["x"] == 0.0:
            print(f"the policy's figlet at {shutil.which('figlet')}", flush=True)
        return [[max(-0.1, min(0.1, obs["target"] - obs["x"]))]]
"""


@dataclass
class Mirrored:
    harness: Harness
    code: Path  # the folders deployed from


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mirrored]:
    where = tmp_path_factory.mktemp("sequence-images")
    image_helpers.podman("import", "--quiet", str(image_helpers.debian_base()), BASE, timeout=600)
    port = free_port()
    code = where / "code"
    (code / "figlet-bench").mkdir(parents=True)
    (code / "figlet-bench" / "benchmark.py").write_text(BENCH.replace("GATEWAY_PORT", str(port)))
    bench = BENCH.replace("GATEWAY_PORT", str(port))
    (code / "figlet-policy").mkdir()
    image = re.search(r"IMAGE = \(.*?\n\)\n", bench, flags=re.S)
    assert image is not None
    (code / "figlet-policy" / "policy.py").write_text(
        POLICY.replace("IMAGE_OF_THE_BENCHMARK", image.group(0))
    )
    with image_helpers.registry(where / "mirror") as mirror:
        mirror.push(BASE, "debian:12-slim")
        try:
            with running_platform(where, None, port=port, registries=(mirror.url,)) as harness:
                harness.wait_for_workers(60)
                yield Mirrored(harness, code)
        finally:
            image_helpers.remove_images(
                "localhost/yardstick-tests-base/", "localhost/yardstick-image-", mirror.host
            )


def seq(mirrored: Mirrored, *args: str) -> subprocess.CompletedProcess[str]:
    return seq_cli(mirrored.harness.url, mirrored.harness.keys["alice"], *args)


def ok(mirrored: Mirrored, *args: str) -> str:
    done = seq(mirrored, *args)
    assert done.returncode == 0, f"seq {' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout


def api(mirrored: Mirrored) -> httpx.Client:
    key = mirrored.harness.keys["alice"]
    return httpx.Client(base_url=mirrored.harness.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def ready(mirrored: Mirrored, name: str) -> dict[str, object]:
    deadline = give_up_at(WAIT_S)
    with api(mirrored) as client:
        while (state := client.get(f"/v1/benchmarks/{name}").json())["status"] == "building":
            assert time.monotonic() < deadline, f"{name} still building"
            time.sleep(0.5)
    return state


def test_a_benchmarks_apt_and_run_steps_build_its_system_and_it_plays_there(mirrored: Mirrored) -> None:
    assert shutil.which("figlet") is None, "the machine has figlet: the test could not tell the image's"
    # The policy's image is the benchmark's: one build serves both.
    ok(mirrored, "deploy", str(mirrored.code / "figlet-policy"))
    ok(mirrored, "deploy", str(mirrored.code / "figlet-bench"))
    state = ready(mirrored, "figlet-bench")
    assert state["status"] == "ready", state

    # The build's log holds podman's steps; the check ran on the built system and printed what it found.
    built = ok(mirrored, "benchmark", "logs", "figlet-bench", "--build")
    assert "image: its system built by podman" in built, built
    assert "apt-get" in built and "figlet" in built, built
    assert "the build reached the gateway: unreachable" in built, built
    assert "BENCH_MARK=from-image" in built, built

    ran = seq(mirrored, "eval", "run", "figlet-policy", "--benchmark", "figlet-bench", "--trials", "2")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    eval_id = re.search(r"(ev-[0-9a-f]+)", ran.stdout)
    assert eval_id, ran.stdout
    logs = ok(mirrored, "eval", "logs", eval_id.group(1))
    assert "figlet at /usr/bin/figlet" in logs, logs
    assert "the policy's figlet at /usr/bin/figlet" in logs, logs
    with api(mirrored) as client:
        report = client.get(f"/v1/eval/{eval_id.group(1)}").json()
    assert report["status"] == "completed", report

    # A second benchmark of the same image reuses the built system: nothing is built again.
    images = mirrored.harness.platform.settings.data_dir / "images"
    before = sorted(p.name for p in images.iterdir())
    again = mirrored.code / "figlet-bench-2"
    shutil.copytree(mirrored.code / "figlet-bench", again)
    source = again / "benchmark.py"
    source.write_text(source.read_text().replace('name="figlet-bench"', 'name="figlet-bench-2"'))
    ok(mirrored, "deploy", str(again))
    assert ready(mirrored, "figlet-bench-2")["status"] == "ready"
    assert sorted(p.name for p in images.iterdir()) == before


def test_an_image_that_cannot_be_built_fails_its_build_with_what_podman_said(
    mirrored: Mirrored, tmp_path: Path
) -> None:
    folder = tmp_path / "no-such-package"
    folder.mkdir()
    (folder / "benchmark.py").write_text(
        BENCH.replace('name="figlet-bench"', 'name="no-such-package"').replace(
            '.apt_install("figlet")', '.apt_install("no-such-package-anywhere")'
        )
    )
    seq(mirrored, "deploy", str(folder))
    state = ready(mirrored, "no-such-package")
    assert state["status"] == "failed", state
    assert "image:" in str(state["error"]) and "no-such-package-anywhere" in str(state["error"]), state


@pytest.mark.parametrize(
    ("image", "field", "rule"),
    [
        ('seq.Image.from_registry("docker.io/library/debian:12")', "image.base", "pulls bases only"),
        ('seq.Image.debian_slim().apt_install("bad name!")', "image.steps[0].apt_install[0]", "Debian"),
    ],
)
def test_what_an_image_cannot_be_is_refused_at_registration(
    mirrored: Mirrored, tmp_path: Path, image: str, field: str, rule: str
) -> None:
    folder = tmp_path / "refused"
    folder.mkdir()
    text = BENCH.replace('name="figlet-bench"', 'name="refused-bench"')
    (folder / "benchmark.py").write_text(
        re.sub(r"IMAGE = \(.*?\n\)\n", f"IMAGE = {image}\n", text, flags=re.S)
    )
    done = seq(mirrored, "deploy", str(folder))
    assert done.returncode != 0, done.stdout
    said = done.stdout + done.stderr
    assert field in said and rule in said, said
    with api(mirrored) as client:
        assert client.get("/v1/benchmarks/refused-bench").status_code == 404


DOCKERFILE_BENCH = """
import seq

IMAGE = seq.Image.from_dockerfile("Dockerfile"CONTEXT)


@seq.benchmark(name="NAME", gpu="cpu", cpu=1, memory=2, tasks={"left": "left"}, seeds=range(1),
               max_seconds=3.0, image=IMAGE)
class Made:
    def __init__(self):
        with open("/opt/made-by") as said:
            print("made by", said.read().strip(), flush=True)

    @seq.reset
    def reset(self, task, seed):
        self.x = 0.0
        return {"x": self.x, "target": -0.5}

    @seq.step
    def step(self, action):
        self.x += float(action[0])
        return {"x": self.x, "target": -0.5}, abs(self.x + 0.5) < 0.05, False, {}
"""


def test_a_dockerfile_builds_from_the_mirror_and_a_build_context_is_refused_by_name(
    mirrored: Mirrored, tmp_path: Path
) -> None:
    for name, context in (("from-dockerfile", ""), ("with-context", ', context="."')):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "Dockerfile").write_text(
            "FROM debian:12-slim AS base\nRUN echo a-dockerfile > /opt/made-by\n"
        )
        (folder / "benchmark.py").write_text(
            DOCKERFILE_BENCH.replace("NAME", name).replace("CONTEXT", context)
        )
    ok(mirrored, "deploy", str(tmp_path / "from-dockerfile"))
    assert ready(mirrored, "from-dockerfile")["status"] == "ready"
    assert "made by a-dockerfile" in ok(mirrored, "benchmark", "logs", "from-dockerfile", "--build")

    refused = seq(mirrored, "deploy", str(tmp_path / "with-context"))
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "image_context" in said and "COPY and ADD" in said, said

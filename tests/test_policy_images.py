"""Policy images through the Positronic door with the real `positronic-platform-client`: an image built here
(no pull from outside), pushed to a registry on loopback, submitted with `plan_of_image` by its tag. The tag
is pinned to its digest at submission, the worker pulls and runs it with podman (no network, read-only,
no capabilities), its episodes equal those of the same policy served by the platform, its output is the
run's `policy_log`; a private registry takes the right credential only, and the password is nowhere; what
cannot be pulled is refused before any episode with the contract's reason; no container outlives its worker,
a SIGKILLed one included."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from platform_client.enums import ReasonCode, SubmissionStatus
from platform_client.eval_plan import EvalPlan, RegistryCredential, plan_of_image
from platform_client.policy_images import PolicyImage
from platform_client.requests import CancelRequest
from sqlalchemy import select

import image_helpers
from conftest import free_port
from deadlines import give_up_at
from platform_harness import Harness, running_platform, toy_plan, wait_for
from yardstick.hosted.limits import BoxLimits, GiB
from yardstick.store.models import Run, RunEpisode
from yardstick.worker.boxes.containers import INSTALL_LABEL, install_label

pytestmark = pytest.mark.skipif(
    not image_helpers.available(), reason="podman, runc or docker-registry missing"
)

TOYS = (Path(__file__).parent / "toys.py").read_text()
PASSWORD = "registry-pa55word-8812"
WAIT_S = 240.0


PROBE = """import os, socket

import numpy as np
import yardstick.sdk as ys


def _reach(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return "connected"
    except OSError as exc:
        return f"failed ({type(exc).__name__})"


@ys.policy(hz=10)
class Prober:
    \"\"\"Tries what a hostile image would, prints what happened, then serves as a harmless policy.\"\"\"

    def __init__(self):
        print("gateway:", _reach(int(os.environ.get("PROBE_GATEWAY_PORT", "0")) or GATEWAY_PORT), flush=True)
        print("postgres:", _reach(5432), flush=True)
        try:
            print("data:", os.listdir(DATA_DIR), flush=True)
        except OSError as exc:
            print(f"data: unreadable ({type(exc).__name__})", flush=True)
        children = []
        try:
            for _ in range(5000):
                pid = os.fork()
                if pid == 0:
                    import time
                    time.sleep(30)
                    os._exit(0)
                children.append(pid)
            print("forks: never stopped", flush=True)
        except OSError as exc:
            print(f"forks: stopped after {len(children)} ({type(exc).__name__})", flush=True)
        for pid in children:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        try:
            open("/etc/written", "w").write("x")
            print("root: written", flush=True)
        except OSError as exc:
            print(f"root: read-only ({type(exc).__name__})", flush=True)

    @ys.infer
    def act(self, obs):
        return np.zeros((1, 1))
"""


@dataclass
class Images:
    harness: Harness
    public: image_helpers.Registry
    private: image_helpers.Registry
    rows: str  # the public image of toys:Rows, by tag
    private_rows: str
    broken: str  # an image whose policy cannot be built
    faulty: dict[str, str]  # toys' faulty policies as images, by class
    probe: str  # Prober, which tries to leave its box
    openpi: str  # toys:Rows served by the openpi dialect on TCP inside its container
    local: str  # its images' names in podman's store, its own: another run on this machine shares the store


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Images]:
    where = tmp_path_factory.mktemp("images")
    port = free_port()
    data_dir = where / "platform"
    probe = PROBE.replace("GATEWAY_PORT", str(port)).replace("DATA_DIR", repr(str(data_dir)))
    archive = image_helpers.build_rootfs(where / "rootfs", {"toys.py": TOYS, "probe.py": probe})
    local = f"localhost/yardstick-tests-{os.getpid()}"
    refs = {"rows": "toys:Rows", "broken": "toys:NoSuchPolicy", "probe": "probe:Prober"}
    refs |= {name: f"toys:{name}" for name in FAULTY}
    for name, ref in refs.items():
        image_helpers.import_image(archive, f"{local}/{name.lower()}:v1", ref)
    image_helpers.import_image(archive, f"{local}/openpi:v1", "toys:Rows", script="serve_openpi.py")
    refs["openpi"] = "toys:Rows"
    with (
        image_helpers.registry(where / "public") as public,
        image_helpers.registry(where / "private", ("tester", PASSWORD)) as private,
    ):
        pushed = {name: public.push(f"{local}/{name.lower()}:v1", f"acme/{name.lower()}:v1") for name in refs}
        private_rows = private.push(f"{local}/rows:v1", "acme/rows:v1")
        limits = BoxLimits(memory_bytes=1 * GiB, processes=256)
        try:
            with running_platform(
                where,
                None,
                lease_s=10.0,
                call_timeout_s=5.0,
                box_limits=limits,
                port=port,
                registries=(public.url, private.url),
            ) as harness:
                harness.wait_for_workers()
                yield Images(
                    harness,
                    public,
                    private,
                    pushed["rows"],
                    private_rows,
                    pushed["broken"],
                    {name: pushed[name] for name in FAULTY},
                    pushed["probe"],
                    pushed["openpi"],
                    local,
                )
        finally:
            image_helpers.remove_images(f"{local}/", public.host, private.host)


# Toys' policies that fail on the task "ten", and how each run ends.
FAULTY = {
    "CrashOnTen": (ReasonCode.policy_inference_crash, "boom at step 5"),
    "DieOnTen": (ReasonCode.policy_inference_crash, "dropped the session"),
    "HangOnTen": (ReasonCode.latency_budget_exceeded, "did not answer within"),
    "HogOnTen": (ReasonCode.policy_oom, "ran past its memory limit"),
}


def submit(images: Images, reference: str, key: str, credential: RegistryCredential | None = None):  # type: ignore[no-untyped-def]
    plan = plan_of_image(
        PolicyImage(reference), "toys.tally", org="acme", transaction_key=key, credential=credential
    )
    return images.harness.client().create_submission(plan)


def episodes_of(harness: Harness, run_id: int) -> list[tuple[str, int, int, object, object]]:
    with harness.platform.db.reading() as session:
        rows = session.execute(
            select(RunEpisode).where(RunEpisode.submission_id == run_id).order_by(RunEpisode.index)
        ).scalars()
        return [
            (e.task_id, e.trial, e.seed, (e.result or {}).get("success"), (e.result or {}).get("steps"))
            for e in rows
        ]


def served_rows(images: Images, key: str) -> list[tuple[str, int, int, object, object]]:
    """The episodes of toys:Rows served by the platform (no image), to hold an image's against."""
    served = images.harness.client().create_submission(toy_plan(key, spec="rows", episodes=4))
    ended = wait_for(images.harness.client(), served.submission_id, timeout=WAIT_S)
    assert ended.status is SubmissionStatus.finished, ended
    return episodes_of(images.harness, int(served.submission_id))


def manifest_digest(registry: image_helpers.Registry, repository: str, tag: str) -> str:
    auth = registry.credential
    answer = httpx.get(
        f"{registry.url}/v2/{repository}/manifests/{tag}",
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
        auth=auth,
    )
    return answer.headers["Docker-Content-Digest"]


def containers(images: Images) -> list[dict[str, object]]:
    """This install's containers: podman's store is the machine's, and another install (another test run on
    this machine) may hold containers of its own."""
    mine = install_label(images.harness.settings.data_dir)
    listed = image_helpers.podman("ps", "-a", "--filter", f"label={INSTALL_LABEL}={mine}", "--format", "json")
    return list(json.loads(listed.stdout or "[]"))


def test_an_image_plays_the_episodes_its_policy_plays_served(images: Images) -> None:
    created = submit(images, images.rows, "image-rows")
    assert created.policy_image_digest == manifest_digest(images.public, "acme/rows", "v1")
    ended = wait_for(images.harness.client(), created.submission_id, timeout=WAIT_S)
    assert ended.status is SubmissionStatus.finished, ended

    as_image = episodes_of(images.harness, int(created.submission_id))
    assert as_image and as_image == served_rows(images, "served-rows")

    # The run keeps the pinned reference, and what the container printed is its policy_log.
    with images.harness.platform.db.reading() as session:
        run = session.get(Run, int(created.submission_id))
        assert run is not None
        assert run.endpoints["policy"]["spec"].endswith("@" + str(created.policy_image_digest))
    assert ended.artifacts is not None and ended.artifacts.policy_log is not None
    log = httpx.get(ended.artifacts.policy_log).text
    assert "serving toys:Rows on /yardstick/policy.sock" in log, log


def test_an_openpi_server_in_an_image_is_reached_through_the_relay_and_plays_the_same(images: Images) -> None:
    created = submit(images, images.openpi, "image-openpi")
    ended = wait_for(images.harness.client(), created.submission_id, timeout=WAIT_S)
    assert ended.status is SubmissionStatus.finished, ended
    as_openpi = episodes_of(images.harness, int(created.submission_id))
    assert as_openpi and as_openpi == served_rows(images, "served-rows-2")
    assert ended.artifacts is not None and ended.artifacts.policy_log is not None
    log = httpx.get(ended.artifacts.policy_log).text
    assert "serving toys:Rows (openpi at the root) on 127.0.0.1:8000" in log, log


def test_an_image_and_a_served_policy_in_one_blind_sample_play_the_same_trials(images: Images) -> None:
    plan = EvalPlan.model_validate(
        {
            "request_type": {"type": "private_eval", "org": "acme"},
            "eval": "toys.tally",
            "endpoints": [
                {"name": "as-image", "kind": "image", "wire": "websocket", "image": images.rows},
                {"name": "as-served", "kind": "served", "wire": "websocket", "spec": "rows"},
            ],
            "episodes_per_endpoint": 3,
            "transaction_key": "mixed-sample",
        }
    )
    created = images.harness.client().create_submission(plan)
    ended = wait_for(images.harness.client(), created.submission_id, timeout=WAIT_S)
    assert ended.status is SubmissionStatus.finished, ended
    with images.harness.platform.db.reading() as session:
        rows = session.execute(
            select(RunEpisode).where(RunEpisode.submission_id == int(created.submission_id))
        ).scalars()
        by_endpoint: dict[str, list[tuple[str, int, int, object, object]]] = {}
        for e in sorted(rows, key=lambda e: e.index):
            result = e.result or {}
            played = (e.task_id, e.trial, e.seed, result.get("success"), result.get("steps"))
            by_endpoint.setdefault(e.endpoint, []).append(played)
    assert set(by_endpoint) == {"as-image", "as-served"}
    assert by_endpoint["as-image"] and by_endpoint["as-image"] == by_endpoint["as-served"]


def test_a_runs_container_is_gone_once_its_worker_has_nothing_to_play(images: Images) -> None:
    client = images.harness.client()
    ended = wait_for(client, submit(images, images.rows, "ended-run").submission_id, timeout=WAIT_S)
    assert ended.status is SubmissionStatus.finished, ended
    gone_within(images, WAIT_S)

    created = submit(images, images.faulty["HangOnTen"], "cancelled-run")
    deadline = give_up_at(WAIT_S)
    while not containers(images):
        assert time.monotonic() < deadline, "no container started"
        time.sleep(0.1)
    client.cancel_submission(CancelRequest(id=created.submission_id))
    assert wait_for(client, created.submission_id, timeout=WAIT_S).status is SubmissionStatus.cancelled
    gone_within(images, WAIT_S)


def gone_within(images: Images, seconds: float) -> None:
    deadline = give_up_at(seconds)
    while left := containers(images):
        assert time.monotonic() < deadline, f"containers outlived their run: {left}"
        time.sleep(0.2)


def test_a_private_registry_takes_the_right_credential_only(images: Images) -> None:
    wrong = submit(
        images, images.private_rows, "private-wrong", RegistryCredential(username="tester", password="nope")
    )
    assert wrong.status is SubmissionStatus.errored and wrong.reason_code is ReasonCode.image_unpullable, (
        wrong
    )
    anonymous = submit(images, images.private_rows, "private-none")
    assert anonymous.reason_code is ReasonCode.image_unpullable, anonymous
    right = submit(
        images, images.private_rows, "private-right", RegistryCredential(username="tester", password=PASSWORD)
    )
    assert right.status is not SubmissionStatus.errored and right.policy_image_digest, right
    ended = wait_for(images.harness.client(), right.submission_id, timeout=WAIT_S)
    assert ended.status is SubmissionStatus.finished, ended
    # The password is in no row, response or log the platform keeps.
    with images.harness.platform.db.reading() as session:
        for run in session.execute(select(Run)).scalars():
            kept = json.dumps([run.plan, run.resolved, run.endpoints, run.reason])
            assert PASSWORD not in kept
    assert PASSWORD not in right.model_dump_json() and PASSWORD not in ended.model_dump_json()
    # Nor in a file the platform wrote. (Not the database's, read above through SQL: a file of SQLite's
    # opened and closed in the process that serves it drops that process's locks on it, and breaks WAL.)
    for path in images.harness.settings.data_dir.rglob("*"):
        if path.is_file() and not path.name.startswith("yardstick.db") and path.stat().st_size < 5_000_000:
            assert PASSWORD.encode() not in path.read_bytes(), path


def test_what_cannot_be_pulled_is_refused_before_any_episode(images: Images) -> None:
    missing = submit(images, f"{images.public.host}/acme/rows:v9", "missing-tag")
    assert missing.status is SubmissionStatus.errored and missing.reason_code is ReasonCode.image_unpullable
    elsewhere = submit(images, "registry.example.com/acme/rows:v1", "other-registry")
    assert elsewhere.reason_code is ReasonCode.image_unpullable
    view = images.harness.client().get_submission(elsewhere.submission_id)
    assert view.status is SubmissionStatus.errored and view.episodes.done == 0


def test_an_image_whose_policy_cannot_start_fails_with_what_it_said(images: Images) -> None:
    created = submit(images, images.broken, "broken-image")
    ended = wait_for(images.harness.client(), created.submission_id, timeout=WAIT_S)
    assert ended.status is SubmissionStatus.errored and ended.reason_code is ReasonCode.policy_setup_crash, (
        ended
    )
    with images.harness.platform.db.reading() as session:
        run = session.get(Run, int(created.submission_id))
        assert run is not None and "NoSuchPolicy" in (run.reason or ""), run.reason


def test_no_container_outlives_its_worker_even_killed(images: Images) -> None:
    harness = images.harness
    created = submit(images, images.rows, "killed-worker")
    deadline = give_up_at(WAIT_S)
    while not containers(images):  # the worker started its container
        assert time.monotonic() < deadline, "no container started"
        time.sleep(0.1)
    worker = harness.workers[0]
    os.kill(worker.pid, signal.SIGKILL)
    worker.join(timeout=30)
    harness.workers.remove(worker)
    try:
        assert containers(images), "the container outlived its killed worker, as nothing stopped it yet"
        harness.start_worker()  # sweeps what the dead worker left, then plays the run on
        ended = wait_for(harness.client(), created.submission_id, timeout=WAIT_S)
        assert ended.status is SubmissionStatus.finished, ended
        harness.stop_workers()
        harness.workers.clear()
        assert containers(images) == [], containers(images)
    finally:  # the module's other tests need a worker, whatever became of this one
        if not harness.workers:
            harness.start_worker()


def checks_left(images: Images) -> set[str]:
    """The containers of this module's images that no worker of its install started: what a check left."""
    mine = install_label(images.harness.settings.data_dir)
    return {
        str(row["Id"])
        for row in image_helpers.all_containers()
        if str(row.get("Image", "")).startswith((images.local, images.private.host))
        and (row.get("Labels") or {}).get(INSTALL_LABEL) != mine
    }


def yardstick(images: Images, *args: str, timeout: float = WAIT_S) -> subprocess.CompletedProcess[str]:
    env = {
        **image_helpers.podman_env(),
        "YARDSTICK_PLATFORM_URL": images.harness.url,
        "YARDSTICK_API_KEY": images.harness.keys["alice"],
        "COLUMNS": "200",
    }
    command = [str(Path(sys.executable).parent / "yardstick"), *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_cli_checks_an_image_and_submits_one(images: Images, tmp_path: Path) -> None:
    before = checks_left(images)
    good = yardstick(images, "image", "check", f"{images.local}/rows:v1")
    said = good.stdout + good.stderr
    assert good.returncode == 0 and "serves:" in said and "10 Hz, chunks of 4" in said, said
    bad = yardstick(images, "image", "check", f"{images.local}/broken:v1", "--start-timeout", "60")
    assert bad.returncode == 1 and "NoSuchPolicy" in bad.stdout + bad.stderr, bad
    password = tmp_path / "password"
    password.write_text(PASSWORD)
    pulled = yardstick(images, "image", "check", images.private_rows, "--registry", images.private.url,
                       "--username", "tester", "--password-file", str(password))  # fmt: skip
    assert pulled.returncode == 0 and "pinned:" in pulled.stdout + pulled.stderr, pulled
    assert checks_left(images) == before  # a check leaves nothing running

    submitted = yardstick(images, "eval", "submit", "--policy-image", images.rows, "--eval", "toys.tally",
                          "--org", "acme", "--wait")  # fmt: skip
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    assert "image pinned to sha256:" in submitted.stdout + submitted.stderr, submitted
    neither = yardstick(images, "eval", "submit", "--policy-image", images.rows)
    assert neither.returncode == 2 and "--eval" in neither.stderr + neither.stdout, neither


@pytest.mark.parametrize("policy", sorted(FAULTY))
def test_a_faulty_image_fails_its_run_with_the_reason_and_the_worker_lives(
    images: Images, policy: str
) -> None:
    code, said = FAULTY[policy]
    stray = Path.cwd() / "oom"  # conmon's mark of a container the kernel killed, where it runs
    there = stray.exists()
    created = submit(images, images.faulty[policy], f"faulty-{policy}")
    ended = wait_for(images.harness.client(), created.submission_id, timeout=WAIT_S)
    assert ended.status is SubmissionStatus.errored and ended.reason_code is code, ended
    with images.harness.platform.db.reading() as session:
        run = session.get(Run, int(created.submission_id))
        assert run is not None and said in (run.reason or ""), run.reason
    assert all(worker.is_alive() for worker in images.harness.workers)
    assert there or not stray.exists(), "a file `oom` appeared in the worker's working folder"
    # The worker goes on: the next run plays.
    again = submit(images, images.rows, f"after-{policy}")
    assert (
        wait_for(images.harness.client(), again.submission_id, timeout=WAIT_S).status
        is SubmissionStatus.finished
    )


def test_a_boxed_image_reaches_no_network_no_data_and_cannot_exhaust_the_machine(images: Images) -> None:
    created = submit(images, images.probe, "probe")
    ended = wait_for(images.harness.client(), created.submission_id, timeout=WAIT_S)
    assert ended.status is SubmissionStatus.finished, ended
    assert ended.artifacts is not None and ended.artifacts.policy_log is not None
    log = httpx.get(ended.artifacts.policy_log).text
    assert "gateway: failed" in log and "postgres: failed" in log, log
    assert "data: unreadable" in log, log
    forks = re.search(r"forks: stopped after (\d+)", log)
    assert forks is not None and int(forks.group(1)) < 256, log
    assert "root: read-only" in log, log

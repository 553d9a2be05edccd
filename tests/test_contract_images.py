"""A policy image built to the published container contract (`platform_client.policy_container`), with the
real client: the README's example (examples/policy-image/) built with no network from the base this install
makes (`yardstick image base`), serving the Positronic session on TCP 8000 and demanding the `AUTH_TOKEN` the
platform hands it, runs a plan to `finished` with its digest pinned, its container still on no network; an
image past the compressed budget is refused naming the limit; one that never answers fails its run at the
warm-up deadline as the image's fault; a pull past the fetch deadline is the platform's."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from platform_client.enums import ReasonCode, SubmissionStatus
from platform_client.eval_plan import plan_of_image
from platform_client.policy_images import PolicyImage

import image_helpers
from deadlines import patience
from platform_harness import Harness, running_platform, wait_for
from yardstick.engine.failures import Failed, FailureKind, Party
from yardstick.hosted.limits import BoxLimits, GiB
from yardstick.positronic.errors import reason_code
from yardstick.store.models import Run
from yardstick.worker.boxes.containers import Podman

pytestmark = pytest.mark.skipif(
    not image_helpers.available(), reason="podman, runc or docker-registry missing"
)

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "policy-image"
WAIT_S = 240.0
# The platform's warm-up deadline here: the contract's 1800 s made short for a test, room enough for the
# example image to start on this machine as loaded as it is now.
WARMUP_S = float(round(patience(20.0)))
SILENT = """ARG BASE
FROM ${BASE}
CMD ["python3", "-c", "import time; print('warming up', flush=True); time.sleep(3600)"]
"""
FAT = """ARG IMAGE
FROM ${IMAGE}
COPY ballast /ballast
"""


@dataclass
class Contract:
    harness: Harness
    public: image_helpers.Registry
    example: str  # the README's example, pushed by tag
    silent: str  # an image that never answers
    fat: str  # the example and 4 MB of noise: past the compressed budget set here
    limit: int  # that budget
    local: str  # the example's name in podman's store


def yardstick(*args: str) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).parent / "yardstick"), *args]
    return subprocess.run(
        command, env=image_helpers.podman_env(), capture_output=True, text=True, timeout=900, check=False
    )


def digest_of(registry: image_helpers.Registry, repository: str, tag: str) -> str:
    answer = httpx.get(
        f"{registry.url}/v2/{repository}/manifests/{tag}",
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
    )
    return answer.headers["Docker-Content-Digest"]


def compressed(registry: image_helpers.Registry, repository: str, tag: str) -> int:
    """What a pull of `repository:tag` transfers, as the contract counts it: its config and layers."""
    answer = httpx.get(
        f"{registry.url}/v2/{repository}/manifests/{tag}",
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
    )
    manifest = answer.json()
    return int(manifest["config"]["size"]) + sum(int(layer["size"]) for layer in manifest["layers"])


def written(folder: Path, containerfile: str) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "Containerfile").write_text(containerfile)
    return folder


def build(tag: str, folder: Path, **args: str) -> None:
    """`podman build` with no network and no pull: everything it needs is in podman's store already."""
    given = [f"--build-arg={name}={value}" for name, value in args.items()]
    image_helpers.podman("build", "--pull=never", "--network=none", *given, "-t", tag, str(folder))


@pytest.fixture(scope="module")
def contract(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Contract]:
    where = tmp_path_factory.mktemp("contract")
    local = f"localhost/yardstick-contract-{os.getpid()}"
    base = f"{local}/base:latest"
    made = yardstick("image", "base", "--tag", base)
    assert made.returncode == 0, made.stdout + made.stderr
    # The README's example as written, but for the base's tag: this machine's store is shared.
    build(f"{local}/example:v1", EXAMPLE, BASE=base)
    build(f"{local}/silent:v1", written(where / "silent", SILENT), BASE=base)
    (where / "fat").mkdir()
    (where / "fat" / "ballast").write_bytes(os.urandom(4 * 10**6))
    build(f"{local}/fat:v1", written(where / "fat", FAT), IMAGE=f"{local}/example:v1")
    try:
        with image_helpers.registry(where / "public") as public:
            pushed = {
                name: public.push(f"{local}/{name}:v1", f"acme/{name}:v1")
                for name in ("example", "silent", "fat")
            }
            limit = compressed(public, "acme/example", "v1") + 10**6
            with running_platform(
                where,
                None,
                lease_s=10.0,
                call_timeout_s=5.0,
                box_limits=BoxLimits(memory_bytes=1 * GiB, processes=256),
                registries=(public.url,),
                max_image_bytes=limit,
                image_warmup_deadline_s=WARMUP_S,
            ) as harness:
                harness.wait_for_workers()
                yield Contract(
                    harness,
                    public,
                    pushed["example"],
                    pushed["silent"],
                    pushed["fat"],
                    limit,
                    f"{local}/example:v1",
                )
    finally:
        image_helpers.remove_images(f"{local}/")


def submit(contract: Contract, reference: str, key: str):  # type: ignore[no-untyped-def]
    plan = plan_of_image(PolicyImage(reference), "toys.tally", org="acme", transaction_key=key)
    return contract.harness.client().create_submission(plan)


def test_the_readmes_example_serves_the_contract_and_runs_a_plan_to_finished(contract: Contract) -> None:
    created = submit(contract, contract.example, "contract-example")
    assert created.policy_image_digest == digest_of(contract.public, "acme/example", "v1"), created
    ended = wait_for(contract.harness.client(), created.submission_id, timeout=WAIT_S)
    with contract.harness.platform.db.reading() as session:
        run = session.get(Run, int(created.submission_id))
        assert run is not None
        assert ended.status is SubmissionStatus.finished, run.reason
        assert run.endpoints["policy"]["spec"].endswith("@" + str(created.policy_image_digest))
    # It served on TCP 8000 demanding the token: the platform handed it one and opened its sessions with it.
    assert ended.artifacts is not None and ended.artifacts.policy_log is not None
    log = httpx.get(ended.artifacts.policy_log).text
    assert (
        "serving policy:ReachPolicy on 0.0.0.0:8000, sessions need the bearer token in $AUTH_TOKEN" in log
    ), log


def test_an_image_past_the_compressed_budget_is_refused_naming_the_limit(contract: Contract) -> None:
    created = submit(contract, contract.fat, "contract-fat")
    assert created.status is SubmissionStatus.errored and created.reason_code is ReasonCode.image_too_large
    with contract.harness.platform.db.reading() as session:
        run = session.get(Run, int(created.submission_id))
        assert run is not None
        assert f"the limit is {contract.limit:,} bytes compressed" in (run.reason or ""), run.reason


def test_an_image_that_misses_the_warm_up_deadline_fails_as_its_own_fault(contract: Contract) -> None:
    created = submit(contract, contract.silent, "contract-silent")
    ended = wait_for(contract.harness.client(), created.submission_id, timeout=WAIT_S + WARMUP_S)
    assert ended.status is SubmissionStatus.errored, ended
    assert ended.reason_code is ReasonCode.policy_setup_crash and not ended.reason_code.is_platform_fault
    with contract.harness.platform.db.reading() as session:
        run = session.get(Run, int(created.submission_id))
        assert run is not None
        assert f"did not answer within {WARMUP_S:g} s: the warm-up deadline" in (run.reason or ""), run.reason
        assert "warming up" in (run.reason or ""), run.reason


def test_a_pull_past_the_fetch_deadline_is_the_platforms_fault(contract: Contract, tmp_path: Path) -> None:
    podman = Podman(tmp_path / "conf", "contract-fetch", insecure=(contract.public.host,))
    # The fat image: no test pulls it (it is refused at submission), so podman has to fetch it.
    digest = digest_of(contract.public, "acme/fat", "v1")
    with pytest.raises(Failed) as failed:
        podman.pull(f"{contract.public.host}/acme/fat@{digest}", None, deadline_s=0.01)
    assert failed.value.kind is FailureKind.IMAGE_FETCH_TIMEOUT and failed.value.kind.party is Party.PLATFORM
    assert "image-fetch deadline of 0.01 s" in failed.value.reason
    assert reason_code(failed.value.kind) is ReasonCode.provision_wedged
    assert reason_code(failed.value.kind).is_platform_fault  # type: ignore[union-attr]


def test_an_image_past_the_unpacked_budget_is_refused_naming_the_limit(
    contract: Contract, tmp_path: Path
) -> None:
    podman = Podman(tmp_path / "conf", "contract-unpacked")
    podman.check_unpacked(contract.local, 55 * 10**9)  # the contract's budget: well within
    with pytest.raises(Failed) as failed:
        podman.check_unpacked(contract.local, 10**6)
    assert failed.value.kind is FailureKind.IMAGE_TOO_LARGE
    assert "the limit is 1 MB unpacked (1,000,000 bytes)" in failed.value.reason, failed.value.reason

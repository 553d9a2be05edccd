"""Runs' objects in an S3-compatible bucket (`--artifacts s3://bucket/prefix`), against moto's standalone
server on loopback as the S3 of a lab: the store keeps, reads, lists and links objects as the data folder
does; a platform on the bucket plays a run, writes nothing of it to its folder, and hands out the bucket's
own expiring links, which the contract's client and a browser's video follow."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from platform_client.eval_plan import EvalPlan

from platform_harness import running_platform, toy_plan
from s3_helpers import BUCKET, CREDENTIALS, START_S, moto, moto_bucket
from yardstick.core.artifacts import ArtifactNotFound, LocalArtifactStore
from yardstick.core.s3_artifacts import S3ArtifactStore, s3_client
from yardstick.core.s3_volumes import S3VolumeStore
from yardstick.core.volume_store import FromUpload, FromVersion, LocalVolumeStore, Placed, VolumeFilesMissing


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto's S3 on a loopback port, a bucket in it, and the AWS variables every process here reads."""
    with moto_bucket(tmp_path_factory.mktemp("moto"), MOTO) as url:
        yield url


# The module's S3 servers, the one serving now last (the last test stops it and starts another).
MOTO: list[subprocess.Popen[bytes]] = []


def test_the_bucket_keeps_reads_lists_and_links_objects_as_the_folder_does(
    endpoint: str, tmp_path: Path
) -> None:
    bucket = S3ArtifactStore(f"s3://{BUCKET}/lab/runs", link_ttl_s=600)
    folder = LocalArtifactStore(tmp_path / "artifacts")
    run = 0x1F2E3D
    for store in (bucket, folder):
        store.put(run, "result.json", b'{"old": true}', "application/json")
        store.put(run, "result.json", b'{"scores": {"primary": 0.5}}', "application/json")  # replaced whole
        store.put(run, "attempts/1/episodes/000000/video.mp4", b"\x00\x01" * 5000, "video/mp4")
        for n in range(1003):  # more than one ListObjectsV2 page (1,000 keys)
            store.put(
                run, f"logs/{n:04d}.ndjson", f"line {n}\n".encode(), "application/x-ndjson", durable=False
            )
        store.put(run + 1, "logs/other-run.ndjson", b"not this run's", "application/x-ndjson")

    for store in (bucket, folder):
        with store.open(run, "result.json") as stream:
            assert stream.read() == b'{"scores": {"primary": 0.5}}'
        assert store.exists(run, "attempts/1/episodes/000000/video.mp4")
        assert not store.exists(run, "attempts/1/episodes/000001/video.mp4")
        with pytest.raises(ArtifactNotFound):
            store.open(run, "nothing.json")
        with pytest.raises(ValueError, match="artifact key"):
            store.put(run, "../escape.json", b"{}", "application/json")
    assert bucket.keys(run) == folder.keys(run)
    assert len(bucket.keys(run, "logs/")) == 1003
    assert bucket.keys(run, "logs/") == folder.keys(run, "logs/")
    assert bucket.keys(run, "attempts/") == [("attempts/1/episodes/000000/video.mp4", 10000)]
    assert bucket.keys(0xABC) == []
    assert bucket.location(run, "attempts/1/") == f"s3://{BUCKET}/lab/runs/{run:x}/attempts/1/"

    # A link is the bucket's own GET, signed for the endpoint it names: nobody needs a key to follow it.
    link = bucket.presigned(run, "attempts/1/episodes/000000/video.mp4", media_type="video/mp4")
    assert link is not None and link.startswith(endpoint + f"/{BUCKET}/lab/runs/")
    assert "X-Amz-Signature=" in link and "X-Amz-Expires=600" in link
    fetched = httpx.get(link)
    assert fetched.status_code == 200 and fetched.content == b"\x00\x01" * 5000
    assert fetched.headers["content-type"] == "video/mp4"
    # It carries a signature, never the secret it was made with (moto checks no signature: S3 does).
    assert CREDENTIALS["AWS_SECRET_ACCESS_KEY"] not in link
    assert folder.presigned(run, "result.json") is None  # the folder's links are the gateway's


def test_a_bad_artifacts_url_is_refused_naming_the_rule(endpoint: str) -> None:
    for url, rule in (
        ("gs://bucket/x", "no s3:// URL"),
        ("s3://", "names no bucket"),
        ("s3://a/x", "names no bucket"),
        ("s3://lab_bucket/x", "names no bucket"),
    ):
        with pytest.raises(ValueError, match=rule):
            S3ArtifactStore(url)
    completed = subprocess.run(
        [sys.executable, "-m", "yardstick.cli", "worker", "--artifacts", "gs://lab/runs"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 2 and "--artifacts" in completed.stderr
    assert "is no s3:// URL" in completed.stderr
    # A bucket the store does not have: said at the start, not at the first run's first object.
    missing = subprocess.run(
        [sys.executable, "-m", "yardstick.cli", "worker", "--artifacts", "s3://no-such-bucket/runs"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    said = " ".join(missing.stderr.replace("│", " ").split())
    assert missing.returncode == 2 and "--artifacts" in said and "no such bucket" in said, missing.stderr


def test_a_platform_on_the_bucket_plays_a_run_and_hands_out_the_buckets_links(
    endpoint: str, tmp_path: Path
) -> None:
    prefix = "platform"
    with running_platform(tmp_path, None, artifacts_url=f"s3://{BUCKET}/{prefix}") as platform:
        client = platform.client("alice")
        plan = EvalPlan.model_validate(
            {
                "request_type": {"type": "private_eval", "org": "acme"},
                "eval": "toys.canvas",
                "endpoints": [{"name": "policy", "kind": "served", "wire": "websocket", "spec": "rows"}],
                "episodes_per_endpoint": 2,
                "transaction_key": "on-the-bucket",
            }
        )
        created = client.create_submission(plan)
        view = platform.wait(client, created.submission_id)
        assert view.status.name == "finished", view
        run = int(created.submission_id)

        # Every object of the run is in the bucket, none in the data folder.
        stored = dict(platform.platform.artifacts.keys(run))
        assert "result.json" in stored and any(k.endswith(".mp4") for k in stored)
        assert not (platform.settings.artifact_root / f"{run:x}").exists()

        # The contract's links are the bucket's, and they serve what the run wrote.
        listed = client.list_artifacts(created.submission_id).artifacts
        assert {a.key for a in listed} <= set(stored)
        for artifact in listed:
            assert urlsplit(str(artifact.url)).netloc == urlsplit(endpoint).netloc, artifact.url
        result_link = str(view.artifacts.result)
        assert urlsplit(result_link).netloc == urlsplit(endpoint).netloc
        result = httpx.get(result_link).json()
        assert result["scores"]["primary"] == pytest.approx(view.scores.primary)

        # The run page's video: the page's own route sends the browser on to the bucket.
        page = httpx.get(str(view.replay.url)) if view.replay is not None else None  # type: ignore[union-attr]
        assert page is not None and page.status_code == 200
        data = httpx.get(str(view.replay.url).rstrip("/") + "/data.json").json()  # type: ignore[union-attr]
        video = data["episodes"][0]["videos"][0]["url"]
        moved = httpx.get(video)
        assert moved.status_code == 307
        assert urlsplit(moved.headers["location"]).netloc == urlsplit(endpoint).netloc
        played = httpx.get(video, follow_redirects=True)
        assert played.status_code == 200 and played.headers["content-type"] == "video/mp4"
        assert played.content[4:8] == b"ftyp"  # an MP4's first box


def test_an_object_is_relayed_whole_to_a_client_that_follows_no_redirect(endpoint: str) -> None:
    """The Sequences CLI fetches a recording from its own gateway only, following no redirect: the gateway
    relays the bucket's bytes (a missing one answers the route's own 404)."""
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from yardstick.core.refusals import Refusal, not_found
    from yardstick.http.artifact_files import artifact_file

    bucket = S3ArtifactStore(f"s3://{BUCKET}/relayed")
    video = os.urandom(3 << 20)  # more than one chunk of the relay
    bucket.put(7, "attempts/1/episodes/000000/video.mp4", video, "video/mp4")
    app = FastAPI()

    @app.get("/videos/{index}.mp4")
    def recording(index: int) -> object:
        key = f"attempts/1/episodes/{index:06d}/video.mp4"
        return artifact_file(bucket, 7, key, lambda: not_found(f"no video {index}"), relay=True)

    @app.exception_handler(Refusal)
    def refused(_request: object, exc: Exception) -> object:
        from fastapi.responses import JSONResponse

        return JSONResponse({"detail": str(exc)}, status_code=404)

    with TestClient(app, follow_redirects=False) as client:
        answered = client.get("/videos/0.mp4")
        assert answered.status_code == 200 and answered.content == video
        missing = client.get("/videos/1.mp4")
        assert missing.status_code == 404 and "no video 1" in missing.text


def test_a_volume_arrives_commits_and_mounts_in_the_bucket_as_in_the_folder(
    endpoint: str, tmp_path: Path
) -> None:
    """The volume store's calls, the same on both stores: chunks of any size (under S3's 5 MiB part minimum
    too) appended at the held offset only, a restart, the digest, a commit from an upload and from an earlier
    version, a version mounted as a folder and read by path, and what is dropped gone."""
    big, small = os.urandom(11 << 20), b"config"
    stores = {
        "folder": LocalVolumeStore(tmp_path / "volumes"),
        "bucket": S3VolumeStore(f"s3://{BUCKET}/lab", tmp_path / "cache"),
    }
    seen: dict[str, list[Any]] = {}
    for name, store in stores.items():
        said: list[Any] = [store.held(3, 10, 0)]
        said.append(store.append(3, 10, 0, 5, big[:5]))  # not at the held offset: nothing written
        for first, last in ((0, 1 << 20), (1 << 20, 7 << 20), (7 << 20, 11 << 20)):  # a small chunk, then big
            said.append(store.append(3, 10, 0, first, big[first:last]))
        said.append(store.held(3, 10, 0))
        store.append(3, 10, 1, 0, b"stale")
        store.restart(3, 10, 1)  # a new session: the file starts over
        said += [store.held(3, 10, 1), store.append(3, 10, 1, 0, small)]
        said += [store.digest(3, 10, 0), store.digest(3, 10, 1), store.digest(3, 10, 2)]
        store.commit(
            3,
            20,
            [
                Placed("weights/model.bin", FromUpload(10, 0)),
                Placed("config.json", FromUpload(10, 1)),
                Placed("empty", FromUpload(10, 2)),
            ],
        )
        store.discard(3, 10)
        store.commit(3, 21, [Placed("weights/model.bin", FromVersion(20, "weights/model.bin"))])
        with pytest.raises(ValueError, match="already laid out"):
            store.commit(3, 21, [])
        tree = store.tree(3, 20)
        said.append(sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file()))
        said.append((tree / "weights" / "model.bin").read_bytes() == big)
        with store.open(3, 21, "weights/model.bin") as stream:
            said.append(stream.read() == big)
        with pytest.raises(VolumeFilesMissing):
            store.open(3, 21, "config.json")
        store.drop_version(3, 20)
        with pytest.raises(VolumeFilesMissing):
            store.open(3, 20, "config.json")
        store.drop(3)
        with pytest.raises(VolumeFilesMissing):
            store.tree(3, 21)
        seen[name] = said
    assert seen["bucket"] == seen["folder"]
    assert seen["folder"][:6] == [0, 0, 1 << 20, 7 << 20, 11 << 20, 11 << 20]
    # Nothing of the volume is left in the bucket: no object, no multipart upload.
    client = s3_client()
    assert client.list_objects_v2(Bucket=BUCKET, Prefix="lab/volumes/").get("KeyCount", 0) == 0
    assert not client.list_multipart_uploads(Bucket=BUCKET, Prefix="lab/volumes/").get("Uploads")


def test_a_bucket_that_is_down_errors_the_run_as_the_platforms_fault_refunded_and_the_worker_goes_on(
    endpoint: str, tmp_path: Path
) -> None:
    """Last in the module: it stops the module's S3 server. A run whose objects cannot be written errors as
    the platform's fault (`storage_failed`, the day's quota given back), rather than waiting for a store
    that may not return; the worker lives, and once the store is back the next run finishes."""
    with running_platform(tmp_path, None, artifacts_url=f"s3://{BUCKET}/down") as platform:
        client = platform.client("alice")
        used = client.me().quota_for("submissions.day").used  # type: ignore[union-attr]
        server = MOTO[-1]
        server.kill()
        server.wait(timeout=30)
        created = client.create_submission(toy_plan("store-down", episodes=1))
        view = platform.wait(client, created.submission_id, timeout=START_S * 2)
        assert view.status.name == "errored" and view.reason_code.name == "internal_error", view.reason
        assert "could not be stored" in (view.reason or "") and "did not answer" in (view.reason or "")
        assert client.me().quota_for("submissions.day").used == used  # type: ignore[union-attr]
        assert all(worker.is_alive() for worker in platform.workers)

        MOTO.append(moto(urlsplit(endpoint).port or 0, tmp_path / "moto-again.log"))
        later = client.create_submission(toy_plan("store-back", episodes=1))
        again = platform.wait(client, later.submission_id, timeout=START_S * 2)
        assert again.status.name == "finished", again.reason
        assert "result.json" in dict(platform.platform.artifacts.keys(int(later.submission_id)))

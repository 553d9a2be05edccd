"""Volumes through the Sequences front door with the real `seq` CLI: `seq volume put | ls | show | rm`, a
put that changes nothing sending nothing, a changed file sent alone, an upload cut mid-file resumed through a
gateway started again, commits refused for a wrong md5 or size with nothing committed, forged and expired
targets refused, and a registered benchmark whose reset reads its assets volume during an eval."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from conftest import free_port, fresh_database, one_database
from deadlines import answering
from platform_harness import Harness, running_platform
from s3_helpers import BUCKET, moto_bucket
from yardstick.core.s3_artifacts import s3_client
from yardstick.sequences import paths
from yardstick.store.models import Volume, VolumeUpload, VolumeUploadFile, VolumeVersion

ROOT = Path(__file__).parent.parent
SEQ = ROOT / ".venv-seq" / "bin" / "seq"
EXAMPLES = Path(__file__).parent / "seq_examples"
MIB = 1 << 20


@pytest.fixture(scope="module", params=[*one_database("postgresql"), "s3"])
def platform(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    """The platform with its volumes in its folder (on PostgreSQL: `one_database`), and on SQLite with its
    volumes in a bucket (moto's S3 on loopback): both stores, both kinds of database."""
    assert SEQ.exists(), f"{SEQ} is missing: `make env` installs the Sequences CLI in a venv apart"
    folder = tmp_path_factory.mktemp(request.param)
    with contextlib.ExitStack() as stack:
        bucket = {}
        if request.param == "s3":
            stack.enter_context(moto_bucket(folder))
            bucket = {"artifacts_url": f"s3://{BUCKET}/lab"}
        url = stack.enter_context(
            fresh_database("sqlite" if request.param == "s3" else request.param, folder)
        )
        yield stack.enter_context(running_platform(folder, url, **bucket))


def stored(platform: Harness, volume_id: int) -> list[str]:
    """What the volume store holds of a volume, by key under the volume (`uploads/…`, `versions/…`), on
    either store: the folder's files, or the bucket's objects and open multipart uploads."""
    if platform.settings.artifacts_url is None:
        root = platform.settings.volume_root / format(volume_id, "x")
        return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    client = s3_client()
    prefix = f"lab/volumes/{volume_id:x}/"
    objects = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    uploads = client.list_multipart_uploads(Bucket=BUCKET, Prefix=prefix).get("Uploads", [])
    return sorted({entry["Key"][len(prefix) :] for entry in [*objects, *uploads]})


def seq(
    platform: Harness, *args: str, state: Path, base_url: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEQUENCES_")}
    env.update(
        SEQUENCES_BASE_URL=base_url or platform.url,
        SEQUENCES_API_KEY=platform.keys["alice"],
        SEQ_STATE_DIR=str(state),
    )
    return subprocess.run([str(SEQ), *args], env=env, capture_output=True, text=True, timeout=300)


def md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def folder_of(root: Path, files: dict[str, bytes]) -> Path:
    for path, data in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    return root


def api(platform: Harness, method: str, path: str, **kw: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {platform.keys['alice']}"}
    return httpx.request(method, platform.url + path, headers=headers, timeout=60, **kw)


def uploads_of(platform: Harness, name: str) -> list[VolumeUpload]:
    with platform.platform.db.reading() as session:
        return list(
            session.execute(
                select(VolumeUpload).join(Volume).where(Volume.name == name).order_by(VolumeUpload.created_at)
            ).scalars()
        )


def test_put_ls_show_and_puts_again_send_only_what_changed(platform: Harness, tmp_path: Path) -> None:
    blob = os.urandom(MIB)
    data = folder_of(tmp_path / "scenes", {"a.txt": b"hello", "sub/b.bin": blob, "empty": b""})
    put = seq(platform, "volume", "put", "scenes", str(data), state=tmp_path / "state")
    assert put.returncode == 0, put.stdout + put.stderr
    assert "uploading 3 files" in put.stdout and "scenes v1 is ready" in put.stdout, put.stdout

    listed = seq(platform, "volume", "ls", state=tmp_path / "state")
    assert re.search(r"scenes\s+checkpoint\s+active\s+v1\s+1\.0 MB", listed.stdout), listed.stdout
    shown = seq(platform, "volume", "show", "scenes", state=tmp_path / "state")
    assert re.search(r"state\s+active", shown.stdout) and re.search(r"version\s+v1", shown.stdout), (
        shown.stdout
    )
    files = api(platform, "GET", "/v1/volumes/scenes/files").json()
    assert {(f["path"], f["size"], f["md5"]) for f in files["files"]} == {
        ("a.txt", 5, md5(b"hello")),
        ("sub/b.bin", MIB, md5(blob)),
        ("empty", 0, md5(b"")),
    }
    assert api(platform, "GET", "/v1/volumes/scenes/files/sub/b.bin").content == blob

    again = seq(platform, "volume", "put", "scenes", str(data), state=tmp_path / "state")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "scenes v1 is already up to date" in again.stdout, again.stdout
    assert len(uploads_of(platform, "scenes")) == 1  # nothing opened, nothing sent

    (data / "a.txt").write_bytes(b"hello again")
    changed = seq(platform, "volume", "put", "scenes", str(data), state=tmp_path / "state")
    assert changed.returncode == 0, changed.stdout + changed.stderr
    assert "uploading 1 of 3 files" in changed.stdout and "scenes v2 is ready" in changed.stdout, (
        changed.stdout
    )
    latest = uploads_of(platform, "scenes")[-1]
    with platform.platform.db.reading() as session:
        rows = session.execute(
            select(VolumeUploadFile).where(VolumeUploadFile.upload_id == latest.id)
        ).scalars()
        sent = {row.path: (row.held, row.session is not None) for row in rows}
    assert sent == {"a.txt": (False, True), "sub/b.bin": (True, False), "empty": (True, False)}
    files = api(platform, "GET", "/v1/volumes/scenes/files").json()
    assert files["version"] == 2
    assert {f["path"]: f["md5"] for f in files["files"]}["a.txt"] == md5(b"hello again")
    assert api(platform, "GET", "/v1/volumes/scenes/files/sub/b.bin").content == blob


class CuttingProxy:
    """A TCP proxy in front of a gateway that counts the bytes clients send, and may cut every connection once
    they pass `cut_after` (a dropped link, mid-chunk). Its upstream can move (the gateway started again)."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.cut_after: int | None = None
        self.sent = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream))
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket, counted: bool) -> None:
        try:
            while data := source.recv(256 * 1024):
                if counted:
                    with self._lock:
                        self.sent += len(data)
                        cut = self.cut_after is not None and self.sent > self.cut_after
                    if cut:
                        break
                target.sendall(data)
        except OSError:
            pass
        for end in (source, target):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()

    def close(self) -> None:
        self._listener.close()


def started_again(platform: Harness, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """The same install served by a gateway of its own, in another process (`yardstick server`)."""
    port = free_port()
    args = ["--data-dir", str(platform.settings.data_dir), "--port", str(port), "--no-worker"]
    if platform.settings.artifacts_url:
        args += ["--artifacts", platform.settings.artifacts_url]
    if platform.settings.database_url:
        args += ["--database", platform.settings.database_url]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "yardstick.cli", "server", *args], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        answering(f"http://127.0.0.1:{port}/healthz", process, log)
    except AssertionError:
        process.kill()
        raise
    return process, port


def test_an_upload_cut_mid_file_resumes_through_a_gateway_started_again(
    platform: Harness, tmp_path: Path
) -> None:
    big = os.urandom(40 * MIB)  # three chunks of the SDK's 16 MiB
    data = folder_of(tmp_path / "big", {"weights.bin": big, "config.json": b"{}"})
    upstream = int(platform.url.rsplit(":", 1)[1])
    proxy = CuttingProxy(upstream)
    proxy.cut_after = 24 * MIB  # inside the second chunk: the first is whole on the platform
    try:
        cut = seq(platform, "volume", "put", "big", str(data), state=tmp_path / "state", base_url=proxy.url)
        assert cut.returncode != 0, cut.stdout + cut.stderr
        assert "run the same command again" in cut.stderr, cut.stdout + cut.stderr
        # Nothing of the first gateway's memory survives into the second: the sessions live in the store.
        server, port = started_again(platform, tmp_path / "server.log")
        try:
            proxy.upstream, proxy.cut_after, proxy.sent = port, None, 0
            resumed = seq(
                platform, "volume", "put", "big", str(data), state=tmp_path / "state", base_url=proxy.url
            )
        finally:
            server.terminate()
            server.wait(timeout=30)
    finally:
        proxy.close()
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resuming the upload of big v1" in resumed.stdout and "big v1 is ready" in resumed.stdout
    assert 24 * MIB <= proxy.sent < 26 * MIB, proxy.sent  # the last 24 MiB, not the 40
    assert api(platform, "GET", "/v1/volumes/big/files/weights.bin").content == big
    assert len(uploads_of(platform, "big")) == 1


def _start(platform: Harness, name: str, files: list[dict[str, Any]]) -> dict[str, Any]:
    answer = api(platform, "POST", f"/v1/volumes/{name}/uploads", json={"kind": "dataset", "files": files})
    assert answer.status_code == 201, answer.text
    started: dict[str, Any] = answer.json()
    return started


def _session(target: dict[str, Any]) -> str:
    opened = httpx.post(target["url"], headers=target["headers"], timeout=30)  # no key: the url is signed
    assert opened.status_code == 201, opened.text
    return opened.headers["Location"]


def _committed_nothing(platform: Harness, name: str) -> None:
    shown = api(platform, "GET", f"/v1/volumes/{name}").json()
    assert shown["state"] == "uploading" and shown["version"] is None, shown
    with platform.platform.db.reading() as session:
        volume_id = session.execute(select(Volume.id).where(Volume.name == name)).scalar_one()
        versions = select(func.count()).select_from(VolumeVersion).where(VolumeVersion.volume_id == volume_id)
        assert session.execute(versions).scalar_one() == 0
    assert not [key for key in stored(platform, volume_id) if key.startswith(("versions/", "laid/"))]


def test_a_commit_refuses_a_wrong_md5_or_size_naming_the_file_and_commits_nothing(platform: Harness) -> None:
    started = _start(platform, "wrong-md5", [{"path": "a.txt", "size": 5, "md5": md5(b"other")}])
    session = _session(started["targets"][0])
    whole = httpx.put(session, content=b"hello", headers={"Content-Range": "bytes 0-4/5"}, timeout=30)
    assert whole.status_code == 200, whole.text
    refused = api(platform, "POST", f"/v1/volumes/wrong-md5/uploads/{started['upload_id']}/commit")
    assert refused.status_code == 400, refused.text
    body = refused.json()
    assert body["code"] == "invalid_request" and "files[0].md5" in body["detail"], body
    assert f"hash to {md5(b'hello')}, not the declared {md5(b'other')}" in body["detail"]
    _committed_nothing(platform, "wrong-md5")

    started = _start(platform, "short", [{"path": "w.bin", "size": 10, "md5": md5(b"0123456789")}])
    session = _session(started["targets"][0])
    part = httpx.put(session, content=b"01234", headers={"Content-Range": "bytes 0-4/10"}, timeout=30)
    assert part.status_code == 308 and part.headers["Range"] == "bytes=0-4", part.text
    asked = httpx.put(session, headers={"Content-Range": "bytes */10"}, timeout=30)
    assert asked.status_code == 308 and asked.headers["Range"] == "bytes=0-4"
    wrong_total = httpx.put(session, content=b"56789", headers={"Content-Range": "bytes 5-9/11"}, timeout=30)
    assert wrong_total.status_code == 400 and "Content-Range" in wrong_total.json()["detail"]
    refused = api(platform, "POST", f"/v1/volumes/short/uploads/{started['upload_id']}/commit")
    assert refused.status_code == 400, refused.text
    assert (
        "files[0].size" in refused.json()["detail"]
        and "5 of its 10 bytes arrived" in refused.json()["detail"]
    )
    _committed_nothing(platform, "short")
    # The rest sent, the same upload commits.
    rest = httpx.put(session, content=b"56789", headers={"Content-Range": "bytes 5-9/10"}, timeout=30)
    assert rest.status_code == 200, rest.text
    done = api(platform, "POST", f"/v1/volumes/short/uploads/{started['upload_id']}/commit")
    assert done.status_code == 200 and done.json()["version"] == 1, done.text


def test_a_forged_or_expired_target_or_session_is_refused(platform: Harness) -> None:
    started = _start(platform, "guarded", [{"path": "a", "size": 1, "md5": md5(b"a")}])
    target = started["targets"][0]["url"]
    forged = re.sub(r"sig=([0-9a-f])", lambda m: "sig=" + ("1" if m.group(1) != "1" else "2"), target)
    other_file = target.replace(f"/{started['upload_id']}/0?", f"/{started['upload_id']}/1?")
    for url, reason in ((forged, "bad signature"), (other_file, "bad signature")):
        refused = httpx.post(url, timeout=30)
        assert refused.status_code == 403 and reason in refused.json()["detail"], refused.text
    upload_id = int(started["upload_id"], 16)
    uploads = platform.platform.uploads
    targets = platform.url + paths.UPLOAD_TARGETS  # where the door serves them, as it signs them
    old = uploads.signer.sign(upload_id, "0", now=time.time() - 2 * 86400, base_url=targets)
    assert (
        httpx.post(old, timeout=30)
        .json()["detail"]
        .startswith("sig: this upload address is refused (expired)")
    )
    session = _session(started["targets"][0])
    stolen = re.sub(r"/0/[0-9a-f]+\?", "/0/" + "0" * 32 + "?", session)
    refused = httpx.put(stolen, content=b"a", headers={"Content-Range": "bytes 0-0/1"}, timeout=30)
    assert refused.status_code == 403, refused.text
    # Past the upload's own life, a well-signed session is refused too, and so is its commit.
    with platform.platform.db.writing() as db:
        found = db.get(VolumeUpload, upload_id)
        assert found is not None
        found.expires_at = found.expires_at.replace(year=found.expires_at.year - 1)
    late = httpx.put(session, content=b"a", headers={"Content-Range": "bytes 0-0/1"}, timeout=30)
    assert late.status_code == 403 and "expired" in late.json()["detail"], late.text
    commit = api(platform, "POST", f"/v1/volumes/guarded/uploads/{started['upload_id']}/commit")
    assert commit.status_code == 409 and "expired" in commit.json()["detail"], commit.text


def test_the_bytes_of_an_upload_left_past_its_life_are_swept_by_the_next_upload(platform: Harness) -> None:
    """An upload abandoned half way (the laptop closed) does not hold its bytes on disk for ever: once past
    its life, the next upload of any volume removes them, and the old session still answers "expired"."""
    started = _start(platform, "abandoned", [{"path": "a", "size": 4, "md5": md5(b"abcd")}])
    session = _session(started["targets"][0])
    sent = httpx.put(session, content=b"ab", headers={"Content-Range": "bytes 0-1/4"}, timeout=30)
    assert sent.status_code == 308, sent.text
    upload_id = int(started["upload_id"], 16)
    with platform.platform.db.writing() as db:
        found = db.get(VolumeUpload, upload_id)
        assert found is not None
        volume_id = found.volume_id
        partials = f"uploads/{upload_id:x}/"
        assert any(key.startswith(partials) for key in stored(platform, volume_id))
        found.expires_at = found.expires_at.replace(year=found.expires_at.year - 1)
    _start(platform, "fresh", [{"path": "b", "size": 1, "md5": md5(b"b")}])
    assert not any(key.startswith(partials) for key in stored(platform, volume_id))
    late = httpx.put(session, content=b"cd", headers={"Content-Range": "bytes 2-3/4"}, timeout=30)
    assert late.status_code == 403 and "expired" in late.json()["detail"], late.text


@pytest.mark.parametrize(
    ("files", "words"),
    [
        ([{"path": "../x", "size": 1, "md5": md5(b"x")}], "files[0].path"),
        ([{"path": "a", "size": 1, "md5": md5(b"a")}, {"path": "a", "size": 1, "md5": md5(b"a")}], "twice"),
        (
            [{"path": "a", "size": 1, "md5": md5(b"a")}, {"path": "a/b", "size": 1, "md5": md5(b"b")}],
            "lies under",
        ),
        ([{"path": "a", "size": 1, "md5": "not-md5"}], "files[0].md5"),
        ([{"path": "a", "size": 1, "md5": md5(b"a"), "mode": 7}], "files.0.mode"),
    ],
    ids=["dotdot", "twice", "file-and-folder", "bad-md5", "unknown-field"],
)
def test_an_upload_declaring_bad_files_is_refused_by_rule_and_opens_nothing(
    platform: Harness, files: list[dict[str, Any]], words: str
) -> None:
    answer = api(platform, "POST", "/v1/volumes/refused/uploads", json={"files": files})
    assert answer.status_code == 400 and words in answer.json()["detail"], answer.text
    with platform.platform.db.reading() as session:
        count = select(func.count()).select_from(Volume).where(Volume.name == "refused")
        assert session.execute(count).scalar_one() == 0


def test_rm_deletes_a_volume_and_its_files(platform: Harness, tmp_path: Path) -> None:
    data = folder_of(tmp_path / "gone", {"x.txt": b"x"})
    assert seq(platform, "volume", "put", "gone", str(data), state=tmp_path / "state").returncode == 0
    with platform.platform.db.reading() as session:
        volume_id = session.execute(select(Volume.id).where(Volume.name == "gone")).scalar_one()
    assert stored(platform, volume_id)
    removed = seq(platform, "volume", "rm", "gone", state=tmp_path / "state")
    assert removed.returncode == 0 and "deleted gone" in removed.stdout, removed.stdout + removed.stderr
    assert "gone" not in seq(platform, "volume", "ls", state=tmp_path / "state").stdout
    assert seq(platform, "volume", "show", "gone", state=tmp_path / "state").returncode == 4
    assert not stored(platform, volume_id)


def test_a_benchmark_reads_its_assets_volume_during_an_eval(platform: Harness, tmp_path: Path) -> None:
    code = tmp_path / "code"
    for example in ("goal-bench", "reach-policy"):
        shutil.copytree(EXAMPLES / example, code / example)
    state = tmp_path / "state"
    early = seq(platform, "deploy", str(code / "goal-bench"), state=state)
    assert early.returncode == 2 and "assets[0].uri: no volume 'reach-goals'" in early.stderr, early.stderr

    goals = folder_of(
        tmp_path / "goals", {"goals/goals.json": json.dumps({"near": 0.3, "far": -0.7}).encode()}
    )
    assert (
        seq(platform, "volume", "put", "reach-goals", str(goals), "--kind", "dataset", state=state).returncode
        == 0
    )
    for example in ("goal-bench", "reach-policy"):
        done = seq(platform, "deploy", str(code / example), state=state)
        assert done.returncode == 0, done.stdout + done.stderr
    ran = seq(platform, "eval", "run", "reach-policy", "--benchmark", "goal-bench", state=state)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "success: overall 100.0% (n=4)" in ran.stdout, ran.stdout
    assert "task near: 0.300 (n=2)" in ran.stdout and "task far: -0.700 (n=2)" in ran.stdout, ran.stdout

    shown = seq(platform, "volume", "show", "reach-goals", state=state)
    assert re.search(r"used by\s+benchmark goal-bench", shown.stdout), shown.stdout
    kept = seq(platform, "volume", "rm", "reach-goals", state=state)
    assert kept.returncode == 5 and "goal-bench" in kept.stderr, kept.stdout + kept.stderr
    assert seq(platform, "volume", "show", "reach-goals", state=state).returncode == 0
    forced = seq(platform, "volume", "rm", "reach-goals", "--yes", state=state)
    assert forced.returncode == 0, forced.stdout + forced.stderr
    orphan = seq(platform, "eval", "run", "reach-policy", "--benchmark", "goal-bench", state=state)
    assert orphan.returncode != 0 and "assets 'reach-goals' v1 were deleted" in orphan.stdout + orphan.stderr


def test_a_deployment_reads_its_weights_volume_and_plays_what_they_say(
    platform: Harness, tmp_path: Path
) -> None:
    """`weights="vol://NAME"` mounts the uploaded checkpoint read-only where `{weights}` says, in the policy's
    box, for the build check and for every eval; the volume is then used by the deployment, and another
    store's URI is refused at deploy naming the field."""
    code = tmp_path / "code"
    for example in ("reach-bench", "weighted-policy"):
        shutil.copytree(EXAMPLES / example, code / example)
    state = tmp_path / "state"
    early = seq(platform, "deploy", str(code / "weighted-policy"), state=state)
    assert early.returncode == 2 and "weights.uri: no volume 'reach-ckpt'" in early.stderr, early.stderr

    def learned(sign: float) -> Path:
        return folder_of(
            tmp_path / f"ckpt{sign}", {"policy.json": json.dumps({"sign": sign, "most": 0.1}).encode()}
        )

    def gated() -> subprocess.CompletedProcess[str]:
        asked = ("eval", "run", "weighted-policy", "--benchmark", "reach-bench", "--trials", "1")
        return seq(platform, *asked, "--gate", "success>=0.5", state=state)

    assert seq(platform, "volume", "put", "reach-ckpt", str(learned(-1.0)), state=state).returncode == 0
    for example in ("reach-bench", "weighted-policy"):
        done = seq(platform, "deploy", str(code / example), state=state)
        assert done.returncode == 0, done.stdout + done.stderr
    backwards = gated()
    assert backwards.returncode == 8 and "success: overall 0.0%" in backwards.stdout, backwards.stdout

    # New weights are a new volume version; the deployment pinned v1, so deploying again pins v2.
    assert seq(platform, "volume", "put", "reach-ckpt", str(learned(1.0)), state=state).returncode == 0
    again = seq(platform, "deploy", str(code / "weighted-policy"), state=state)
    assert again.returncode == 0, again.stdout + again.stderr
    forwards = gated()
    assert forwards.returncode == 0 and "success: overall 100.0%" in forwards.stdout, forwards.stdout

    listed = seq(platform, "policy", "ls", state=state)
    assert re.search(r"weighted-policy\s.*vol://reach-ckpt@v2", listed.stdout), listed.stdout
    shown = api(platform, "GET", "/v1/volumes/reach-ckpt").json()
    assert shown["referenced_by"]["deployments"] == ["weighted-policy"], shown
    kept = seq(platform, "volume", "rm", "reach-ckpt", state=state)
    assert kept.returncode == 5 and "the weights of the deployment weighted-policy" in kept.stderr, (
        kept.stderr
    )

    hub = code / "weighted-policy" / "policy.py"
    hub.write_text(hub.read_text().replace("vol://reach-ckpt", "hf://org/reach-ckpt"))
    refused = seq(platform, "deploy", str(code / "weighted-policy"), state=state)
    assert refused.returncode == 2 and "weights.uri: 'hf://org/reach-ckpt' is fetched by" in refused.stderr, (
        refused.stdout + refused.stderr
    )

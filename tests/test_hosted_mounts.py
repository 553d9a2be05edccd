"""A box's volumes: each folder is mounted read-only at its own place (under /assets, which the machine has
not got), the rest of the box is as it was (the same files at the same paths, a read-only root, its scratch
writable), the data folder is out of sight while a volume inside it mounts, and Yardstick's
`seq.Volume(...).path` finds the place from the box's environment."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from hosted_helpers import needs_bwrap
from yardstick.hosted import mounts
from yardstick.hosted.seq_api import Volume
from yardstick.worker.boxes import sandbox

PROBE = """
import json, os, sys
out = {"read": open("/assets/a/goals.json").read(), "places": sorted(os.listdir("/assets"))}
for path in ["/assets/a/new", "/assets/a/goals.json", "/assets/c", "/new-at-root", sys.argv[1] + "/ok"]:
    try:
        with open(path, "a") as f:
            f.write("x")
        out[path] = "written"
    except OSError as exc:
        out[path] = exc.strerror
out["same files"] = os.path.exists(sys.executable) and os.path.isdir("/usr/lib")
out["hidden"] = sorted(os.listdir(sys.argv[2])) if os.path.lexists(sys.argv[2]) else None
print(json.dumps(out))
"""


@needs_bwrap
def test_a_volume_is_mounted_read_only_at_its_place_and_the_box_is_otherwise_the_same(tmp_path: Path) -> None:
    assert not Path("/assets").exists(), "the test wants a place the machine has not got"
    data = tmp_path / "data"  # the platform's data folder, hidden from boxes; the volumes live inside it
    volume, other, scratch = data / "volumes" / "a", data / "volumes" / "b", tmp_path / "scratch"
    for folder in (volume, other, scratch):
        folder.mkdir(parents=True)
    (volume / "goals.json").write_text('{"near": 0.3}')
    (other / "inner.txt").write_text("b")
    box = sandbox.Box(
        python=sys.executable,
        writable=(scratch,),
        hidden=(data,),
        mounts=((volume, "/assets/a"), (other, "/assets/b")),
    )
    finished = sandbox.run(box, [sys.executable, "-c", PROBE, str(scratch), str(data)], timeout_s=30)
    assert finished.returncode == 0, finished.stderr.decode()
    seen = json.loads(finished.stdout)
    assert seen["read"] == '{"near": 0.3}' and seen["places"] == ["a", "b"]
    for path in ("/assets/a/new", "/assets/a/goals.json", "/assets/c", "/new-at-root"):
        assert seen[path] == "Read-only file system", (path, seen)
    assert seen[str(scratch / "ok")] == "written"
    assert seen["same files"] is True
    assert seen["hidden"] is None  # out of sight altogether: not even an empty stand-in names it
    assert (volume / "goals.json").read_text() == '{"near": 0.3}'


def test_the_shims_volume_resolves_to_its_mount(monkeypatch: pytest.MonkeyPatch) -> None:
    goals = Volume.from_name("goals")
    monkeypatch.setenv(mounts.ENV, mounts.environment({"goals": "/assets"})[mounts.ENV])
    assert goals.path == Path("/assets") and Path(goals) / "x.json" == Path("/assets/x.json")
    with pytest.raises(LookupError, match=r"YARDSTICK_VOLUMES=.*other"):
        _ = Volume.from_name("other").path
    monkeypatch.delenv(mounts.ENV)
    with pytest.raises(LookupError, match="mounted read-only at /assets"):
        _ = goals.path


@pytest.mark.parametrize(
    ("mount", "rule"),
    [
        ("/assets", None),
        ("/assets/scenes", None),
        ("/usr/lib", "/assets or a folder under it"),
        ("assets", "an absolute path"),
        ("/assets/../etc", "no empty, '.' or '..' part"),
        ("/assets//x", "no empty, '.' or '..' part"),
    ],
)
def test_a_volume_mounts_only_at_assets_or_under_it(mount: str, rule: str | None) -> None:
    problem = mounts.mount_problem(mount)
    assert problem is None if rule is None else rule in (problem or ""), problem

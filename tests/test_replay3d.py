"""3D replays: the `.seqreplay` file read back as written, a MuJoCo model's scene as a glTF binary (a node
a rigid group under `seq_root`, Y up), and a frame drawn from scene and poses covering the pixels
MuJoCo's own render of that state covers."""

from __future__ import annotations

import gzip
import json
import math
from concurrent.futures import Future
from typing import Any

import numpy as np
import pytest

from silhouettes import free_camera, iou, mujoco_mask, replay_mask
from yardstick.replay3d import format as replay_format
from yardstick.replay3d import mujoco_poses
from yardstick.replay3d.gltf import Z_UP_TO_Y_UP, accessor_array, unpack
from yardstick.replay3d.mujoco_poses import MujocoPoses, NotMujoco, mujoco_pair
from yardstick.replay3d.mujoco_scene import export, scene_of

mujoco = pytest.importorskip("mujoco")

# Every primitive MuJoCo draws, a mesh, a welded child, a mocap body, a collision copy (group 3, not drawn)
# and a body that draws nothing.
XML = """
<mujoco>
  <asset>
    <mesh name="tetra" vertex="0 0 0  .08 0 0  0 .08 0  0 0 .08"/>
    <material name="red" rgba=".9 .1 .1 1"/>
  </asset>
  <worldbody>
    <geom name="floor" type="plane" size="1 1 .1" rgba=".8 .8 .8 1"/>
    <body name="crate" pos=".2 .1 .1">
      <freejoint/>
      <geom type="box" size=".06 .04 .03" material="red"/>
      <geom type="box" size=".2 .2 .2" group="3"/>
      <site name="mark" pos="0 0 .1"/>
      <body name="lid" pos="0 0 .04"><geom type="cylinder" size=".03 .01" rgba="0 .5 1 1"/></body>
    </body>
    <body name="arm" pos="-.2 0 .2">
      <joint type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 .15 0 0" size=".02"/>
      <body name="tip" pos=".15 0 0"><joint type="hinge" axis="0 0 1"/><geom type="mesh" mesh="tetra"/></body>
    </body>
    <body name="ball" pos="0 -.2 .1">
      <freejoint/><geom type="sphere" size=".04"/><geom type="ellipsoid" size=".02 .03 .05" pos="0 0 .06"/>
    </body>
    <body name="ghost" pos="0 .3 .1"><freejoint/><geom type="sphere" size=".04" rgba="1 1 1 0"/></body>
    <body name="target" mocap="true" pos="0 0 .3"><geom type="sphere" size=".02" rgba="0 1 0 1"/></body>
  </worldbody>
</mujoco>
"""


@pytest.fixture(scope="module")
def world() -> tuple[Any, Any]:
    model = mujoco.MjModel.from_xml_string(XML)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    return model, data


def test_a_replay_reads_back_as_written_and_the_same_frames_give_the_same_bytes() -> None:
    rng = np.random.default_rng(0)
    nodes = ["arm", "crate", "ball"]
    writer = replay_format.ReplayWriter(
        nodes, engine="mujoco", scene_sha256="ab" * 32, meta={"hz": 80.0}, capacity=2
    )
    pos = np.cumsum(rng.normal(0, 0.01, (37, 3, 3)), axis=0).astype(np.float32)
    quat = rng.normal(size=(37, 3, 4))
    quat = (quat / np.linalg.norm(quat, axis=-1, keepdims=True)).astype(np.float32)
    for frame in range(37):
        looks = {"crate": {"rgba": [0, 1, 0, 1]}, "goal": {"visible": False}} if frame == 5 else None
        writer.frame(frame / 80, frame, pos[frame], quat[frame], looks=looks)
    data = writer.to_bytes()
    assert data == writer.to_bytes()  # mtime 0: nothing of the moment it was written

    replay = replay_format.read(data)
    assert replay.frames == 37 and replay.nodes == nodes and replay.engine == "mujoco"
    assert replay.scene_sha256 == "ab" * 32 and replay.meta == {"hz": 80.0}
    # On the file's grids: a position within half of 0.5 mm; a quaternion (up to its sign: q and -q turn
    # alike) within a count of 1/4096 a part, its turn and its rest each rounded.
    assert np.abs(replay.pos - pos).max() <= replay_format.POS_UNIT / 2 + 1e-7
    assert quaternion_error(replay.quat, quat) <= 1.0 / replay_format.QUAT_SCALE
    assert replay.t.tolist() == [f / 80 for f in range(37)] and replay.step.tolist() == list(range(37))
    assert replay.looks == [(5, "crate", {"rgba": [0.0, 1.0, 0.0, 1.0]}), (5, "goal", {"visible": False})]
    assert gzip.decompress(data).startswith(replay_format.MAGIC)


def test_libdeflates_file_and_zlibs_hold_the_same_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    """The install packs a replay with libdeflate; an interpreter without it (an image's, in a box) with
    zlib: other bytes, the same file once unpacked, each the same on a rerun."""
    assert replay_format.deflate is not None, "the install has no libdeflate (the `deflate` package)"
    rng = np.random.default_rng(3)
    writer = replay_format.ReplayWriter(["arm", "ball"], engine="own", parents=[-1, 0])
    quat = rng.normal(size=(60, 2, 4))
    quat /= np.linalg.norm(quat, axis=-1, keepdims=True)
    writer.extend(np.arange(60) / 50, np.arange(60, dtype=np.int32), rng.normal(0, 1, (60, 2, 3)), quat)
    packed = writer.to_bytes()
    with monkeypatch.context() as patched:
        patched.setattr(replay_format, "deflate", None)
        zlibs = writer.to_bytes()
        assert zlibs == writer.to_bytes()
    assert packed == writer.to_bytes() and packed != zlibs
    assert gzip.decompress(packed) == gzip.decompress(zlibs)
    assert np.array_equal(replay_format.read(packed).pos, replay_format.read(zlibs).pos)


def test_frames_handed_over_are_kept_as_they_are_by_an_empty_writer_and_copied_by_another() -> None:
    writer = replay_format.ReplayWriter(["a"], engine="own", capacity=0)
    t, step = np.array([0.0, 0.1]), np.array([0, 1], dtype=np.int32)
    pos, quat = np.zeros((2, 1, 3)), np.tile([1.0, 0, 0, 0], (2, 1, 1))
    writer.extend(t, step, pos, quat, [(1, "a", {"visible": False})], handed=True)
    assert writer.frames == 2 and writer._pos is pos and writer.looks == [(1, "a", {"visible": False})]
    writer.extend(t + 0.2, step + 2, pos + 1.0, quat, [(0, "a", {"visible": True})], handed=True)
    assert writer.frames == 4 and writer._pos is not pos and pos.max() == 0.0
    assert writer.looks[-1] == (2, "a", {"visible": True})
    assert replay_format.read(writer.to_bytes()).step.tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match=r"pos: finite metres .*\(frame 0\)"):
        empty = replay_format.ReplayWriter(["a"], engine="own")
        empty.extend(t, step, np.full((2, 1, 3), np.nan), quat, handed=True)
    assert empty.frames == 0


def test_numbers_at_the_grids_ends_and_an_episode_of_no_frames_read_back() -> None:
    """The varints' long numbers (a position 10 km out, a time 1e9 s on: counts of 25 and 50 bits, their
    second differences longer still) and short ones side by side; and a writer handed no frame."""
    writer = replay_format.ReplayWriter(["far", "near"], engine="own", parents=[-1, 0])
    pos = np.array([[[1e4, -1e4, 0.0], [1e4, -1e4, 0.001]], [[-1e4, 1e4, 0.0], [-1e4, 1e4, 0.002]]])
    quat = np.array([[[1.0, 0, 0, 0], [0, 1.0, 0, 0]], [[0, 0, 0, 1.0], [0.5, 0.5, 0.5, 0.5]]])
    writer.extend(np.array([0.0, 1e9]), np.array([0, 7], dtype=np.int32), pos, quat)
    replay = replay_format.read(writer.to_bytes())
    assert replay.t.tolist() == [0.0, 1e9] and replay.step.tolist() == [0, 7]
    # float32 keeps 10 km to a millimetre (24 bits): read back within that of the recorded.
    assert np.abs(replay.pos - pos).max() <= 1e-3
    assert quaternion_error(replay.quat, quat) <= 1.0 / replay_format.QUAT_SCALE

    empty = replay_format.read(replay_format.ReplayWriter(["a", "b"], engine="own").to_bytes())
    assert empty.frames == 0 and empty.pos.shape == (0, 2, 3) and empty.quat.shape == (0, 2, 4)


def test_the_compiled_encoder_makes_the_bytes_numpy_makes(world: tuple[Any, Any]) -> None:
    """The install built the replay's encoder (setup.py: the close of an episode in one pass) and it makes
    numpy's numbers exactly: random poses of every shape (chains, sign flips, parts a hair past ±1, a 10 km
    position, one frame, no frame) and a simulated episode of a chain and free bodies."""
    assert replay_format._columns is not None, "the install built no replay3d._columns: no C compiler?"
    rng = np.random.default_rng(11)
    cases = []
    for trial in range(200):
        nodes, frames = int(rng.integers(0, 8)), int(rng.integers(0, 50))
        pos = rng.uniform(-3, 3, (frames, nodes, 3)) * (1e4 / 3 if trial == 7 else 1.0)
        quat = rng.normal(size=(frames, nodes, 4))
        quat /= np.linalg.norm(quat, axis=-1, keepdims=True)
        quat *= 1.0 + 1e-4 * (trial % 3 == 0)  # float32 arithmetic leaves a part past ±1: clipped alike
        parents = [int(rng.integers(-1, node)) for node in range(nodes)]
        t = np.cumsum(rng.uniform(0, 0.1, frames))
        cases.append((t, np.arange(frames, dtype=np.int32), pos, quat, parents))
    model, data = world
    poses = MujocoPoses((model, data))
    for step in range(40):
        data.qvel[:] = rng.normal(0, 2, model.nv)
        mujoco.mj_step(model, data, 5)
        poses.capture(step, step * 0.01)
    episode = poses.finished()
    count = episode.frames
    cases.append(
        (
            episode._t[:count],
            episode._step[:count],
            episode._pos[:count],
            episode._quat[:count],
            episode.parents,
        )
    )
    for number, (t, step, pos, quat, parents) in enumerate(cases):
        numpy_made = replay_format._numbers(t, step, pos, quat, parents, compiled=False)
        assert replay_format._numbers(t, step, pos, quat, parents, compiled=True) == numpy_made, (
            f"case {number}"
        )
    assert any(parent >= 0 for parent in episode.parents) and count == 40
    with pytest.raises(ValueError, match="each node's parent is -1 or a node before it"):
        replay_format._columns.encode(*(np.zeros(0),) * 4, np.array([0], dtype=np.int64), 1.0, 1.0, 1.0)


def quaternion_error(read: Any, written: Any) -> float:
    """The largest part's difference of two quaternion arrays [..., 4], each pair compared up to its sign."""
    same = np.abs(read - written).max(axis=-1)
    flipped = np.abs(read + written).max(axis=-1)
    return float(np.minimum(same, flipped).max())


def test_a_chain_held_relative_to_its_parents_reads_back_in_the_world_within_a_millimetre() -> None:
    """An arm of five 0.3 m links, each turning about its own z (as a robot's joints do), is kept relative
    to the link before and read back as world poses: every link within a millimetre however deep, and the
    file a fraction of the same poses held in the world."""
    rng = np.random.default_rng(2)
    frames, links = 120, 5
    angles = np.cumsum(np.cumsum(rng.normal(0, 2e-4, (frames, links)), axis=0), axis=0)
    bend = np.array([np.cos(np.pi / 8), np.sin(np.pi / 8), 0.0, 0.0])  # each link's axis set off the last
    pos, quat = np.zeros((frames, links, 3)), np.zeros((frames, links, 4))
    for f in range(frames):
        at, turn = np.array([0.1, -0.2, 0.3]), np.array([1.0, 0.0, 0.0, 0.0])
        for link in range(links):
            spin = np.array([np.cos(angles[f, link] / 2), 0.0, 0.0, np.sin(angles[f, link] / 2)])
            turn = replay_format._multiply(replay_format._multiply(turn, bend), spin)
            pos[f, link], quat[f, link] = at, turn
            at = at + replay_format._rotate(turn, np.array([0.3, 0.0, 0.0]))

    def written(parents: list[int] | None) -> bytes:
        writer = replay_format.ReplayWriter([f"l{i}" for i in range(links)], engine="own", parents=parents)
        for f in range(frames):
            writer.frame(f / 50, f, pos[f], quat[f])
        return writer.to_bytes()

    chained = written([-1, 0, 1, 2, 3])
    replay = replay_format.read(chained)
    assert replay.parents == [-1, 0, 1, 2, 3]
    assert np.linalg.norm(replay.pos - pos, axis=-1).max() < 1e-3
    assert quaternion_error(replay.quat, quat) < 2e-3
    assert len(chained) < 0.6 * len(written(None))
    with pytest.raises(ValueError, match="parents: one a node, -1 or a node before it"):
        replay_format.ReplayWriter(["a", "b"], engine="own", parents=[1, -1])


def test_a_node_still_for_a_whole_episode_costs_next_to_nothing() -> None:
    def size(moving: int) -> int:
        writer = replay_format.ReplayWriter([f"n{i}" for i in range(20)], engine="own")
        rng = np.random.default_rng(1)
        pos, quat = rng.normal(size=(20, 3)), rng.normal(size=(20, 4))
        quat /= np.linalg.norm(quat, axis=-1, keepdims=True)
        for frame in range(300):
            pos[:moving] += rng.normal(0, 1e-3, (moving, 3))
            writer.frame(frame / 10, frame, pos, quat)
        return len(writer.to_bytes())

    assert size(0) < 5_000  # 20 nodes × 300 frames of float32 poses are 168 kB raw (times and steps: 3.6 kB)
    # A moving node costs less than half its raw float32 positions: a random walk of 1 mm steps is the worst
    # case for the straight-line guess, its residuals a few hundred counts.
    assert size(2) < size(0) + 2 * 300 * 3 * 4 / 2


def test_what_is_not_a_replay_is_refused_saying_so(tmp_path: Any) -> None:
    writer = replay_format.ReplayWriter(["a"], engine="own")
    writer.frame(0.0, 0, [[0, 0, 0]], [[1, 0, 0, 0]])
    whole = gzip.decompress(writer.to_bytes())
    for bad, said in [
        (b"not gzip", "not a gzip stream"),
        (gzip.compress(b"PK\x03\x04"), "not a .seqreplay"),
        (gzip.compress(whole[:-3]), "numbers after the header"),
    ]:
        with pytest.raises(replay_format.NotAReplay, match=said):
            replay_format.read(bad)
    with pytest.raises(ValueError, match="each node is named once; repeated: \\['a'\\]"):
        replay_format.ReplayWriter(["a", "b", "a"], engine="own")
    for pos, quat, said in [
        ([[0, 0, np.nan]], [[1, 0, 0, 0]], "pos: finite metres"),
        ([[2e4, 0, 0]], [[1, 0, 0, 0]], "pos: finite metres"),
        ([[0, 0, 0]], [[2, 0, 0, 0]], "quat: a unit quaternion"),
    ]:
        with pytest.raises(ValueError, match=said):
            writer.frame(0.1, 1, pos, quat)
    with pytest.raises(ValueError, match=r"looks\['a'\].rgba"):
        writer.frame(0.1, 1, [[0, 0, 0]], [[1, 0, 0, 0]], looks={"a": {"rgba": [2, 0, 0, 1]}})
    path = writer.write(tmp_path / "episode.seqreplay")
    assert replay_format.read(path).frames == 1 and not list(tmp_path.glob("*.partial"))


def test_a_body_fixed_to_the_world_is_a_recorded_node_of_its_own_with_its_welded_children() -> None:
    """A fixture (no joint, the world's child) may be placed anew each episode by its benchmark: its node is
    recorded; what is welded to it is drawn in it; the world's own geoms stay the world's."""
    model = mujoco.MjModel.from_xml_string(
        """<mujoco><worldbody><geom type="plane" size="1 1 .1"/>
        <body name="shelf" pos=".3 0 0"><geom type="box" size=".1 .1 .01"/>
          <body name="bracket" pos="0 0 .05"><geom type="box" size=".01 .01 .04"/></body></body>
        </worldbody></mujoco>"""
    )
    scene = export(model)
    assert scene.nodes == ["world", "shelf"] and scene.recorded_names == ["shelf"]
    document, binary = unpack(scene.glb)
    shelf = next(n for n in document["nodes"] if n["name"] == "shelf")
    assert shelf["extras"] == {"fixed": True}  # a fixture, marked for a viewer (which frames what moves)
    assert all("extras" not in n for n in document["nodes"] if n["name"] != "shelf")
    boxes = document["meshes"][shelf["mesh"]]["primitives"]
    assert len(boxes) == 2  # the shelf's and its bracket's, in the shelf's frame
    bracket = accessor_array(document, binary, boxes[1]["attributes"]["POSITION"])
    assert bracket[:, 2].min() == pytest.approx(0.01) and bracket[:, 2].max() == pytest.approx(0.09)


def test_the_scene_has_a_node_per_rigid_group_under_seq_root_turned_y_up(
    world: tuple[Any, Any],
) -> None:
    model, _ = world
    scene = export(model)
    document, binary = unpack(scene.glb)
    root = document["nodes"][0]
    assert root["name"] == "seq_root" and root["rotation"] == list(Z_UP_TO_Y_UP)
    names = [document["nodes"][i]["name"] for i in root["children"]]
    # The lid is welded to the crate and drawn in its node; the ghost draws nothing: neither is a node.
    assert names == ["world", "crate", "arm", "tip", "ball", "target"] == scene.nodes
    assert scene.recorded_names == ["crate", "arm", "tip", "ball", "target"]
    nodes = {n["name"]: n for n in document["nodes"][1:]}
    # Every node at the origin: a replay places each, so the scene is the same wherever they stood.
    assert all(n.get("translation", [0, 0, 0]) == [0, 0, 0] for n in nodes.values())
    crate = document["meshes"][nodes["crate"]["mesh"]]["primitives"]
    assert len(crate) == 2  # the box and the lid's cylinder; the group-3 copy is not drawn
    box = accessor_array(document, binary, crate[0]["attributes"]["POSITION"])
    assert box.min(axis=0) == pytest.approx([-0.06, -0.04, -0.03]) and box.max(axis=0) == pytest.approx(
        [0.06, 0.04, 0.03]
    )
    lid = accessor_array(document, binary, crate[1]["attributes"]["POSITION"])
    assert lid[:, 2].min() == pytest.approx(0.03) and lid[:, 2].max() == pytest.approx(0.05)
    colours = [document["materials"][p["material"]]["pbrMetallicRoughness"]["baseColorFactor"] for p in crate]
    assert colours == [
        [0.9, 0.1, 0.1, 1.0],
        [0.0, 0.5, 1.0, 1.0],
    ]  # the material's colour where the geom kept grey
    tip = document["meshes"][nodes["tip"]["mesh"]]["primitives"][0]
    assert len(accessor_array(document, binary, tip["indices"])) == 12  # the tetrahedron's 4 faces
    # A point at Z up lands at Y up under the root's rotation.
    x, y, z, w = Z_UP_TO_Y_UP
    assert _rotate((w, x, y, z), (0.0, 0.0, 1.0)) == pytest.approx((0.0, 1.0, 0.0))


def test_a_model_exports_to_the_same_bytes_and_is_exported_once(world: tuple[Any, Any]) -> None:
    model, _ = world
    again = mujoco.MjModel.from_xml_string(XML)
    assert export(model).glb == export(again).glb
    assert scene_of(model) is scene_of(model)


def test_the_state_is_found_in_what_simulators_hand_over(world: tuple[Any, Any]) -> None:
    model, data = world

    class Physics:  # dm_control's shape: wrappers with the struct under .ptr
        def __init__(self) -> None:
            self.model = type("M", (), {"ptr": model})()
            self.data = type("D", (), {"ptr": data})()

    for state in [(model, data), data, Physics()]:
        assert mujoco_pair(state) == (model, data)
    with pytest.raises(NotMujoco, match="answered dict"):
        mujoco_pair({"qpos": [0.0]})


def test_a_frame_drawn_from_scene_and_poses_covers_what_mujoco_draws(world: tuple[Any, Any]) -> None:
    model, _ = world
    data = mujoco.MjData(model)
    recorder = MujocoPoses((model, data))
    data.qpos[:] = model.qpos0
    data.qvel[:] = 0.0
    data.qvel[model.jnt_dofadr[model.body("arm").jntadr[0]]] = 3.0  # the arm swings
    data.mocap_pos[0] = (0.1, 0.1, 0.35)
    for step in range(40):
        mujoco.mj_step(model, data)
        recorder.capture(step, step * model.opt.timestep)
    height, width = 72, 96
    renderer = mujoco.Renderer(model, height, width)
    try:
        camera = free_camera((0.0, 0.0, 0.1), 0.8, 135, -35)
        truth, view = mujoco_mask(renderer, model, data, camera, recorder.scene.recorded_bodies)
    finally:
        renderer.close()
    writer = recorder.finished()
    replay = replay_format.read(writer.to_bytes())

    def frame(index: int) -> np.ndarray:
        poses = {n: (replay.pos[index, i], replay.quat[index, i]) for i, n in enumerate(replay.nodes)}
        return replay_mask(recorder.scene.glb, poses, view, height, width)

    assert truth.sum() > 150
    assert iou(truth, frame(replay.frames - 1)) > 0.95
    assert iou(truth, frame(0)) < 0.9  # the check tells frames apart: the first is elsewhere


def _rotate(quat: tuple[float, ...], vector: tuple[float, ...]) -> tuple[float, ...]:
    w, x, y, z = quat
    u = np.array([x, y, z])
    v = np.array(vector)
    out = v + 2 * np.cross(u, np.cross(u, v) + w * v)
    return tuple(float(c) for c in out)


def test_the_root_rotation_is_a_quarter_turn() -> None:
    assert math.isclose(np.linalg.norm(Z_UP_TO_Y_UP), 1.0)


def test_a_scene_is_exported_once_a_machine_and_kept_whole(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk cache: another process's model of the same XML (another object) reads the kept scene, byte
    for byte, without exporting; a torn entry is exported again; `off` keeps nothing."""
    from yardstick.replay3d import mujoco_scene, scene_cache

    monkeypatch.setenv(scene_cache.ENV, str(tmp_path))
    first = scene_of(mujoco.MjModel.from_xml_string(XML))
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".glb", ".json"]

    def no_export(model: Any) -> Any:
        raise AssertionError("exported where the cache holds the scene")

    with monkeypatch.context() as patched:
        patched.setattr(mujoco_scene, "export", no_export)
        again = scene_of(mujoco.MjModel.from_xml_string(XML))  # a fresh model object: not the memory cache
    assert again.glb == first.glb and again.sha256 == first.sha256 and again.nodes == first.nodes
    assert again.recorded_names == first.recorded_names and again.recorded_parents == first.recorded_parents
    assert list(again.recorded_bodies) == list(first.recorded_bodies)

    # Kept with its BLAKE3, checked when read; an entry kept by an install without it: by its sha256.
    said = next(tmp_path.glob("*.json"))
    kept = json.loads(said.read_text())
    assert len(kept["blake3"]) == 64 and kept["sha256"] == first.sha256
    said.write_text(json.dumps({k: v for k, v in kept.items() if k != "blake3"}))
    with monkeypatch.context() as patched:
        patched.setattr(mujoco_scene, "export", no_export)
        assert scene_of(mujoco.MjModel.from_xml_string(XML)).glb == first.glb

    glb = next(tmp_path.glob("*.glb"))
    glb.write_bytes(glb.read_bytes()[:100])  # torn: its hash no longer the one kept beside it
    assert scene_of(mujoco.MjModel.from_xml_string(XML)).glb == first.glb
    assert glb.read_bytes() == first.glb  # and kept whole again

    monkeypatch.setenv(scene_cache.ENV, "off")
    assert scene_cache.folder() is None
    assert scene_of(mujoco.MjModel.from_xml_string(XML)).sha256 == first.sha256


def test_a_model_changed_in_what_the_scene_draws_is_another_cache_key() -> None:
    """The disk cache's key reads the model's arrays: the same XML built twice is one key, a colour or a
    mesh's vertex changed is another (a stale scene is never read for a changed model); a node placed
    elsewhere (as a benchmark places a fixture each episode) is the same key, and the same scene."""
    from yardstick.replay3d.mujoco_scene import cache_key, export, rigid_roots

    key = cache_key(mujoco.MjModel.from_xml_string(XML))
    assert cache_key(mujoco.MjModel.from_xml_string(XML)) == key
    recoloured = XML.replace('rgba="0 .5 1 1"', 'rgba="0 .5 .9 1"')
    assert cache_key(mujoco.MjModel.from_xml_string(recoloured)) != key
    reshaped = XML.replace('0 0 .08"/>', '0 0 .09"/>')
    assert reshaped != XML
    assert cache_key(mujoco.MjModel.from_xml_string(reshaped)) != key
    model = mujoco.MjModel.from_xml_string(XML)
    scene = export(model)
    nodes = np.unique(rigid_roots(model))[1:]
    rng = np.random.default_rng(7)
    for _ in range(5):  # every node placed and turned elsewhere, a site moved: the same key and bytes
        model.body_pos[nodes] = rng.uniform(-1, 1, (len(nodes), 3))
        turns = rng.normal(size=(len(nodes), 4))
        model.body_quat[nodes] = turns / np.linalg.norm(turns, axis=1, keepdims=True)
        model.site_pos[:] = rng.uniform(-1, 1, model.site_pos.shape)
        assert cache_key(model) == key and export(model).sha256 == scene.sha256
    lid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "lid")
    assert lid not in nodes
    model.body_pos[lid] += 0.01  # drawn in its parent's node, 1 cm further: another scene
    assert cache_key(model) != key and export(model).sha256 != scene.sha256


def test_a_run_folder_links_the_kept_scene_and_copies_it_where_it_cannot(tmp_path: Any) -> None:
    from yardstick.engine.replay_track import write_scene

    kept = tmp_path / "cache" / "scene.glb"
    kept.parent.mkdir()
    kept.write_bytes(b"glTF scene bytes")
    linked = write_scene(tmp_path / "run", "a" * 64, b"glTF scene bytes", kept)
    assert linked.read_bytes() == b"glTF scene bytes"
    assert linked.stat().st_ino == kept.stat().st_ino  # one file on disk, not a second copy
    copied = write_scene(tmp_path / "other", "b" * 64, b"glTF scene bytes", tmp_path / "cache" / "gone.glb")
    assert copied.read_bytes() == b"glTF scene bytes"
    assert copied.stat().st_ino != kept.stat().st_ino


def test_frames_handed_together_are_checked_together_and_a_bad_one_keeps_none() -> None:
    writer = replay_format.ReplayWriter(["a", "b"], engine="mujoco")
    frames = 5
    pos = np.zeros((frames, 2, 3))
    quat = np.tile([1.0, 0.0, 0.0, 0.0], (frames, 2, 1))
    t = np.arange(frames) * 0.1
    step = np.arange(frames, dtype=np.int32)
    bad = pos.copy()
    bad[3, 1, 2] = np.nan  # a simulation that diverged at frame 3
    with pytest.raises(ValueError, match=r"pos: finite metres .*\(frame 3\)"):
        writer.extend(t, step, bad, quat)
    with pytest.raises(ValueError, match=r"looks\['a'\].rgba"):
        writer.extend(t, step, pos, quat, [(1, "a", {"rgba": [1.0, 0.0]})])
    assert writer.frames == 0 and writer.looks == []
    writer.extend(t, step, pos, quat, [(2, "b", {"visible": False})])
    writer.extend(t + 0.5, step + frames, pos, quat)
    replay = replay_format.read(writer.to_bytes())
    assert replay.frames == 2 * frames and list(replay.step) == list(range(2 * frames))
    assert replay.looks == [(2, "b", {"visible": False})]


def _poses_in_a_forked_child(results: Any) -> None:
    model = mujoco.MjModel.from_xml_string(XML)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    poses = MujocoPoses((model, data))
    poses.capture(0, 0.0)
    results.put(poses.finished().nodes)


def test_a_process_forked_after_its_parent_found_scenes_finds_its_own() -> None:
    """A pool worker forked from a parent whose scene thread ran has no such thread: it starts its own (a
    scene asked of the parent's would never come); forked while that thread held the scenes' locks (mid-
    export), it does not wait on them."""
    import multiprocessing

    from yardstick.replay3d import mujoco_poses, mujoco_scene

    model = mujoco.MjModel.from_xml_string(XML)
    parent = MujocoPoses((model, mujoco.MjData(model)))
    assert parent.scene.recorded_names  # the parent's scene thread has run
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_poses_in_a_forked_child, args=(results,))
    with mujoco_scene._cache_lock, mujoco_poses.SCENES._lock:  # as the scene thread holds them mid-export
        child.start()
    try:
        assert results.get(timeout=120) == parent.scene.recorded_names
    finally:
        child.join(timeout=60)
        if child.is_alive():
            child.kill()


def test_an_episode_longer_than_the_room_kept_keeps_every_frame(world: tuple[Any, Any]) -> None:
    model, _ = world
    data = mujoco.MjData(model)
    poses = MujocoPoses((model, data), capacity=2)
    for step in range(9):
        data.mocap_pos[0] = (0.0, 0.0, 0.3 + 0.01 * step)
        mujoco.mj_forward(model, data)
        poses.capture(step, step * 0.1)
    replay = replay_format.read(poses.finished().to_bytes())
    target = replay.nodes.index("target")
    assert list(replay.step) == list(range(9))
    assert np.allclose(replay.pos[:, target, 2], 0.3 + 0.01 * np.arange(9), atol=1e-3)


def test_the_compiled_frames_keep_what_numpys_keep(
    world: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A frame is kept by _columns.Frames where the install built it, by numpy where not, every body or (the
    scene known) the recorded ones alone: the same frames each way, across the doublings of recorders that
    started with room for two, and the same file."""
    assert mujoco_poses._columns is not None, "the install built no replay3d._columns: no C compiler?"
    model, data = world
    # The scene found first: the recorders below know it.
    assert mujoco_poses.MujocoPoses((model, data)).scene.recorded_bodies.size
    rng = np.random.default_rng(5)
    everything = np.arange(model.nbody, dtype=np.int64)
    compiled = MujocoPoses((model, data), capacity=2)
    ways = [compiled]
    with monkeypatch.context() as patched:
        patched.setattr(mujoco_poses, "_columns", None)
        ways.append(MujocoPoses((model, data), capacity=2))
        patched.setattr(mujoco_poses, "known_scene", lambda model: None)  # a model's first episode
        ways.append(MujocoPoses((model, data), capacity=2))
    with monkeypatch.context() as patched:
        patched.setattr(mujoco_poses, "known_scene", lambda model: None)
        ways.append(MujocoPoses((model, data), capacity=2))
    assert [way._picked_as_kept for way in ways] == [True, True, False, False]
    for step in range(23):
        data.qvel[:] = rng.normal(0, 2, model.nv)
        mujoco.mj_step(model, data, 3)
        for way in ways:
            way.take(step, step * 0.01)
    kept = [way.finished() for way in ways]
    assert all(writer.frames == 23 for writer in kept)
    assert len(kept[0].nodes) < model.nbody  # the world's still parts are not recorded
    for name in ("_t", "_step", "_pos", "_quat"):
        assert all(np.array_equal(getattr(kept[0], name), getattr(other, name)) for other in kept[1:]), name
    assert len({writer.to_bytes() for writer in kept}) == 1
    frames = mujoco_poses._columns.Frames(data.xpos, data.xquat, everything)
    with pytest.raises(ValueError, match="xquat"):
        mujoco_poses._columns.Frames(data.xpos, data.xpos, everything)
    with pytest.raises(ValueError, match=f"each row within 0..{model.nbody - 1}"):
        mujoco_poses._columns.Frames(data.xpos, data.xquat, everything + 1)
    with pytest.raises(ValueError, match="each row within"):
        frames.picked(np.array([model.nbody], dtype=np.int64))
    with pytest.raises(TypeError, match="take"):
        frames.take(0)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="rows: int64"):
        mujoco_poses._columns.Frames(data.xpos, data.xquat, everything.astype(np.int32))
    with pytest.raises(ValueError, match="xpos: float64"):
        mujoco_poses._columns.Frames(data.xpos.astype(np.float32), data.xquat, everything)
    with pytest.raises(MemoryError):  # sizes past memory's are refused, never wrapped
        mujoco_poses._columns.Frames(data.xpos, data.xquat, everything, 1 << 62)
    unmade = mujoco_poses._columns.Frames.__new__(mujoco_poses._columns.Frames)
    with pytest.raises(TypeError, match="never made"):
        unmade.take(0, 0.0)
    with pytest.raises(TypeError, match="never made"):
        unmade.picked(None)


def test_a_models_later_episode_takes_its_known_scene_and_writes_the_same_file() -> None:
    """The first episode of a model finds its scene on the scene thread; a later one takes the scene this
    process has already. Both give the same file for the same motion, holding the scene's recorded nodes only
    (not a body a joint moves that draws nothing)."""
    model = mujoco.MjModel.from_xml_string(XML)  # a model this process has no scene of yet

    def episode() -> tuple[MujocoPoses, bytes]:
        data = mujoco.MjData(model)
        poses = MujocoPoses((model, data))
        for step in range(6):
            data.qpos[:3] = (0.2 + 0.01 * step, 0.1, 0.1)
            data.mocap_pos[0] = (0.0, 0.0, 0.3 + 0.02 * step)
            mujoco.mj_forward(model, data)
            poses.capture(step, step * 0.05)
        return poses, poses.finished().to_bytes()

    first, first_file = episode()
    later, later_file = episode()
    # The thread asked the first time only.
    assert isinstance(first._scene, Future) and not isinstance(later._scene, Future)
    assert later.scene is first.scene
    # The ghost draws nothing: a body a joint moves that the scene has no node for.
    assert model.body("ghost").id not in set(first.scene.recorded_bodies.tolist())
    assert "ghost" not in replay_format.read(first_file).nodes
    assert later_file == first_file
    assert replay_format.read(later_file).nodes == first.scene.recorded_names


def test_a_model_changed_after_its_scene_was_found_is_said_in_the_recording_error(tmp_path: Any) -> None:
    """A scene is found once a model object: a later episode that moved a world geom (as dm_control's reacher
    moves its target) or recoloured one is told in its recording error, its replay kept; a fixture placed
    anew, or nothing changed, says nothing."""
    from yardstick.engine.recording import EpisodeRecorder, Recording

    xml = XML.replace(
        '<geom name="floor"', '<geom name="goal" type="sphere" size=".02" pos=".3 .3 .01"/><geom name="floor"'
    ).replace(
        "</worldbody>",
        '<body name="shelf" pos=".4 0 0"><geom type="box" size=".1 .1 .01"/></body></worldbody>',
    )
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    recording = Recording(replay=True, folder=str(tmp_path))
    goal = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "goal")
    shelf = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "shelf")

    def episode(index: int) -> str | None:
        mujoco.mj_forward(model, data)
        recorder = EpisodeRecorder.open(recording, index, 10.0, state=lambda: (model, data))
        recorder.frame(0, 0.0, None)
        recorder.frame(1, 0.1, None)
        assert any(p.name == "replay.seqreplay" for p in recorder.close())  # kept, whatever it says
        return recorder.error

    assert episode(0) is None
    model.body_pos[shelf] += 0.1  # a fixture placed anew: recorded, nothing to say
    assert episode(1) is None
    placed = model.geom_pos[goal].copy()
    model.geom_pos[goal] += 0.1  # the world's own geom moved: the scene still has it where it was
    said = episode(2)
    assert said is not None and "geom_pos changed since its scene was exported" in said
    model.geom_pos[goal] = placed
    model.geom_rgba[goal] = (1.0, 0.0, 0.0, 1.0)
    said = episode(3)
    assert said is not None and "geom_rgba" in said and "geom_pos" not in said

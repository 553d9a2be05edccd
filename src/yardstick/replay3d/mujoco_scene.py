"""A MuJoCo model's scene as a replay draws it: a glTF binary of its visible geoms, one node per body.

What is drawn is what MuJoCo's own renderer draws by default, geoms of groups 0-2 that are not fully
transparent, less collision copies where a body has visual geoms (`drawn_geoms`). Each body is a node
named as the body (the world body is `world`; an unnamed body `body<id>`), its geoms baked into its mesh at
their place in the body's frame, so a body's world pose is all a frame needs. Bodies welded to another body
than the world (no joint of their own) are drawn in the node of the body they move with, and bodies that
draw nothing have no node. Primitives are tessellated
(`shapes`), meshes exported with MuJoCo's own normals and texture coordinates. A geom's colour is its rgba,
or its material's when the geom kept the default grey (MuJoCo's rule); a 2D texture on a mesh with
texture coordinates ships as a PNG, and any other texture (a box's, a cube map) tints its geom with the
texture's mean colour: close at a glance, and it costs no texture-coordinate generation here. Textures are
shrunk to `TEXTURE_SIDE` pixels at most.

Height fields and SDF geoms are left out (none of the benchmarks shipped has one); an infinite plane is
drawn `PLANE_EXTENT` metres each way.

A replay records a node's pose every frame (`recorded_names`, read from `recorded_bodies`) when a joint or a
mocap body moves it, and also when it is fixed to the world body itself: a benchmark may place such a
fixture anew each episode (Meta-World places its door, drawer, box and window by the body's position, a
different one each seed), and a fixed node's columns cost a replay almost nothing (a still number is a run of
zeros). Only the world body's own geoms are drawn where the export put them. The scene's nodes carry no pose
of their own (each at the origin: a replay places them all), so its bytes, and so its sha256, are the same
whatever episode the model was exported in; a fixture's node is marked `fixed` (gltf), for a viewer to frame
what moves. The export is cached per model object, and so read once a model: what a benchmark changes of a
model after its first episode but the placement of its nodes (a world geom's `geom_pos`, as dm_control's
reacher moves its target; a colour; a welded child's `body_pos`) is not drawn: the scene keeps what it drew
(`Drawn`), and each episode's replay compares at its end and names what changed in the episode's recording
error (mujoco_poses), the replay kept. The disk cache's key holds
every array the export could read, physics too: a benchmark that randomises a model's dynamics each episode
exports it again each episode.
"""

from __future__ import annotations

import hashlib
import io
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from yardstick.replay3d import scene_cache, shapes
from yardstick.replay3d.gltf import Material, Node, Primitive, glb

VISIBLE_GROUPS = 3  # MuJoCo's default: geom groups 0, 1, 2 are drawn
PLANE_EXTENT = 10.0
TEXTURE_SIDE = 512  # a texture's longest side in the scene, in pixels
_DEFAULT_RGBA = (0.5, 0.5, 0.5, 1.0)
_PLANE, _SPHERE, _CAPSULE, _ELLIPSOID, _CYLINDER, _BOX, _MESH = 0, 2, 3, 4, 5, 6, 7
_TEXTURE_2D, _ROLE_RGB = 0, 1
_CACHE_SIZE = 64  # MT50 builds 50 models in a process


@dataclass(frozen=True)
class Scene:
    """A model's exported scene: the .glb, its sha256, its nodes' names, and the nodes a replay records (all
    but the world's) with the body whose world pose each takes."""

    glb: bytes
    sha256: str
    nodes: list[str]
    recorded_names: list[str]
    recorded_bodies: npt.NDArray[np.intp]
    # Each recorded node's nearest recorded ancestor (an index into recorded_names), or -1: a replay keeps a
    # pose relative to its parent's, which is what makes a robot's chain of links small (see format).
    recorded_parents: list[int]
    # The disk cache's file of these bytes, when there is one: a run folder links it rather than copy it.
    kept: Path | None = None
    # What the scene drew of its model object when it was found, to tell a later episode that changed it.
    drawn: Drawn | None = field(default=None, compare=False)

    def changed(self, model: Any) -> list[str]:
        """The fields of `model` (the object this scene was found for) that changed what the scene draws
        since it was found; [] when none did (or nothing was kept to compare)."""
        return [] if self.drawn is None else self.drawn.changed(model)


@dataclass(frozen=True)
class Drawn:
    """A model's fields that a scene bakes in, as they were: its drawable geoms' (groups 0-2) places, sizes
    and colours, the materials' colours, and the placement of bodies drawn in another body's node. A
    benchmark changing one of them each episode (dm_control's reacher moves its target, a world geom, by
    geom_pos) changes what the scene should draw, which one export a model object cannot follow."""

    geoms: npt.NDArray[np.intp]
    welded: npt.NDArray[np.intp]
    values: tuple[npt.NDArray[Any], ...]

    FIELDS = (
        "geom_pos",
        "geom_quat",
        "geom_size",
        "geom_rgba",
        "geom_matid",
        "mat_rgba",
        "body_pos",
        "body_quat",
    )

    @classmethod
    def of(cls, model: Any) -> Drawn:
        geoms = np.flatnonzero(model.geom_group < VISIBLE_GROUPS)
        roots = rigid_roots(model)
        welded = np.flatnonzero(roots != np.arange(model.nbody))
        return cls(geoms, welded, _drawn_values(model, geoms, welded))

    def changed(self, model: Any) -> list[str]:
        now = _drawn_values(model, self.geoms, self.welded)
        return [
            name for name, a, b in zip(self.FIELDS, self.values, now, strict=True) if not np.array_equal(a, b)
        ]


def _drawn_values(model: Any, geoms: npt.NDArray[np.intp], welded: npt.NDArray[np.intp]) -> tuple[Any, ...]:
    return (
        model.geom_pos[geoms],
        model.geom_quat[geoms],
        model.geom_size[geoms],
        model.geom_rgba[geoms],
        model.geom_matid[geoms],
        model.mat_rgba.copy(),
        model.body_pos[welded],
        model.body_quat[welded],
    )


# Keyed by the model object's id, which stays that model's while the entry holds the model itself. Held
# while a scene is found: the recorders' scene thread (mujoco_poses) and a caller here may ask at once.
_cache: OrderedDict[int, tuple[Any, Scene]] = OrderedDict()
_cache_lock = threading.Lock()


def _forget_cache() -> None:
    """A forked child's start: the lock anew (the scene thread may have held it at the fork) and no entry
    (one may have been half made)."""
    global _cache, _cache_lock
    _cache, _cache_lock = OrderedDict(), threading.Lock()


os.register_at_fork(after_in_child=_forget_cache)


def scene_of(model: Any) -> Scene:
    """The scene of `model` (a mujoco.MjModel), exported on first use and cached for the model's life, and
    on disk across processes (scene_cache)."""
    key = id(model)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] is model:
            _cache.move_to_end(key)
            return hit[1]
        exported = replace(_kept_or_exported(model), drawn=Drawn.of(model))
        _cache[key] = (model, exported)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
        return exported


def known_scene(model: Any) -> Scene | None:
    """The scene of `model` when this process has it already, else None; never waits (the scene thread may
    hold the lock while it exports another model: None then too)."""
    if not _cache_lock.acquire(blocking=False):
        return None
    try:
        hit = _cache.get(id(model))
        return hit[1] if hit is not None and hit[0] is model else None
    finally:
        _cache_lock.release()


def cache_key(model: Any) -> str:
    """The disk cache's key of `model`'s scene: what the export draws of it, not where its nodes stand."""
    return scene_cache.model_key(model, placed=np.unique(rigid_roots(model)))


def _kept_or_exported(model: Any) -> Scene:
    """The model's scene from the disk cache, else exported (and kept there)."""
    key = cache_key(model)
    kept = scene_cache.load(key)
    if kept is not None:
        glb_bytes, said = kept
        try:
            return Scene(
                glb=glb_bytes,
                sha256=str(said["sha256"]),
                nodes=[str(n) for n in said["nodes"]],
                recorded_names=[str(n) for n in said["recorded_names"]],
                recorded_bodies=np.asarray(said["recorded_bodies"], dtype=np.intp),
                recorded_parents=[int(p) for p in said["recorded_parents"]],
                kept=scene_cache.glb_path(key),
            )
        except (KeyError, TypeError, ValueError):
            pass  # an entry of another shape: exported again below, and overwritten
    exported = export(model)
    said = {
        "sha256": exported.sha256,
        "nodes": exported.nodes,
        "recorded_names": exported.recorded_names,
        "recorded_bodies": exported.recorded_bodies.tolist(),
        "recorded_parents": exported.recorded_parents,
    }
    return replace(exported, kept=scene_cache.store(key, exported.glb, said))


def export(model: Any) -> Scene:
    import mujoco

    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)  # every body's world pose at the model's reference configuration
    names = body_names(model)
    roots = rigid_roots(model)
    materials: list[Material] = []
    known: dict[tuple[Any, ...], int] = {}
    primitives: dict[int, list[Primitive]] = {}
    for geom in drawn_geoms(model):
        made = _geom_mesh(model, geom)
        if made is None:
            continue
        positions, normals, indices, uv, png = made
        # Into the frame of the body its rigid group moves with. The geom's pose in that frame, from the
        # world poses of both, is rounded (to 1e-12) so that where the node stood leaves no trace in the
        # bytes: a zero comes out as 1e-17 for one placement and -3e-17 for another (and + 0.0 makes a
        # rounded -0.0 the 0.0 it is).
        root = int(roots[model.geom_bodyid[geom]])
        to_root = data.xmat[root].reshape(3, 3)
        turn = np.round(to_root.T @ data.geom_xmat[geom].reshape(3, 3), 12) + 0.0
        shift = np.round((data.geom_xpos[geom] - data.xpos[root]) @ to_root, 12) + 0.0
        positions = positions @ turn.T + shift
        normals = normals @ turn.T
        primitives.setdefault(root, []).append(
            Primitive(
                positions=positions.astype(np.float32),
                normals=normals.astype(np.float32),
                uv=uv,
                indices=indices,
                material=_material(model, geom, png, materials, known),
            )
        )
    drawn = sorted(set(primitives) | {0})
    # At the origin, every one: the replay places each (the world's own is there already).
    moves = moved(model)
    nodes = [
        Node(name=names[b], primitives=primitives.get(b, []), fixed=b != 0 and not moves[b]) for b in drawn
    ]
    binary = glb(nodes, materials)
    recorded = np.asarray([b for b in drawn if b != 0], dtype=np.intp)
    return Scene(
        glb=binary,
        sha256=hashlib.sha256(binary).hexdigest(),
        nodes=[names[b] for b in drawn],
        recorded_names=[names[b] for b in recorded],
        recorded_bodies=recorded,
        recorded_parents=recorded_parents(model, recorded),
    )


def recorded_parents(model: Any, recorded: npt.NDArray[np.intp]) -> list[int]:
    """For each recorded body, the index in `recorded` of its nearest recorded ancestor, or -1 (the
    world's)."""
    index = {int(body): at for at, body in enumerate(recorded)}
    parents = []
    for body in recorded:
        above = int(model.body_parentid[body])
        while above != 0 and above not in index:
            above = int(model.body_parentid[above])
        parents.append(index.get(above, -1))
    return parents


def body_names(model: Any) -> list[str]:
    """Each body's node name: its own, `world` for body 0, `body<id>` when it has none; unique."""
    import mujoco

    names: list[str] = []
    taken: set[str] = set()
    for body in range(model.nbody):
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, body) or ("world" if body == 0 else "")
        name = name or f"body{body}"
        unique, counter = name, 2
        while unique in taken:
            unique, counter = f"{name}-{counter}", counter + 1
        taken.add(unique)
        names.append(unique)
    return names


def drawn_geoms(model: Any) -> list[int]:
    """The geoms a scene draws: those of groups 0-2 that are not fully transparent, less the collision
    copies of a body that has visual geoms of its own. robosuite (LIBERO) keeps its collision meshes in group
    0, where MuJoCo draws them over the visual ones unless a renderer hides the group; a visual geom collides
    with nothing (contype and conaffinity 0), so a body holding one is drawn from those alone."""
    shown = [
        g for g in range(model.ngeom) if model.geom_group[g] < VISIBLE_GROUPS and model.geom_rgba[g][3] > 0.0
    ]
    collides = (model.geom_contype != 0) | (model.geom_conaffinity != 0)
    has_visual = {int(model.geom_bodyid[g]) for g in shown if not collides[g]}
    return [g for g in shown if not (collides[g] and int(model.geom_bodyid[g]) in has_visual)]


def moved(model: Any) -> npt.NDArray[np.bool_]:
    """Each body that a joint or a mocap moves (a body that is not is welded to its parent)."""
    return np.asarray((model.body_jntnum > 0) | (model.body_mocapid >= 0))


def rigid_roots(model: Any) -> npt.NDArray[np.intp]:
    """For each body, the body whose node draws it: itself when a joint or mocap moves it, when it is fixed to
    the world body itself (a fixture its benchmark may place anew each episode), or when it is the world;
    else its parent's. A scene has a node per such body that draws something, not per body: a welded child
    (a camera mount, a finger pad) adds no pose to record. (A body's parent comes before it.)"""
    moves = moved(model).tolist()
    parents = model.body_parentid.tolist()
    roots = [0] * model.nbody  # plain lists: one body at a time, where numpy's indexing costs microseconds
    for body in range(1, model.nbody):
        roots[body] = body if moves[body] or parents[body] == 0 else roots[parents[body]]
    return np.asarray(roots, dtype=np.intp)


def _geom_mesh(
    model: Any, geom: int
) -> (
    tuple[
        npt.NDArray[np.float32],
        npt.NDArray[np.float32],
        npt.NDArray[np.uint32] | None,
        npt.NDArray[np.float32] | None,
        bytes | None,
    ]
    | None
):
    """(positions, normals, indices, uv, png) of geom `geom` in its own frame; None for what is not drawn."""
    kind = int(model.geom_type[geom])
    size = [float(s) for s in model.geom_size[geom]]
    made: shapes.Mesh
    if kind == _MESH:
        return _mesh(model, geom)
    if kind == _PLANE:
        made = shapes.plane(size[0] or PLANE_EXTENT, size[1] or PLANE_EXTENT)
    elif kind == _SPHERE:
        made = shapes.sphere(size[0])
    elif kind == _CAPSULE:
        made = shapes.capsule(size[0], size[1])
    elif kind == _ELLIPSOID:
        made = shapes.ellipsoid(*size)
    elif kind == _CYLINDER:
        made = shapes.cylinder(size[0], size[1])
    elif kind == _BOX:
        made = shapes.box(*size)
    else:
        return None
    return made[0], made[1], made[2], None, None


def _mesh(
    model: Any, geom: int
) -> tuple[
    npt.NDArray[np.float32],
    npt.NDArray[np.float32],
    npt.NDArray[np.uint32],
    npt.NDArray[np.float32] | None,
    bytes | None,
]:
    """A mesh geom, a vertex per distinct (position, normal, uv) of its faces' corners, as MuJoCo draws it."""
    mesh = int(model.geom_dataid[geom])
    vertadr, faceadr, facenum = model.mesh_vertadr[mesh], model.mesh_faceadr[mesh], model.mesh_facenum[mesh]
    faces = model.mesh_face[faceadr : faceadr + facenum]
    corners = [model.mesh_vert[vertadr + faces].reshape(-1, 3)]
    normaladr = model.mesh_normaladr[mesh]
    corners.append(
        model.mesh_normal[normaladr + model.mesh_facenormal[faceadr : faceadr + facenum]].reshape(-1, 3)
    )
    texcoordadr = model.mesh_texcoordadr[mesh]
    texture = _texture(model, geom, encode=texcoordadr >= 0)
    textured = texture is not None and texture[1] is not None and texcoordadr >= 0
    if textured:
        uv = model.mesh_texcoord[texcoordadr + model.mesh_facetexcoord[faceadr : faceadr + facenum]].reshape(
            -1, 2
        )
        corners.append(uv)
    rows = np.concatenate(corners, axis=1).astype(np.float32)
    unique, inverse = np.unique(rows, axis=0, return_inverse=True)
    positions, normals = unique[:, :3], unique[:, 3:6]
    uv_out = unique[:, 6:8].copy() if textured else None
    png = texture[1] if textured and texture is not None else None
    return positions, normals, inverse.ravel().astype(np.uint32), uv_out, png


def _texture(model: Any, geom: int, *, encode: bool) -> tuple[npt.NDArray[np.float64], bytes | None] | None:
    """The geom's material's colour texture: (its mean rgb in [0, 1], a PNG when `encode` and it is a 2D
    texture)."""
    material = int(model.geom_matid[geom])
    if material < 0 or model.ntex == 0:
        return None
    texture = int(model.mat_texid[material][_ROLE_RGB])
    if texture < 0:
        return None
    pixels = _pixels(model, texture)
    mean = pixels.reshape(-1, pixels.shape[-1])[:, :3].mean(axis=0) / 255.0
    if not encode or int(model.tex_type[texture]) != _TEXTURE_2D:
        return mean, None
    from PIL import Image

    image = Image.fromarray(pixels)
    if max(image.size) > TEXTURE_SIDE:
        # A floor's 4k texture is megabytes of PNG for what a browser draws at a few hundred pixels.
        scale = TEXTURE_SIDE / max(image.size)
        image = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))))
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=False)
    return mean, out.getvalue()


def _pixels(model: Any, texture: int) -> npt.NDArray[np.uint8]:
    height, width, channels = (
        int(model.tex_height[texture]),
        int(model.tex_width[texture]),
        int(model.tex_nchannel[texture]),
    )
    start = int(model.tex_adr[texture])
    pixels = np.asarray(model.tex_data[start : start + height * width * channels], dtype=np.uint8)
    image = pixels.reshape(height, width, channels)
    return image if channels in (3, 4) else np.repeat(image[..., :1], 3, axis=2)


def _material(
    model: Any, geom: int, png: bytes | None, materials: list[Material], known: dict[tuple[Any, ...], int]
) -> int:
    """The index of the geom's material, shared with every geom that looks the same."""
    rgba = np.asarray(model.geom_rgba[geom], dtype=np.float64)
    matid = int(model.geom_matid[geom])
    roughness = 0.7
    if matid >= 0:
        if tuple(float(v) for v in rgba) == _DEFAULT_RGBA:
            rgba = np.asarray(model.mat_rgba[matid], dtype=np.float64)
        roughness = float(np.clip(1.0 - model.mat_shininess[matid], 0.05, 1.0))
        if png is None:
            texture = _texture(model, geom, encode=False)
            if texture is not None:
                rgba = np.concatenate([rgba[:3] * texture[0], rgba[3:]])
    colour = tuple(round(float(v), 6) for v in rgba)
    key = (colour, roughness, png)
    found = known.get(key)
    if found is None:
        found = known[key] = len(materials)
        materials.append(Material(name=f"material{found}", rgba=colour, roughness=roughness, png=png))  # type: ignore[arg-type]
    return found


def rotation_matrix(quat: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The rotation matrix of a unit quaternion w x y z."""
    w, x, y, z = (float(v) for v in np.asarray(quat))
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )

"""A glTF 2.0 binary (.glb) of a replay's scene, built from plain arrays: engine-neutral.

The scene is what the Sequences contract says a replay is drawn in: one root node `seq_root` whose rotation
turns the simulator's Z-up world into glTF's Y-up, and under it, flat, one node per scene node (a body),
named as the replay names it, placed at the pose (Z up) its maker gives it (a MuJoCo scene leaves every node
at the origin, for the replay to place). A replay moves those nodes by setting their translation and
rotation: their parent is `seq_root`, so a world pose is a local one. A node marked `fixed` (glTF's
`extras: {"fixed": true}`) is a fixture: fixed to the world, though a replay may place it anew each episode;
a viewer frames and follows the others.

The bytes are a function of the arrays alone (no dates, no generator version): the same model gives the same
file, hence the same sha256, in any process, which is how a scene is kept once across episodes and evals.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = "seq_root"
# -90° about X, as glTF's x y z w: (x, y, z) Z-up lands at (x, z, -y) Y-up.
Z_UP_TO_Y_UP = (-math.sqrt(0.5), 0.0, 0.0, math.sqrt(0.5))

_FLOAT, _UINT = 5126, 5125
_ARRAY_BUFFER, _ELEMENT_ARRAY_BUFFER = 34962, 34963
_TRIANGLES = 4
_REPEAT = 10497


@dataclass(frozen=True)
class Material:
    """A colour (linear rgba in [0, 1]) and, optionally, a texture (PNG bytes) the colour multiplies."""

    name: str
    rgba: tuple[float, float, float, float]
    roughness: float = 0.7
    png: bytes | None = None


@dataclass
class Primitive:
    """Triangles: positions [V, 3] in the node's frame, optional normals [V, 3] and texture coordinates
    [V, 2] (glTF's: v down), optional indices [3K] (without: every three positions a triangle)."""

    positions: npt.NDArray[np.float32]
    material: int
    normals: npt.NDArray[np.float32] | None = None
    uv: npt.NDArray[np.float32] | None = None
    indices: npt.NDArray[np.uint32] | None = None


@dataclass
class Node:
    """A scene node: its name, its world pose (Z up; quaternion w x y z) and what it draws."""

    name: str
    translation: Sequence[float] = (0.0, 0.0, 0.0)
    rotation: Sequence[float] = (1.0, 0.0, 0.0, 0.0)
    primitives: list[Primitive] = field(default_factory=list)
    fixed: bool = False  # a fixture: nothing moves it during an episode


class _Buffer:
    """The binary chunk as it fills, and the views and accessors over it."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.views: list[dict[str, Any]] = []
        self.accessors: list[dict[str, Any]] = []

    def view(self, payload: bytes, target: int | None = None) -> int:
        self.data.extend(b"\0" * (-len(self.data) % 4))  # every view starts 4-aligned
        entry: dict[str, Any] = {"buffer": 0, "byteOffset": len(self.data), "byteLength": len(payload)}
        if target is not None:
            entry["target"] = target
        self.data.extend(payload)
        self.views.append(entry)
        return len(self.views) - 1

    def accessor(self, array: npt.NDArray[Any], kind: str, *, bounds: bool = False) -> int:
        floats = array.dtype.kind == "f"
        packed = np.ascontiguousarray(array, dtype="<f4" if floats else "<u4")
        target = _ARRAY_BUFFER if kind != "SCALAR" else _ELEMENT_ARRAY_BUFFER
        entry: dict[str, Any] = {
            "bufferView": self.view(packed.tobytes(), target),
            "componentType": _FLOAT if floats else _UINT,
            "count": len(packed),
            "type": kind,
        }
        if bounds:  # glTF requires them on POSITION
            entry["min"] = [float(v) for v in packed.min(axis=0)]
            entry["max"] = [float(v) for v in packed.max(axis=0)]
        self.accessors.append(entry)
        return len(self.accessors) - 1


def glb(nodes: Sequence[Node], materials: Sequence[Material], *, generator: str = "yardstick") -> bytes:
    """The scene as a glTF binary: `seq_root` and, under it, `nodes` in order."""
    buffer = _Buffer()
    images: list[dict[str, Any]] = []
    textures: list[dict[str, Any]] = []
    gltf_materials: list[dict[str, Any]] = []
    for material in materials:
        pbr: dict[str, Any] = {
            "baseColorFactor": [round(float(c), 6) for c in material.rgba],
            "metallicFactor": 0.0,
            "roughnessFactor": round(float(material.roughness), 6),
        }
        if material.png is not None:
            images.append({"bufferView": buffer.view(material.png), "mimeType": "image/png"})
            textures.append({"source": len(images) - 1, "sampler": 0})
            pbr["baseColorTexture"] = {"index": len(textures) - 1}
        entry: dict[str, Any] = {"name": material.name, "pbrMetallicRoughness": pbr, "doubleSided": True}
        if material.rgba[3] < 1.0:
            entry["alphaMode"] = "BLEND"
        gltf_materials.append(entry)

    gltf_nodes: list[dict[str, Any]] = [
        {"name": ROOT, "rotation": list(Z_UP_TO_Y_UP), "children": list(range(1, len(nodes) + 1))}
    ]
    meshes: list[dict[str, Any]] = []
    for node in nodes:
        w, x, y, z = (float(v) for v in node.rotation)
        entry = {
            "name": node.name,
            "translation": [float(v) for v in node.translation],
            "rotation": [x, y, z, w],
        }
        if node.fixed:
            entry["extras"] = {"fixed": True}
        if node.primitives:
            entry["mesh"] = len(meshes)
            meshes.append({"name": node.name, "primitives": [_primitive(p, buffer) for p in node.primitives]})
        gltf_nodes.append(entry)

    document: dict[str, Any] = {
        "asset": {"version": "2.0", "generator": generator},
        "scene": 0,
        "scenes": [{"nodes": [0]}],
        "nodes": gltf_nodes,
        "meshes": meshes,
        "materials": gltf_materials,
        "accessors": buffer.accessors,
        "bufferViews": buffer.views,
        "buffers": [{"byteLength": len(buffer.data)}],
    }
    if textures:
        document["textures"] = textures
        document["images"] = images
        document["samplers"] = [{"wrapS": _REPEAT, "wrapT": _REPEAT}]
    if not meshes:
        del document["meshes"]
    if not gltf_materials:
        del document["materials"]
    return _pack(document, bytes(buffer.data))


def _primitive(primitive: Primitive, buffer: _Buffer) -> dict[str, Any]:
    attributes = {"POSITION": buffer.accessor(primitive.positions, "VEC3", bounds=True)}
    if primitive.normals is not None:
        attributes["NORMAL"] = buffer.accessor(primitive.normals, "VEC3")
    if primitive.uv is not None:
        attributes["TEXCOORD_0"] = buffer.accessor(primitive.uv, "VEC2")
    entry: dict[str, Any] = {"attributes": attributes, "material": primitive.material, "mode": _TRIANGLES}
    if primitive.indices is not None:
        entry["indices"] = buffer.accessor(primitive.indices.astype(np.uint32), "SCALAR")
    return entry


def _pack(document: dict[str, Any], binary: bytes) -> bytes:
    text = json.dumps(document, separators=(",", ":"), allow_nan=False).encode()
    text += b" " * (-len(text) % 4)
    binary += b"\0" * (-len(binary) % 4)
    total = 12 + 8 + len(text) + 8 + len(binary)
    return b"".join(
        (
            struct.pack("<4sII", b"glTF", 2, total),
            struct.pack("<I4s", len(text), b"JSON"),
            text,
            struct.pack("<I4s", len(binary), b"BIN\0"),
            binary,
        )
    )


def unpack(data: bytes) -> tuple[dict[str, Any], bytes]:
    """A .glb's JSON document and binary chunk (what a test or a tool reads back)."""
    magic, version, total = struct.unpack_from("<4sII", data, 0)
    if magic != b"glTF" or version != 2 or total != len(data):
        raise ValueError("not a glTF 2.0 binary")
    length, kind = struct.unpack_from("<I4s", data, 12)
    if kind != b"JSON":
        raise ValueError("a .glb starts with its JSON chunk")
    document = json.loads(data[20 : 20 + length])
    at = 20 + length
    binary = b""
    if at < len(data):
        size, kind = struct.unpack_from("<I4s", data, at)
        if kind == b"BIN\0":
            binary = data[at + 8 : at + 8 + size]
    return document, binary


def accessor_array(document: dict[str, Any], binary: bytes, index: int) -> npt.NDArray[Any]:
    """Accessor `index` of an unpacked .glb as an array (float32 or uint32, shaped by its type)."""
    accessor = document["accessors"][index]
    view = document["bufferViews"][accessor["bufferView"]]
    width = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4}[accessor["type"]]
    dtype = "<f4" if accessor["componentType"] == _FLOAT else "<u4"
    start = view.get("byteOffset", 0) + accessor.get("byteOffset", 0)
    values = np.frombuffer(binary, dtype=dtype, count=accessor["count"] * width, offset=start)
    return values.reshape(-1, width) if width > 1 else values

"""The Sequences act plane's msgpack (`application/x-seq-msgpack`, format `x-seq-msgpack/1`): plain msgpack,
numpy arrays and scalars as msgpack-numpy writes them (`{nd, type, kind, shape, data}`), no extension
types and no arrays of objects — nothing read here runs anything."""

from __future__ import annotations

from typing import Any, Final

import msgpack
import numpy as np

__all__ = ["FORMAT", "MEDIA_TYPE", "pack", "plain", "unpack"]

MEDIA_TYPE: Final = "application/x-seq-msgpack"
FORMAT: Final = "x-seq-msgpack/1"
MAX_BYTES: Final = 64 << 20


def _dtype(text: Any) -> np.dtype[Any]:
    dtype = np.dtype(text.decode() if isinstance(text, bytes) else str(text))
    if dtype.hasobject or dtype.kind in ("O", "V"):
        raise ValueError(f"a numpy value of dtype {dtype} is not carried")
    return dtype


def _hook(obj: dict[Any, Any]) -> Any:
    marked = obj.get(b"nd", obj.get("nd"))
    if marked is None or not isinstance(marked, bool):
        return obj
    kind = obj.get(b"type", obj.get("type"))
    data = obj.get(b"data", obj.get("data"))
    if not isinstance(data, bytes):
        raise ValueError("a numpy value without its bytes")
    dtype = _dtype(kind)
    if not marked:
        return np.frombuffer(data, dtype=dtype)[0]
    shape = obj.get(b"shape", obj.get("shape")) or []
    return np.frombuffer(data, dtype=dtype).reshape([int(n) for n in shape]).copy()


def _no_ext(code: int, data: bytes) -> Any:
    raise ValueError(f"msgpack extension type {code} is not read")


def unpack(data: bytes) -> Any:
    """One msgpack value, its numpy maps made arrays; ValueError for anything else."""
    if len(data) > MAX_BYTES:
        raise ValueError(f"a body of more than {MAX_BYTES >> 20} MiB")
    try:
        return msgpack.unpackb(data, object_hook=_hook, ext_hook=_no_ext, raw=False, strict_map_key=False)
    except (msgpack.UnpackException, ValueError, TypeError) as exc:
        raise ValueError(f"not one msgpack value: {exc}") from None


def _default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        dtype = _dtype(obj.dtype.str)
        return {b"nd": True, b"type": dtype.str, b"kind": b"", b"shape": list(obj.shape),
                b"data": np.ascontiguousarray(obj).tobytes()}  # fmt: skip
    if isinstance(obj, np.bool_ | np.number):
        return {b"nd": False, b"type": obj.dtype.str, b"data": np.asarray(obj).tobytes()}
    if isinstance(obj, tuple):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} is not carried")


def pack(value: Any) -> bytes:
    return bytes(msgpack.packb(value, default=_default, use_bin_type=True))


def plain(value: Any) -> Any:
    """`value` as JSON carries it: arrays and numpy numbers as their lists and numbers, bytes refused."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    if isinstance(value, bytes):
        raise TypeError("bytes, which JSON does not carry")
    return value

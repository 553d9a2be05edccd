"""The message codec of every wire: msgpack, with numpy values in the form the openpi and Positronic peers
use, so their clients and servers read what we write and we read what they write.

- an array is ``{b"__ndarray__": True, b"data": raw bytes (C order), b"dtype": dtype.str, b"shape": [...]}``;
- a numpy scalar is ``{b"__npgeneric__": True, b"data": value.item(), b"dtype": dtype.str}``;
- a JPEG image (only where `encode` is told to) is ``{b"__jpeg__": True, b"frames": [bytes per frame],
  b"ndim": 3 or 4}``, or with ``b"shape"`` (the full shape) instead of ``b"ndim"`` for more leading
  dimensions or an empty batch;
- everything else is plain msgpack: str, int, float, bool, None, bytes, dicts, lists (tuples arrive as
  lists).

Arrays of object, void (structured) and complex dtypes are refused both ways, as the peers refuse them.
"""

from __future__ import annotations

import functools
import io
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgpack
import numpy as np
from PIL import Image

from yardstick.wire.errors import ProtocolError

# The largest message either end takes, on every wire. An observation carries several camera frames, and the
# usual library defaults (1 MiB for websockets, 4 MiB for gRPC) refuse one.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
# The pixels one message's JPEG frames may decode to, all together. A photo's JPEG takes about a byte a
# pixel, but a crafted one (a flat colour) takes far less: without a bound, 16 MiB could decode to gigabytes.
MAX_JPEG_PIXELS = 8 * MAX_MESSAGE_BYTES

ValuePath = tuple[str | int, ...]
"""Where a value sits inside a message: dict keys and list indices from the top; () is the whole message."""

_NDARRAY = b"__ndarray__"
_NPGENERIC = b"__npgeneric__"
_JPEG = b"__jpeg__"
_DATA = b"data"
_DTYPE = b"dtype"
_SHAPE = b"shape"
_FRAMES = b"frames"
_NDIM = b"ndim"

_REFUSED_KINDS = {"O": "object", "V": "void", "c": "complex"}
# msgpack's own nesting limit; also bounds the walks that find where an error is.
_MAX_DEPTH = 512


# --- encoding


class _Refused(Exception):
    """Raised inside msgpack's default hook; `encode` finds where `obj` is and says so."""

    def __init__(self, obj: object, reason: str) -> None:
        super().__init__(reason)
        self.obj = obj
        self.reason = reason


def _refusal(dtype: np.dtype[Any]) -> str:
    return f"dtype {dtype} is refused: {_REFUSED_KINDS[dtype.kind]} values cannot travel"


@functools.lru_cache(maxsize=256)
def _dtype_str(dtype: np.dtype[Any]) -> str:
    return dtype.str  # numpy builds this string anew each time, slower than the whole lookup here


def _array_bytes(arr: np.ndarray[Any, Any]) -> memoryview | bytes:
    """The array's bytes in C order, as a view of its own memory when it is contiguous: msgpack copies a
    view once into the message (as bin, whatever its shape), where `tobytes()` would copy twice."""
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    try:
        return arr.data
    except ValueError:  # datetime64 and timedelta64 export no buffer
        return arr.tobytes()


def _default(obj: object) -> object:
    """msgpack's hook for what it does not pack itself. With `strict_types` that includes subclasses of
    the types it packs, so numpy's float64 (a float) comes here and keeps its dtype."""
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind in _REFUSED_KINDS:
            raise _Refused(obj, _refusal(obj.dtype))
        if obj.nbytes > MAX_MESSAGE_BYTES:  # refused before msgpack copies it all
            raise _Refused(
                obj, f"an array of {obj.nbytes} bytes is over the limit of {MAX_MESSAGE_BYTES} bytes"
            )
        return {
            _NDARRAY: True,
            _DATA: _array_bytes(obj),
            _DTYPE: _dtype_str(obj.dtype),
            _SHAPE: list(obj.shape),
        }
    if isinstance(obj, np.generic):
        if obj.dtype.kind in _REFUSED_KINDS:
            raise _Refused(obj, _refusal(obj.dtype))
        return {_NPGENERIC: True, _DATA: obj.item(), _DTYPE: _dtype_str(obj.dtype)}
    if isinstance(obj, tuple):
        return list(obj)
    if isinstance(obj, Mapping):
        return dict(obj)
    # Subclasses of the plain types (a str enum, an IntEnum, a list subclass) travel as their base.
    if isinstance(obj, str):
        return str.__str__(obj)  # str(obj) would give a str enum's name, not its value
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj)
    if isinstance(obj, bytes):
        return bytes(obj)
    if isinstance(obj, list):
        return list(obj)
    raise _Refused(obj, f"type {type(obj).__qualname__} cannot travel")


_packers = threading.local()


def _packer() -> Any:
    """One Packer per thread, reused: a new one allocates its buffer again (about 1 µs a message). The
    buffer keeps the size of the largest message the thread has sent, at most MAX_MESSAGE_BYTES or so."""
    packer = getattr(_packers, "packer", None)
    if packer is None:
        packer = _packers.packer = msgpack.Packer(default=_default, strict_types=True)
    return packer


def _jpeg_marker(image: object, quality: int, where: str) -> dict[bytes, Any]:
    if not (
        isinstance(image, np.ndarray)
        and image.dtype == np.uint8
        and image.ndim >= 3
        and image.shape[-1] == 3
        and min(image.shape[-3:-1]) >= 1
    ):
        got = f"{image.dtype} {image.shape}" if isinstance(image, np.ndarray) else type(image).__qualname__
        raise ProtocolError(f"{where}: a JPEG image must be a uint8 array shaped (..., H, W, 3), not {got}")
    image = np.ascontiguousarray(image)
    frames = []
    for frame in image.reshape(-1, *image.shape[-3:]):
        out = io.BytesIO()
        Image.fromarray(frame).save(out, format="JPEG", quality=quality)
        frames.append(out.getvalue())
    if image.ndim > 4 or not frames:
        return {_JPEG: True, _FRAMES: frames, _SHAPE: list(image.shape)}
    return {_JPEG: True, _FRAMES: frames, _NDIM: image.ndim}


def _replace_at(value: Any, path: ValuePath, depth: int, make: Callable[[Any], Any]) -> Any:
    """`value` with the item at `path[depth:]` replaced by `make(item)`; only the containers on the path
    are copied, so the caller's value is not changed."""
    if depth == len(path):
        return make(value)
    key = path[depth]
    if isinstance(value, Mapping) and key in value:
        return {**value, key: _replace_at(value[key], path, depth + 1, make)}
    if isinstance(value, list | tuple) and type(key) is int and -len(value) <= key < len(value):
        copy = list(value)
        copy[key] = _replace_at(value[key], path, depth + 1, make)
        return copy
    raise ProtocolError(f"JPEG path {_where(path)}: the message has no {_where(path[: depth + 1])}")


def encode(value: Any, *, jpeg: Sequence[ValuePath] = (), jpeg_quality: int = 90) -> bytes:
    """`value` as one message. Arrays travel raw and lossless, except the ones `jpeg` points at (uint8
    images shaped (..., H, W, 3)), which travel as JPEG frames of `jpeg_quality` (0-100).

    Dict keys should be str: the peers (and `decode`) refuse other keys, bytes apart.

    Raises ProtocolError, naming where in `value` the fault is, for a dtype or type that cannot travel,
    a JPEG path that selects no image, or a message over MAX_MESSAGE_BYTES."""
    if jpeg:
        if type(jpeg_quality) is not int or not 0 <= jpeg_quality <= 100:
            raise ProtocolError(f"JPEG quality must be an integer from 0 to 100, not {jpeg_quality!r}")
        for image_path in jpeg:
            path = tuple(image_path)
            make = functools.partial(_jpeg_marker, quality=jpeg_quality, where=_where(path))
            value = _replace_at(value, path, 0, make)
    try:
        message: bytes = _packer().pack(value)
    except _Refused as refused:
        obj = refused.obj
        raise ProtocolError(f"{_where(_find(value, lambda item: item is obj))}: {refused.reason}") from None
    except OverflowError as error:  # an int outside msgpack's 64 bits
        where = _where(_find(value, lambda item: type(item) is int and not -(2**63) <= item < 2**64))
        raise ProtocolError(f"{where}: {error}: msgpack integers are 64-bit") from None
    except (TypeError, ValueError) as error:  # a cycle or nesting too deep, a str with a lone surrogate
        raise ProtocolError(f"the message cannot be encoded: {error}") from error
    if len(message) > MAX_MESSAGE_BYTES:
        del _packers.packer  # its buffer grew to the message's size: let it go
        raise ProtocolError(
            f"the message is {len(message)} bytes, over the limit of {MAX_MESSAGE_BYTES} bytes; "
            "send smaller arrays, or images as JPEG"
        )
    return message


# --- decoding


def _dtype(text: object) -> np.dtype[Any]:
    if not isinstance(text, str):
        raise ProtocolError(f"a dtype must be a string, not {type(text).__qualname__}")
    return _parse_dtype(text)


@functools.lru_cache(maxsize=256)
def _parse_dtype(text: str) -> np.dtype[Any]:
    """A peer's dtype string, parsed once: most messages carry the same few."""
    try:
        dtype = np.dtype(text)
    # numpy reads a comma list ("f,02") with ast.literal_eval, which raises SyntaxError on what is not Python.
    except (TypeError, ValueError, SyntaxError) as error:
        raise ProtocolError(f"dtype {text!r} is not a numpy dtype: {error}") from None
    if dtype.kind in _REFUSED_KINDS:
        raise ProtocolError(_refusal(dtype))
    return dtype


def _shape(shape: object) -> list[int]:
    if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape):
        raise ProtocolError(f"a shape must be a list of integers >= 0, not {shape!r}")
    return shape


def _array(marker: dict[Any, Any], writable: bool) -> np.ndarray[Any, Any]:
    data, dtype, shape = marker.get(_DATA), _dtype(marker.get(_DTYPE)), marker.get(_SHAPE)
    # The fast path lets numpy check the shape's items (it refuses floats and bools); min() keeps out the
    # -1 that numpy would fill in. The array is a view of the bytes msgpack made, so it is read-only
    # unless asked for writable, which costs a copy.
    try:
        if type(data) is bytes and type(shape) is list and min(shape, default=0) >= 0:
            array = np.ndarray(shape, dtype, data)
            if array.nbytes == len(data):
                return array.copy() if writable else array
    except (TypeError, ValueError):
        pass
    if not isinstance(data, bytes):
        raise ProtocolError(f"array data must be bytes, not {type(data).__qualname__}")
    need = dtype.itemsize * math.prod(_shape(shape))
    raise ProtocolError(
        f"array data is {len(data)} bytes, but dtype {dtype.str} and shape {shape} need {need}"
    )


def _scalar(marker: dict[Any, Any]) -> np.generic:
    data, dtype = marker.get(_DATA), _dtype(marker.get(_DTYPE))
    if not isinstance(data, bool | int | float | str | bytes):  # np.float32(None) would be nan
        raise ProtocolError(f"a scalar's data must be a number, str or bytes, not {type(data).__qualname__}")
    try:
        scalar: np.generic = dtype.type(data)
    except (TypeError, ValueError, OverflowError) as error:
        raise ProtocolError(f"{data!r} is not a {dtype}: {error}") from None
    return scalar


def _jpeg_frame(frame: object, budget: list[int]) -> np.ndarray[Any, Any]:
    if not isinstance(frame, bytes):
        raise ProtocolError(f"a JPEG frame must be bytes, not {type(frame).__qualname__}")
    try:
        with Image.open(io.BytesIO(frame), formats=["JPEG"]) as image:
            # Opening reads only the header: check the size before decoding the pixels.
            budget[0] -= image.width * image.height
            if budget[0] < 0:
                raise ProtocolError(f"JPEG frames decode to over {MAX_JPEG_PIXELS} pixels")
            return np.asarray(image if image.mode == "RGB" else image.convert("RGB"))
    except ProtocolError:
        raise
    except Exception as error:  # whatever Pillow raises on bytes that are not a whole JPEG
        raise ProtocolError(f"a JPEG frame does not decode: {type(error).__name__}: {error}") from None


def _jpeg(marker: dict[Any, Any], budget: list[int]) -> np.ndarray[Any, Any]:
    frames = marker.get(_FRAMES)
    if not isinstance(frames, list):
        raise ProtocolError(f"JPEG frames must be a list, not {type(frames).__qualname__}")
    if _SHAPE in marker:
        shape = _shape(marker[_SHAPE])
        if len(shape) < 3 or shape[-1] != 3 or min(shape[-3:-1]) < 1 or math.prod(shape[:-3]) != len(frames):
            raise ProtocolError(f"JPEG shape {shape} does not hold {len(frames)} frames of H×W×3")
    elif (marker.get(_NDIM) == 3 and len(frames) == 1) or (marker.get(_NDIM) == 4 and frames):
        shape = None
    else:
        raise ProtocolError(f"JPEG ndim {marker.get(_NDIM)!r} does not fit {len(frames)} frames")
    if not frames:
        assert shape is not None
        return np.zeros(shape, np.uint8)
    images = [_jpeg_frame(frame, budget) for frame in frames]
    if any(image.shape != images[0].shape for image in images) or (
        shape is not None and list(images[0].shape) != shape[-3:]
    ):
        raise ProtocolError(
            f"JPEG frames of sizes {[image.shape for image in images]} do not fit shape {shape}"
        )
    stack = np.stack(images)
    if shape is not None:
        return stack.reshape(shape)
    return stack if marker[_NDIM] == 4 else stack[0]


def _restore(budget: list[int], writable: bool, obj: dict[Any, Any]) -> Any:
    """msgpack's object_hook: a decoded map, or the value it is the marker of."""
    if _NDARRAY in obj:
        return _array(obj, writable)
    if _NPGENERIC in obj:
        return _scalar(obj)
    if _JPEG in obj:
        return _jpeg(obj, budget)
    return obj


def _no_ext(code: int, data: bytes) -> object:
    raise ProtocolError(f"msgpack extension type {code} is not part of the protocol")


def decode(data: bytes | bytearray | memoryview, *, writable: bool = False) -> Any:
    """The value of one message, the inverse of `encode` and of the peers' encoders.

    Arrays are views of the message's own bytes, not copies, so they are READ-ONLY: `.copy()` one to
    change it. `writable=True` copies each array instead, for code that expects the arrays it is handed to
    be its own (a policy server hands observations to policies written for in-process arrays). JPEG frames
    come back as uint8 arrays of their original shape (JPEG changes pixels a little), always writable.

    Raises ProtocolError for a message over MAX_MESSAGE_BYTES, truncated or malformed, with an array whose
    data does not fit its dtype and shape, or with a dtype that is not numpy's or is refused."""
    size = data.nbytes if isinstance(data, memoryview) else len(data)
    if size > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"the message is {size} bytes, over the limit of {MAX_MESSAGE_BYTES} bytes")
    hook = functools.partial(_restore, [MAX_JPEG_PIXELS], writable)
    try:
        return msgpack.unpackb(data, object_hook=hook, ext_hook=_no_ext)
    except ProtocolError as error:
        raise ProtocolError(f"{_locate(data, error)}: {error}") from None
    except (ValueError, TypeError, msgpack.UnpackException) as error:
        # ValueError covers msgpack's truncated input, bad format, extra data, nesting and bad UTF-8.
        raise ProtocolError(
            f"a malformed message: {type(error).__name__}: {str(error) or 'not msgpack'}"
        ) from None


def _locate(data: bytes | bytearray | memoryview, error: ProtocolError) -> str:
    """Where the marker that `error` came from sits: decode the maps plain and try each marker in order."""
    try:
        plain = msgpack.unpackb(data, ext_hook=_no_ext)
    except Exception:  # the error was in the framing itself
        return "the message"
    budget = [MAX_JPEG_PIXELS]

    def fails(item: object) -> bool:
        if not isinstance(item, dict) or not (_NDARRAY in item or _NPGENERIC in item or _JPEG in item):
            return False
        try:
            _restore(budget, False, item)
        except ProtocolError:
            return True
        return False

    return _where(_find(plain, fails))


# --- where in a value


def _find(value: Any, hit: Callable[[object], bool]) -> ValuePath | None:
    """The path of the first item (in msgpack's order) for which `hit` is true, else None."""

    def walk(item: Any, path: ValuePath) -> ValuePath | None:
        if hit(item):
            return path
        if len(path) >= _MAX_DEPTH:
            return None
        if isinstance(item, Mapping):
            for key, sub in item.items():
                if hit(key):
                    return (*path, key)
                if (found := walk(sub, (*path, key))) is not None:
                    return found
        elif isinstance(item, list | tuple):
            for index, sub in enumerate(item):
                if (found := walk(sub, (*path, index))) is not None:
                    return found
        return None

    return walk(value, ())


def _where(path: ValuePath | None) -> str:
    """A path as a reader writes it: `observation.images[0]`; the whole message is `the message`."""
    if not path:
        return "the message"
    text = ""
    for part in path:
        if isinstance(part, str):
            text += f".{part}"
        else:  # a list index, or a dict key that is not a str
            text += f"[{part!r}]"
    return text.removeprefix(".")

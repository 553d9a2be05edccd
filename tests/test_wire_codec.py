"""The wire codec: lossless round trips, JPEG frames, refusals with a useful message, and interop with the
openpi and Positronic peers' own codecs (test-only oracles)."""

from __future__ import annotations

import contextlib
import math
import threading
from collections import OrderedDict
from enum import Enum, IntEnum, StrEnum
from typing import Any

import hypothesis.extra.numpy as hnp
import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from yardstick.wire import codec
from yardstick.wire.codec import MAX_MESSAGE_BYTES, decode, encode
from yardstick.wire.errors import ProtocolError

# --- strategies

NUMERIC_DTYPES = st.one_of(
    hnp.boolean_dtypes(),
    hnp.integer_dtypes(endianness="?"),
    hnp.unsigned_integer_dtypes(endianness="?"),
    hnp.floating_dtypes(endianness="?", sizes=(16, 32, 64)),
)
SHAPES = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5)


def _view(array: np.ndarray, how: str) -> np.ndarray:
    """The array itself or a non-contiguous view of it."""
    if how == "transpose":
        return array.T
    if how == "step" and array.ndim:
        return array[::2]
    if how == "reverse" and array.ndim:
        return array[::-1, ...]
    if how == "inner" and array.ndim >= 2:
        return array[:, 1:]
    return array


@st.composite
def numeric_arrays(draw: st.DrawFn) -> np.ndarray:
    array = draw(hnp.arrays(draw(NUMERIC_DTYPES), draw(SHAPES)))
    return _view(array, draw(st.sampled_from(["plain", "transpose", "step", "reverse", "inner"])))


@st.composite
def numpy_scalars(draw: st.DrawFn) -> np.generic:
    scalar = draw(hnp.arrays(draw(NUMERIC_DTYPES), ()))[()]
    assert isinstance(scalar, np.generic)
    return scalar


LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.binary(max_size=8),
    numeric_arrays(),
    numpy_scalars(),
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=6), inner, max_size=4),
    ),
    max_leaves=12,
)


def same(sent: Any, got: Any) -> bool:
    """Equal as a peer sees it: arrays and numpy scalars bit for bit with dtype and shape (so NaN equals
    NaN, as it does for a plain float), tuples as lists."""
    if isinstance(sent, np.ndarray | np.generic):
        sent_array, got_array = np.asarray(sent), np.asarray(got)
        return (
            type(got) is type(sent)
            and got_array.dtype == sent_array.dtype
            and got_array.shape == sent_array.shape
            and np.ascontiguousarray(got_array).tobytes() == np.ascontiguousarray(sent_array).tobytes()
        )
    if isinstance(sent, list | tuple):
        return type(got) is list and len(got) == len(sent) and all(map(same, sent, got))
    if isinstance(sent, dict):
        return type(got) is dict and got.keys() == sent.keys() and all(same(sent[k], got[k]) for k in sent)
    if isinstance(sent, float) and math.isnan(sent):  # a numpy NaN that openpi packs as a plain float
        return type(got) is float and math.isnan(got)
    return type(got) is type(sent) and got == sent


def refused(call: Any, *fragments: str) -> str:
    """Run `call`, which must raise ProtocolError whose message holds every fragment; the message."""
    with pytest.raises(ProtocolError) as caught:
        call()
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


def marker(**fields: Any) -> bytes:
    """A message carrying one hand-made marker map (byte-string keys, as the peers write them)."""
    message: bytes = msgpack.packb(
        {"obs": {"state": {name.encode(): value for name, value in fields.items()}}}
    )
    return message


def photo(*shape: int, seed: int = 0) -> np.ndarray:
    """A smooth uint8 image (gradients and a little noise), the kind JPEG is made for; random noise is not."""
    *lead, height, width, _ = shape
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    base = np.stack([x / width * 200, y / height * 200, (x + y) / (width + height) * 255], axis=-1)
    noise = np.random.default_rng(seed).normal(0, 2, (*lead, height, width, 3))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


# --- round trips


@given(numeric_arrays())
def test_every_numeric_array_round_trips(array: np.ndarray) -> None:
    got = decode(encode(array))
    assert same(array, got)
    assert not got.flags.writeable  # a view of the message's bytes, as the docstring says


@given(numpy_scalars())
def test_numpy_scalars_keep_their_dtype(scalar: np.generic) -> None:
    assert same(scalar, decode(encode(scalar)))


@given(VALUES)
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_nested_values_round_trip(value: Any) -> None:
    assert same(value, decode(encode(value)))


def test_plain_types_and_subclasses() -> None:
    class Color(str, Enum):  # noqa: UP042 - the case where str() gives "Color.RED", not the value
        RED = "red"

    class Shade(StrEnum):
        DARK = "dark"

    class Level(IntEnum):
        HIGH = 3

    value = {
        "c": Color.RED,
        "s": Shade.DARK,
        "l": Level.HIGH,
        "o": OrderedDict(a=1),
        "f": np.float64(0.5),
        "b": np.bool_(True),
    }
    got = decode(encode(value))
    assert got == {"c": "red", "s": "dark", "l": 3, "o": {"a": 1}, "f": 0.5, "b": True}
    assert type(got["f"]) is np.float64 and type(got["b"]) is np.bool_  # not a plain float / bool
    assert decode(bytearray(encode([1]))) == decode(memoryview(encode([1]))) == [1]


def test_other_dtypes_the_peers_carry() -> None:
    for array in (np.array(["ab", "c"]), np.array([b"xy"]), np.arange(3).astype("datetime64[ms]")):
        assert same(array, decode(encode(array)))


def test_arrays_are_not_copied_before_msgpack() -> None:
    image = np.zeros((224, 224, 3), np.uint8)
    assert isinstance(codec._array_bytes(image), memoryview)
    assert np.shares_memory(np.asarray(codec._array_bytes(image)), image)


def test_concurrent_encoders_do_not_mix_messages() -> None:
    failures: list[int] = []

    def work(n: int) -> None:
        value = {"n": n, "a": np.full((50, 50), n, np.int32)}
        for _ in range(200):
            got = decode(encode(value))
            if got["n"] != n or not (got["a"] == n).all():
                failures.append(n)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures


# --- JPEG


def test_jpeg_image_round_trips_close() -> None:
    image = photo(224, 224, 3)
    value = {"observation": {"image": image, "state": np.zeros(8, np.float32)}}
    message = encode(value, jpeg=[("observation", "image")])
    assert len(message) < image.nbytes / 4  # it did travel as JPEG
    got = decode(message)["observation"]["image"]
    assert got.dtype == np.uint8 and got.shape == image.shape
    assert np.abs(got.astype(int) - image).mean() < 3
    assert value["observation"]["image"] is image  # the caller's value is not changed


@pytest.mark.parametrize(
    "shape", [(4, 32, 48, 3), (2, 3, 16, 16, 3), (1, 8, 8, 3), (0, 8, 8, 3), (2, 0, 8, 8, 3)]
)
def test_jpeg_stacks_keep_their_shape(shape: tuple[int, ...]) -> None:
    images = photo(*shape) if 0 not in shape else np.zeros(shape, np.uint8)
    got = decode(encode({"frames": [images]}, jpeg=[("frames", 0)], jpeg_quality=95))["frames"][0]
    assert got.shape == shape and got.dtype == np.uint8
    if images.size:
        assert np.abs(got.astype(int) - images).mean() < 3


@pytest.mark.parametrize(
    ("image", "fragment"),
    [
        (np.zeros((8, 8, 3), np.float32), "float32 (8, 8, 3)"),
        (np.zeros((8, 8), np.uint8), "(8, 8)"),
        (np.zeros((8, 8, 4), np.uint8), "(8, 8, 4)"),
        (np.zeros((0, 8, 3), np.uint8), "(0, 8, 3)"),
        ([[1, 2, 3]], "not list"),
    ],
)
def test_jpeg_refuses_what_is_not_an_rgb_uint8_image(image: Any, fragment: str) -> None:
    refused(lambda: encode({"cam": [image]}, jpeg=[("cam", 0)]), "cam[0]: a JPEG image must be", fragment)


def test_jpeg_path_and_quality_are_checked() -> None:
    value = {"cam": np.zeros((8, 8, 3), np.uint8)}
    refused(lambda: encode(value, jpeg=[("camera",)]), "JPEG path camera", "no camera")
    refused(lambda: encode(value, jpeg=[("cam", 0)]), "no cam[0]")
    refused(lambda: encode(value, jpeg=[("cam",)], jpeg_quality=101), "quality", "101")


def test_jpeg_decode_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    message = encode(photo(3, 16, 16, 3), jpeg=[()])
    monkeypatch.setattr(codec, "MAX_JPEG_PIXELS", 2 * 16 * 16)
    refused(lambda: decode(message), "over 512 pixels")


def test_jpeg_markers_that_lie_are_refused() -> None:
    frame = encode(photo(8, 8, 3), jpeg=[()])
    frames = msgpack.unpackb(frame)[b"frames"]
    refused(lambda: decode(marker(__jpeg__=True, frames=frames, ndim=5)), "obs.state: JPEG ndim 5")
    refused(lambda: decode(marker(__jpeg__=True, frames=frames * 2, ndim=3)), "2 frames")
    refused(
        lambda: decode(marker(__jpeg__=True, frames=frames, shape=[2, 8, 8, 3])), "does not hold 1 frames"
    )
    refused(lambda: decode(marker(__jpeg__=True, frames=frames, shape=[1, 9, 8, 3])), "do not fit shape")
    refused(lambda: decode(marker(__jpeg__=True, frames=[b"not a jpeg"], ndim=3)), "does not decode")
    refused(lambda: decode(marker(__jpeg__=True, frames=[frames[0][:40]], ndim=3)), "does not decode")
    refused(lambda: decode(marker(__jpeg__=True, frames="x", ndim=3)), "must be a list")


# --- refusals


@pytest.mark.parametrize(
    "bad",
    [
        np.zeros(3, np.complex128),
        np.complex64(1 + 2j),
        np.array([object()]),
        np.zeros(2, "i4,f4"),
        np.void(b"ab"),
    ],
)
def test_refused_dtypes_name_the_dtype_and_where(bad: Any) -> None:
    refused(lambda: encode({"observation": {"state": bad}}), "observation.state: dtype", "is refused")


def test_unsupported_python_values_say_where() -> None:
    refused(lambda: encode({"a": [1, {"b": {1, 2}}]}), "a[1].b: type set cannot travel")
    refused(lambda: encode({"a": 1j}), "a: type complex cannot travel")
    refused(lambda: encode([object()]), "[0]: type object cannot travel")
    refused(lambda: encode({"a": [0, 2**64]}), "a[1]:", "64-bit")
    refused(lambda: encode({"a": -(2**63) - 1}), "a:", "64-bit")


def test_oversize_is_refused_both_ways() -> None:
    refused(lambda: encode(np.zeros(MAX_MESSAGE_BYTES, np.uint8)), f"limit of {MAX_MESSAGE_BYTES}", "bytes")
    big = np.zeros(MAX_MESSAGE_BYTES + 1, np.uint8)
    refused(
        lambda: encode({"a": [big]}), f"a[0]: an array of {MAX_MESSAGE_BYTES + 1} bytes is over the limit"
    )
    halves = [np.zeros(MAX_MESSAGE_BYTES // 2, np.uint8)] * 2
    refused(lambda: encode(halves), "the message is", f"over the limit of {MAX_MESSAGE_BYTES} bytes")
    assert decode(encode(np.zeros(MAX_MESSAGE_BYTES - 100, np.uint8))).size == MAX_MESSAGE_BYTES - 100
    too_big = bytes(MAX_MESSAGE_BYTES + 1)
    refused(lambda: decode(too_big), f"{MAX_MESSAGE_BYTES + 1} bytes", f"limit of {MAX_MESSAGE_BYTES}")
    refused(lambda: decode(memoryview(too_big)), "over the limit")


def test_every_truncation_is_refused() -> None:
    message = encode({"state": np.arange(8, dtype=np.float32), "prompt": "pick", "n": np.int64(3)})
    for cut in range(len(message)):
        refused(lambda cut=cut: decode(message[:cut]), "malformed message")
    refused(lambda: decode(message + b"\x00"), "malformed message")


def test_malformed_markers_are_refused_with_where() -> None:
    state = np.zeros(4, np.float32).tobytes()
    ok = {"__ndarray__": True, "data": state, "dtype": "<f4", "shape": [4]}
    assert decode(marker(**ok))["obs"]["state"].tolist() == [0.0] * 4
    for change, fragments in [
        ({"shape": [5]}, ["obs.state: array data is 16 bytes", "need 20"]),
        ({"shape": [2, 3]}, ["16 bytes", "shape [2, 3] need 24"]),
        ({"dtype": "<f8"}, ["dtype <f8 and shape [4] need 32"]),
        ({"shape": [-1]}, ["list of integers >= 0"]),
        ({"shape": [4.0]}, ["list of integers >= 0"]),
        ({"shape": "4"}, ["list of integers >= 0"]),
        ({"data": "text"}, ["data must be bytes, not str"]),
        ({"data": None}, ["data must be bytes"]),
        ({"dtype": "<zz"}, ["'<zz' is not a numpy dtype"]),
        ({"dtype": "f,02"}, ["'f,02' is not a numpy dtype"]),  # numpy's parser raises SyntaxError here
        ({"dtype": 4}, ["dtype must be a string"]),
        ({"dtype": "<c16"}, ["complex128 is refused"]),
        ({"dtype": "|O"}, ["object is refused"]),
        ({"dtype": "|V4"}, ["void"]),
    ]:
        refused(lambda change=change: decode(marker(**{**ok, **change})), *fragments)


def test_malformed_scalars_and_extensions_are_refused() -> None:
    refused(lambda: decode(marker(__npgeneric__=True, data="abc", dtype="<f4")), "obs.state: 'abc' is not a")
    refused(lambda: decode(marker(__npgeneric__=True, data=None, dtype="<f4")), "scalar's data must be")
    refused(lambda: decode(marker(__npgeneric__=True, data=1000, dtype="|i1")), "1000 is not a int8")
    refused(lambda: decode(marker(__npgeneric__=True, data=1.0, dtype="<c8")), "complex64 is refused")
    refused(lambda: decode(msgpack.packb([msgpack.ExtType(5, b"x")])), "extension type 5")
    refused(lambda: decode(b"\xc1"), "malformed message")
    refused(lambda: decode(msgpack.packb({1: 2})), "malformed message")


@given(st.binary(max_size=64))
def test_garbage_decodes_or_is_refused(data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode(data)


@given(st.data())
def test_corrupted_messages_decode_or_are_refused(data: st.DataObject) -> None:
    message = bytearray(encode({"state": np.arange(6, dtype=np.float32).reshape(2, 3), "x": np.int16(4)}))
    for _ in range(data.draw(st.integers(1, 4))):
        message[data.draw(st.integers(0, len(message) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(ProtocolError):
        decode(message)


_JPEG_FRAME = msgpack.unpackb(encode(photo(8, 8, 3), jpeg=[()]))[b"frames"][0]
ODD_VALUES = st.one_of(
    st.none(), st.integers(-3, 2**40), st.floats(), st.text(max_size=4), st.binary(max_size=8)
)
HAND_MADE_MARKERS = st.fixed_dictionaries(
    {},
    optional={
        b"__ndarray__": st.just(True),
        b"__npgeneric__": st.just(True),
        b"__jpeg__": st.just(True),
        b"data": st.one_of(st.binary(max_size=40), ODD_VALUES, st.lists(st.integers(0, 9), max_size=3)),
        b"dtype": st.one_of(
            st.sampled_from(
                ["<f4", "|u1", ">i8", "|b1", "<U2", "<M8[ns]", "<c8", "|O", "|V2", "f4,i4", "(2,)f4"]
            ),
            ODD_VALUES,
        ),
        b"shape": st.one_of(st.lists(st.integers(-2, 9), max_size=4), ODD_VALUES),
        b"frames": st.one_of(
            st.lists(st.sampled_from([_JPEG_FRAME, b"", b"\xff\xd8junk"]), max_size=3), ODD_VALUES
        ),
        b"ndim": st.one_of(st.integers(0, 5), ODD_VALUES),
    },
)


@given(HAND_MADE_MARKERS)
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_hand_made_markers_decode_or_are_refused(fields: dict[bytes, Any]) -> None:
    with contextlib.suppress(ProtocolError):
        decode(msgpack.packb({"obs": [fields]}))


# --- interop with the peers' own codecs

# Fixtures, not module-level imports: a missing peer skips its own tests, not the whole file.


@pytest.fixture(scope="module")
def openpi() -> Any:
    return pytest.importorskip("openpi_client.msgpack_numpy")


@pytest.fixture(scope="module")
def positronic() -> Any:
    return pytest.importorskip("positronic_model_server.serialization")


OBSERVATION = {
    "observation/state": np.linspace(-1, 1, 8, dtype=np.float32),
    "images": {"base": photo(32, 32, 3), "wrist": photo(32, 32, 3, seed=1)[::-1]},
    "steps": [np.int64(3), np.uint8(7), np.bool_(False), np.float32(0.25)],
    "prompt": "pick up the cube",
    "meta": {"id": b"\x00\x01", "none": None, "ok": True, "n": -5, "x": 1.5},
}


@given(numeric_arrays())
def test_our_messages_are_byte_identical_to_openpis_for_arrays(openpi: Any, array: np.ndarray) -> None:
    assert encode({"a": array}) == openpi.packb({"a": array})


def test_openpi_reads_ours(openpi: Any) -> None:
    got = openpi.unpackb(encode(OBSERVATION))
    assert same(OBSERVATION, got)


def test_we_read_openpis(openpi: Any) -> None:
    assert same(OBSERVATION, decode(openpi.packb(OBSERVATION)))


@given(VALUES)
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_both_ways_with_openpi_for_any_value(openpi: Any, value: Any) -> None:
    assert same(value, openpi.unpackb(encode(value)))
    # openpi packs a numpy float64 as the plain float it subclasses; everything else arrives as sent.
    got = decode(openpi.packb(value))
    assert same(_plain_float64(value), got)


def _plain_float64(value: Any) -> Any:
    if isinstance(value, np.float64):
        return float(value)
    if isinstance(value, list | tuple):
        return [_plain_float64(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain_float64(item) for key, item in value.items()}
    return value


def test_positronic_reads_ours(positronic: Any) -> None:
    assert same(OBSERVATION, positronic.deserialise(encode(OBSERVATION)))


def test_we_read_positronics(positronic: Any) -> None:
    assert same(_plain_float64(OBSERVATION), decode(positronic.serialise(OBSERVATION)))


@pytest.mark.parametrize("shape", [(48, 64, 3), (3, 48, 64, 3), (2, 2, 16, 16, 3), (0, 16, 16, 3)])
def test_jpeg_both_ways_with_positronic(shape: tuple[int, ...], positronic: Any) -> None:
    image = photo(*shape) if 0 not in shape else np.zeros(shape, np.uint8)

    theirs = decode(positronic.serialise({"cam": positronic.encode_jpeg(image, 90)}))["cam"]
    ours = positronic.deserialise(encode({"cam": image}, jpeg=[("cam",)]))["cam"]
    for got in (theirs, ours):
        assert got.shape == image.shape and got.dtype == np.uint8
        if image.size:
            assert np.abs(got.astype(int) - image).mean() < 3
    # The same encoder settings give the same frames, so the same pixels on either side.
    assert np.array_equal(theirs, ours)


def test_positronic_jpeg_paths_match_ours(positronic: Any) -> None:
    value = {"observation": {"images": [photo(24, 24, 3), photo(24, 24, 3, seed=2)]}, "t": 1}
    path = ("observation", "images", 1)
    encoded = positronic.encode_images(value, [positronic.JpegEncoding(path, 80)])
    assert decode(positronic.serialise(encoded)).keys() == value.keys()
    assert encode(value, jpeg=[path], jpeg_quality=80) == positronic.serialise(encoded)


def test_arrays_decode_read_only_views_unless_asked_for_writable_copies() -> None:
    message = codec.encode({"image": np.arange(12, dtype=np.uint8).reshape(3, 4), "n": 1})
    shared = codec.decode(message)["image"]
    assert not shared.flags.writeable
    own = codec.decode(message, writable=True)["image"]
    own[0, 0] = 99
    assert own.flags.writeable and own[0, 0] == 99
    assert codec.decode(message)["image"][0, 0] == 0  # the message itself is untouched

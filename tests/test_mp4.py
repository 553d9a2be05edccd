"""What a page reads of a recorded video, read by the platform's own parser of the MP4 structure (no codec
library opens a box's file): a real H.264 mp4's width, height and duration, and every file that is no such
video refused, saying what was wrong."""

from __future__ import annotations

import struct
from pathlib import Path

import av
import numpy as np
import pytest

from yardstick.engine import mp4
from yardstick.engine.recording import describe_video


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mp4") / "image.cam.mp4"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"  # type: ignore[attr-defined]
        for i in range(12):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 20 * i, np.uint8), format="rgb24")
            container.mux(stream.encode(frame))  # type: ignore[attr-defined]
        container.mux(stream.encode())  # type: ignore[attr-defined]
    return path


def test_a_real_video_is_read_as_a_player_shows_it(video: Path) -> None:
    info = mp4.inspect(video)
    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        shown = float(stream.duration * stream.time_base)  # type: ignore[operator]
    assert (info.width, info.height, info.codec) == (64, 48, "avc1")
    assert info.duration_s == pytest.approx(shown, abs=0.05)
    assert describe_video(video) == {
        "camera": "cam", "file": video.name, "width": 64, "height": 48, "duration_s": info.duration_s,
    }  # fmt: skip


def _boxes(data: bytes) -> list[tuple[bytes, int, int]]:
    found, offset = [], 0
    while offset < len(data):
        size, kind = struct.unpack(">I4s", data[offset : offset + 8])
        found.append((kind, offset, size))
        offset += size
    return found


def test_what_is_no_mp4_video_is_refused_saying_why(video: Path, tmp_path: Path) -> None:
    data = video.read_bytes()
    boxes = {kind: (offset, size) for kind, offset, size in _boxes(data)}
    moov_at, moov_size = boxes[b"moov"]
    cases = {
        "a gif": (b"GIF89a" + b"\0" * 64, "not ftyp"),
        "cut short": (data[: moov_at + 40], "runs past"),
        "no moov": (data[:moov_at], "no moov"),
        "two moovs": (data + data[moov_at : moov_at + moov_size], "two moov"),
        "a huge box": (
            data[:moov_at] + struct.pack(">I4s", 2**31, b"moov") + data[moov_at + 8 :],
            "runs past",
        ),
        "no video track": (data.replace(b"vide", b"soun"), "no video track"),
        "not h264": (data.replace(b"avc1", b"mp4v"), "not H.264"),
        "a stray box": (data + struct.pack(">I4s", 8, b"evil"), "top level"),
        "empty": (b"", "an empty file"),
    }
    for name, (content, words) in cases.items():
        path = tmp_path / f"{name}.mp4"
        path.write_bytes(content)
        with pytest.raises(mp4.NotAVideo, match=words):
            mp4.inspect(path)

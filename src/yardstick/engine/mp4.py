"""An MP4 file's structure checked, and what a page needs of it read, in plain Python: no codec library parses
a file before this has.

A video recorded in a box is bytes the box chose; FFmpeg, which the platform would otherwise open it with,
is a large parser of untrusted input. `inspect` walks the ISO base media file format's boxes instead —
every box's size within its parent, an `ftyp` first, one `moov` with its `mvhd`, a video track (`hdlr` of
`vide`) whose sample description is H.264 (`avc1`) — and reads the video's width, height and duration
from them. Anything else is `NotAVideo`, naming what was wrong. The frames are the browser's to decode.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Final

# The header of a box (size, type), and what a box that describes the file may weigh: `moov` is read whole.
HEADER: Final = 8
MAX_MOOV_BYTES: Final = 64 * 1024 * 1024
CONTAINERS: Final = frozenset({b"moov", b"trak", b"mdia", b"minf", b"stbl", b"edts", b"dinf", b"udta"})
TOP_LEVEL: Final = frozenset({b"ftyp", b"moov", b"mdat", b"free", b"skip", b"wide", b"uuid", b"meta"})
CODECS: Final = frozenset({b"avc1", b"avc3"})


class NotAVideo(ValueError):
    """A file that is not an MP4 holding an H.264 video track: the message says what was wrong."""


@dataclass(frozen=True)
class VideoInfo:
    width: int
    height: int
    duration_s: float
    codec: str


def inspect(path: Path) -> VideoInfo:
    """The video an MP4 file holds, its structure checked first; NotAVideo when it is none."""
    with open(path, "rb") as handle:
        handle.seek(0, 2)
        total = handle.tell()
        if total == 0:
            raise NotAVideo("an empty file")
        handle.seek(0)
        moov: bytes | None = None
        offset, first = 0, True
        while offset < total:
            handle.seek(offset)
            head = handle.read(16)
            if first and head[4:8] != b"ftyp":
                raise NotAVideo(f"the file begins with a {_name(head[4:8])} box, not ftyp: it is no MP4")
            first = False
            kind, start, end = _header(head, offset, total)
            if kind not in TOP_LEVEL:
                raise NotAVideo(f"a {_name(kind)} box at the top level, at byte {offset}")
            if kind == b"moov":
                if moov is not None:
                    raise NotAVideo("two moov boxes")
                if end - start > MAX_MOOV_BYTES:
                    raise NotAVideo(f"a moov box of {end - start} bytes, past {MAX_MOOV_BYTES}")
                handle.seek(start)
                moov = handle.read(end - start)
            offset = end
    if moov is None:
        raise NotAVideo("no moov box: the file was not finished")
    return _movie(moov)


def _header(data: bytes, offset: int, limit: int) -> tuple[bytes, int, int]:
    """A box's type, where its body starts and where it ends; NotAVideo when it does not fit in `limit`."""
    if len(data) < HEADER or offset + HEADER > limit:
        raise NotAVideo(f"a box header cut short at byte {offset}")
    size, kind = struct.unpack(">I4s", data[:HEADER])
    start = offset + HEADER
    if size == 1:
        if len(data) < 16:
            raise NotAVideo(f"a large box header cut short at byte {offset}")
        size = struct.unpack(">Q", data[8:16])[0]
        start += 8
    elif size == 0:
        size = limit - offset
    end = offset + size
    if size < start - offset or end > limit:
        raise NotAVideo(f"a {_name(kind)} box of {size} bytes at byte {offset} runs past its parent")
    return kind, start, end


def _children(data: bytes, start: int = 0, end: int | None = None) -> list[tuple[bytes, bytes]]:
    limit = len(data) if end is None else end
    found: list[tuple[bytes, bytes]] = []
    offset = start
    while offset < limit:
        kind, body, stop = _header(data[offset : offset + 16], offset, limit)
        found.append((kind, data[body:stop]))
        offset = stop
    return found


def _movie(moov: bytes) -> VideoInfo:
    boxes = _children(moov)
    header = [body for kind, body in boxes if kind == b"mvhd"]
    if len(header) != 1:
        raise NotAVideo("the moov box holds no single mvhd")
    movie_scale, movie_duration = _timing(header[0], "mvhd", track=False)
    for kind, body in boxes:
        if kind == b"trak":
            found = _video_track(body)
            if found is not None:
                width, height, codec, media_seconds = found
                # The movie's own duration is what a player presents (its edit list applied); the track's
                # media may run longer (an encoder's lead-in). The media's stands where the movie says none.
                seconds = movie_duration / movie_scale if movie_duration else (media_seconds or 0.0)
                return VideoInfo(width, height, round(seconds, 3), codec)
    raise NotAVideo("no video track")


def _video_track(trak: bytes) -> tuple[int, int, str, float | None] | None:
    inside = dict(_children(trak))
    mdia = inside.get(b"mdia")
    if mdia is None:
        raise NotAVideo("a track without an mdia box")
    media = dict(_children(mdia))
    handler = media.get(b"hdlr")
    if handler is None or len(handler) < 12:
        raise NotAVideo("a track without a handler (hdlr)")
    if handler[8:12] != b"vide":
        return None
    seconds = None
    if b"mdhd" in media:
        scale, duration = _timing(media[b"mdhd"], "mdhd", track=True)
        seconds = duration / scale
    stbl = dict(_children(dict(_children(_need(media, b"minf", "mdia"))).get(b"stbl") or b""))
    stsd = _need(stbl, b"stsd", "stbl")
    if len(stsd) < 8 + HEADER + 28:
        raise NotAVideo("a sample description (stsd) cut short")
    (count,) = struct.unpack(">I", stsd[4:8])
    if count < 1:
        raise NotAVideo("a video track that describes no samples")
    entry_kind = stsd[12:16]
    if entry_kind not in CODECS:
        raise NotAVideo(f"a video track of {_name(entry_kind)}, not H.264 (avc1)")
    # A visual sample entry: 6 reserved bytes, a data reference index, 16 predefined, then width, height.
    width, height = struct.unpack(">HH", stsd[16 + 24 : 16 + 28])
    if not (0 < width <= 16384 and 0 < height <= 16384):
        raise NotAVideo(f"a video of {width}×{height}")
    return width, height, entry_kind.decode(), seconds


def _timing(body: bytes, name: str, *, track: bool) -> tuple[int, int]:
    """(timescale, duration) of an mvhd or mdhd box, version 0 or 1."""
    if not body:
        raise NotAVideo(f"an empty {name} box")
    version = body[0]
    try:
        if version == 1:
            scale, duration = struct.unpack(">IQ", body[20:32])
        elif version == 0:
            scale, duration = struct.unpack(">II", body[12:20])
        else:
            raise NotAVideo(f"an {name} box of version {version}")
    except struct.error:
        raise NotAVideo(f"an {name} box cut short") from None
    if scale <= 0:
        raise NotAVideo(f"an {name} box with no time scale")
    return scale, duration


def _need(boxes: dict[bytes, bytes], kind: bytes, parent: str) -> bytes:
    found = boxes.get(kind)
    if found is None:
        raise NotAVideo(f"no {_name(kind)} box in {parent}")
    return found


def _name(kind: bytes) -> str:
    return kind.decode("latin-1").encode("unicode_escape").decode() or "nameless"

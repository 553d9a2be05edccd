"""Episodes played inside a box: `python -m yardstick.worker.boxes.play_runner FOLDER`, driven by `player.py`.

It builds `engine.runtime.Runtime(work)` once (the work handed on its first line), then plays the episodes
the parent hands it, batch after batch, as `engine/pool.py`'s workers do, until told to stop. One JSON object
a line each way; the parent → box direction may carry a pickle (the parent is trusted), the box → parent
direction never does (the parent never unpickles what a box wrote).

    parent → box   {"work": <base64 pickle of Work>}, then {"batch": true} | {"stop": true};
                   in a batch, {"episode": {...EpisodeSpec}} or {"end": true} answering each want
    box → parent   {"ready": cold_start_s} | {"build_failed": reason, "kind": FailureKind};
                   {"want": true}; for each file the episode recorded, {"file": name, "data": base64} a chunk
                   at a time and {"file": name, "end": true}; then {"result": EpisodeResult.to_dict()};
                   {"batch_done": true}; {"beat": deadline} every BEAT_S: the deadline of the call it is in
                   (0: none)

A recording is written in the box's own scratch (its /tmp, which nothing outside sees) and its bytes are sent
on the channel, then deleted: no file leaves the box by a path the box could have linked elsewhere. A 3D
replay's scene (`scenes/<sha256>.glb`, the same for every episode of a model) is sent once a box and kept in
its scratch, so the recorder does not write it again; later episodes name it and the platform keeps the
copy that arrived.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import pickle
import signal
import stat
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, TextIO

from yardstick.engine.failures import FailureKind
from yardstick.engine.guard import describe
from yardstick.engine.replay_track import SCENE_FILE
from yardstick.engine.results import EpisodeSpec
from yardstick.engine.runtime import BuildError, Runtime, Work
from yardstick.worker.boxes import inbox

BEAT_S: Final = 0.5
CHUNK_BYTES: Final = 1024 * 1024


class _Beacon:
    """Where the engine's guard writes the deadline of the call in progress (the pool's shared value)."""

    value = 0.0


class _Channel:
    """One JSON object a line to the parent; the beat thread and the player share it."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        line = json.dumps(message, default=str) + "\n"
        with self._lock:
            self._out.write(line)
            self._out.flush()


def _beat(channel: _Channel, beacon: _Beacon, stopping: threading.Event) -> None:
    while not stopping.wait(BEAT_S):
        try:
            channel.send({"beat": beacon.value})
        except (OSError, ValueError):
            return


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what stops
    out = _Channel(inbox.private_channel())
    read = inbox.private_input().readline
    inbox.import_root(Path(argv[0]))
    first = json.loads(read())
    work: Work = pickle.loads(base64.b64decode(first["work"]))
    beacon = _Beacon()
    try:
        runtime = Runtime(work, beacon)
    except BuildError as failure:
        out.send({"build_failed": failure.reason, "kind": failure.kind.value})
        return 0
    except Exception as exc:
        out.send(
            {
                "build_failed": describe("building the run", exc),
                "kind": FailureKind.BENCHMARK_SETUP_CRASH.value,
            }
        )
        return 0
    stopping = threading.Event()
    threading.Thread(target=_beat, args=(out, beacon, stopping), daemon=True).start()
    out.send({"ready": runtime.cold_start_s})

    def handed_out() -> Iterator[EpisodeSpec]:
        while True:
            out.send({"want": True})
            message = json.loads(read())
            if "episode" not in message:
                return
            yield EpisodeSpec(**message["episode"])

    sent_scenes: set[str] = set()
    try:
        while True:
            line = read()
            if not line or json.loads(line).get("stop"):
                return 0
            for result in runtime.run(handed_out()):
                if work.recording is not None and work.recording.folder:
                    _send_files(out, Path(work.recording.folder), result.artifacts, sent_scenes)
                out.send({"result": result.to_dict()})
            out.send({"batch_done": True})
    except (BrokenPipeError, EOFError):
        return 0  # the parent is gone, and so is the point of going on
    finally:
        stopping.set()
        runtime.close()


def _send_files(out: _Channel, folder: Path, names: list[str], sent_scenes: set[str]) -> None:
    """Each recorded file's bytes on the channel, a chunk at a time; the box's copy goes once sent (a scene's
    stays, and is sent once). A file that is not a plain file any more (a link, a FIFO put in its place) is
    sent empty: never waited on."""
    for name in names:
        scene = SCENE_FILE.fullmatch(name) is not None
        if scene and name in sent_scenes:
            continue
        path = folder / name
        with contextlib.suppress(OSError):
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as handle:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    while chunk := handle.read(CHUNK_BYTES):
                        out.send({"file": name, "data": base64.b64encode(chunk).decode()})
        out.send({"file": name, "end": True})
        if scene:
            sent_scenes.add(name)
            continue
        with contextlib.suppress(OSError):
            os.unlink(path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

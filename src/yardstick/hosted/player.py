"""A hosted benchmark's episodes, played in a box: `BoxedExecutor`, an `engine.executors.Executor`.

The box (see `sandbox.py`) runs `yardstick.hosted.play_runner`, which builds `engine.runtime.Runtime(work)`
once and plays the episodes handed to it, batch after batch: the box is kept warm between calls to `run`
with the same work, and `close()` kills it and everything it started. Its policy is reached through a
unix socket (the box has no network): a `ws+unix://` endpoint, whose folder is bound into the box — a
policy served by `BoxedPolicyServer`, say — or a class of a folder handed in `readable`.

Nothing the box does can fail the caller. A box that dies fails the episodes it held (BENCHMARK_CRASH:
nothing but the benchmark's code and the engine runs there), one stuck in a call past its limit where the
alarm cannot reach is killed (BENCHMARK_TIMEOUT), one that goes silent, or talks nonsense, is killed
(WORKER_LOST); the episodes not yet handed out go on in a new box. What a recording writes lands in the
box's scratch folder and is moved to the run's folder by this process, each file checked first.
"""

from __future__ import annotations

import base64
import contextlib
import json
import pickle
import queue
import shutil
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any, Final

from yardstick.engine.executors import Executor
from yardstick.engine.failures import Failed, FailureKind
from yardstick.engine.results import EpisodeResult, EpisodeSpec
from yardstick.engine.runtime import BUILD_TIMEOUT_S, BuildError, Work
from yardstick.hosted import inbox, sandbox
from yardstick.wire.address import UnixSocket, endpoint_from_ref

POLL_S: Final = 0.25
# How long past a call's own limit the box may stay in it before it is killed (the pool's grace).
HANG_GRACE_S: Final = 5.0
# A box beats every half second; this long without a word, it is frozen.
SILENCE_S: Final = 30.0
MAX_LINE: Final = 16 * 1024 * 1024
NO_NETWORK: Final = (
    "a boxed benchmark has no network: serve its policy on a unix socket (BoxedPolicyServer) and name it "
    "ws+unix:///path/to/policy.sock"
)


class _Lost(Exception):
    def __init__(self, reason: str, kind: FailureKind) -> None:
        super().__init__(reason)
        self.reason, self.kind = reason, kind


class _RunningBox:
    """One box and the lines it writes (read on a thread, so waiting for them can time out)."""

    def __init__(self, process: Any, scratch: Path, work: Work) -> None:
        self.process = process
        self.scratch = scratch
        self.work = work
        self.deadline = 0.0
        self.heard = time.monotonic()
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._log = sandbox.Tail(process.stderr)
        threading.Thread(target=self._read, args=(process.stdout,), daemon=True).start()

    def _read(self, stream: IO[bytes]) -> None:
        with contextlib.suppress(OSError, ValueError):
            while line := stream.readline(MAX_LINE):
                self._lines.put(line.decode("utf-8", "replace"))
        self._lines.put(None)

    def send(self, message: Mapping[str, Any]) -> None:
        try:
            assert self.process.stdin is not None
            self.process.stdin.write((json.dumps(message) + "\n").encode())
            self.process.stdin.flush()
        except (OSError, ValueError):
            raise _Lost(self.death(), FailureKind.BENCHMARK_CRASH) from None

    def receive(self, timeout: float) -> dict[str, Any] | None:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            return None
        if line is None:
            raise _Lost(self.death(), FailureKind.BENCHMARK_CRASH)
        self.heard = time.monotonic()
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict) or not message:
            raise _Lost(
                "the box playing it wrote something that is no message; it was killed",
                FailureKind.WORKER_LOST,
            )
        if "beat" in message:
            beat = message["beat"]
            self.deadline = float(beat) if isinstance(beat, int | float) else 0.0
        return message

    def watch(self, grace_s: float) -> None:
        """Raise _Lost when the box is stuck `grace_s` past a call's limit, or has gone silent."""
        now = time.monotonic()
        if self.deadline and now > self.deadline + grace_s:
            raise _Lost(
                "a benchmark or policy call ran past its limit and did not yield to the alarm; its box was "
                "killed",
                FailureKind.BENCHMARK_TIMEOUT,
            )
        if now - self.heard > SILENCE_S:
            raise _Lost(
                f"the box playing it said nothing for {SILENCE_S:g} s; it was killed", FailureKind.WORKER_LOST
            )

    def death(self) -> str:
        with contextlib.suppress(Exception):
            self.process.wait(timeout=2)
        code = self.process.returncode
        how = (
            "is still running but closed its channel"
            if code is None
            else f"was killed by signal {-code}"
            if code < 0
            else f"exited with status {code}"
        )
        said = self._log.last_line()
        return f"the box playing it {how}" + (f" ({said})" if said else "")

    def log(self) -> str:
        return self._log.text()

    def stop(self) -> None:
        sandbox.stop(self.process)
        shutil.rmtree(self.scratch, ignore_errors=True)


class BoxedExecutor:
    """Plays a hosted benchmark's episodes in a box of its own. `folder` is the benchmark's unpacked bundle
    (the import root); `env` the box's environment (secrets arrive so); `python` the interpreter of its
    prepared environment; `readable` more folders it may read (a policy's bundle, when the policy runs in
    the same box); `hidden` folders it must not see; `devices` device files it may use (a GPU's); `mounts`
    folders it reads at places of its own (its assets: (folder, place)); `hang_grace_s` how long past a call's
    limit a box stuck in it is given before it is killed."""

    name = "box"
    workers = 1

    def __init__(
        self,
        folder: Path,
        *,
        env: Mapping[str, str] | None = None,
        python: str | None = None,
        readable: Sequence[Path] = (),
        hidden: Sequence[Path] = (),
        devices: Sequence[Path] = (),
        mounts: Sequence[tuple[Path, str]] = (),
        start_timeout_s: float = BUILD_TIMEOUT_S,
        hang_grace_s: float = HANG_GRACE_S,
    ) -> None:
        self.folder = Path(folder).resolve()
        self.env = dict(env or {})
        self.python = python or sys.executable
        self.readable = tuple(Path(p).resolve() for p in readable)
        self.hidden = tuple(Path(p) for p in hidden)
        self.devices = tuple(Path(p) for p in devices)
        self.mounts = tuple((Path(folder), place) for folder, place in mounts)
        self.start_timeout_s = start_timeout_s
        self.hang_grace_s = hang_grace_s
        self.cold_starts: list[float] = []
        self._box: _RunningBox | None = None

    def __enter__(self) -> BoxedExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, work: Work, episodes: Sequence[EpisodeSpec]) -> Iterator[EpisodeResult]:
        """Play `episodes` of `work` in the box, yielding each result as its episode ends."""
        _sockets(work)  # a policy it cannot reach is refused before anything starts
        todo = deque(episodes)
        while todo:
            box = self._ready(work)
            held: dict[int, EpisodeSpec] = {}
            done = False
            try:
                box.send({"batch": True})
                while not done:
                    message = box.receive(POLL_S)
                    if message is None:
                        box.watch(self.hang_grace_s)
                    elif "want" in message:
                        if todo:
                            episode = todo.popleft()
                            held[episode.index] = episode
                            box.send({"episode": asdict(episode)})
                        else:
                            box.send({"end": True})
                    elif "result" in message:
                        result = _result(message["result"], held)
                        del held[result.index]
                        yield self._landed(result, box, work)
                    elif "batch_done" in message:
                        done = True
                    elif "beat" not in message:
                        raise _Lost(
                            "the box playing it said something out of turn; it was killed",
                            FailureKind.WORKER_LOST,
                        )
                    box.watch(self.hang_grace_s)
            except _Lost as lost:
                self._discard()
                failure = Failed(lost.reason, lost.kind)
                for index in sorted(held):
                    yield EpisodeResult.failed(held[index], failure)
            finally:
                if not done and self._box is box:
                    # Left mid-batch (the caller stopped): the box's runtime is in the middle of episodes.
                    self._discard()

    def close(self) -> None:
        """Kill the box and everything it started."""
        self._discard()

    def log(self) -> str:
        """The end of what the box printed (its stderr), for a person reading why it failed."""
        return self._box.log() if self._box is not None else ""

    def _ready(self, work: Work) -> _RunningBox:
        if self._box is not None and self._box.work == work and self._box.process.poll() is None:
            return self._box
        self._discard()
        scratch = Path(tempfile.mkdtemp(prefix="yardstick-play-"))
        boxed = work
        if work.recording is not None and work.recording.active:
            boxed = replace(work, recording=replace(work.recording, folder=str(scratch / "recording")))
        box = sandbox.Box(
            readable=(self.folder, *self.readable, *_sockets(work)),
            python=self.python,
            writable=(scratch,),
            hidden=self.hidden,
            devices=self.devices,
            env={**self.env, "PYTHONPATH": inbox.python_path(self.folder)},
            mounts=self.mounts,
        )
        spawned = time.monotonic()
        process = sandbox.start(
            box,
            [self.python, "-m", "yardstick.hosted.play_runner", str(self.folder)],
            stdin=sandbox.PIPE,
        )
        running = _RunningBox(process, scratch, work)
        self._box = running
        try:
            running.send({"work": base64.b64encode(pickle.dumps(boxed)).decode()})
            deadline = spawned + self.start_timeout_s
            while True:
                message = running.receive(POLL_S)
                if message is None:
                    if time.monotonic() > deadline:
                        raise _Lost(
                            f"the box did not build the run within {self.start_timeout_s:g} s",
                            FailureKind.WORKER_LOST,
                        )
                    continue
                if "ready" in message:
                    self.cold_starts.append(time.monotonic() - spawned)
                    running.heard = time.monotonic()
                    return running
                if "build_failed" in message:
                    kind = _kind(message.get("kind"), FailureKind.BENCHMARK_SETUP_CRASH)
                    raise BuildError(str(message["build_failed"]), kind)
        except _Lost as lost:
            self._discard()
            raise BuildError(f"a box could not build the run: {lost.reason}", lost.kind) from None
        except BaseException:
            self._discard()
            raise

    def _landed(self, result: EpisodeResult, box: _RunningBox, work: Work) -> EpisodeResult:
        """`result` with its recorded files moved from the box's scratch into the run's folder."""
        if not result.artifacts or work.recording is None or not work.recording.folder:
            return result
        source, target = box.scratch / "recording", Path(work.recording.folder)
        kept: list[str] = []
        problems: list[str] = []
        for relative in result.artifacts:
            moved = _move(source, target, relative)
            if moved is None:
                kept.append(relative)
            else:
                problems.append(moved)
        result.artifacts = kept
        if problems:
            result.recording_error = "\n".join([*(filter(None, [result.recording_error])), *problems])
        return result

    def _discard(self) -> None:
        box, self._box = self._box, None
        if box is not None:
            box.stop()


def _sockets(work: Work) -> tuple[Path, ...]:
    """The folders of the unix sockets `work`'s policy is reached on; ValueError for one the box cannot
    reach (it has no network)."""
    endpoint = endpoint_from_ref(work.policy.ref)
    if endpoint is None:
        return ()
    if not isinstance(endpoint.address, UnixSocket):
        raise ValueError(f"policy {endpoint.url}: {NO_NETWORK}")
    return (Path(str(endpoint.address.uds)).parent,)


def _kind(value: Any, default: FailureKind) -> FailureKind:
    try:
        return FailureKind(value)
    except ValueError:
        return default


def _result(data: Any, held: Mapping[int, EpisodeSpec]) -> EpisodeResult:
    """A result the box sent, when it is one of an episode it holds."""
    try:
        result = EpisodeResult.from_dict(data)
    except (TypeError, ValueError, KeyError):
        raise _Lost(
            "the box playing it sent a malformed result; it was killed", FailureKind.WORKER_LOST
        ) from None
    if not isinstance(result.index, int) or result.index not in held:
        raise _Lost(
            "the box playing it sent a result for an episode it was not playing", FailureKind.WORKER_LOST
        )
    spec = held[result.index]
    # What the episode was is the caller's word, not the box's.
    result.task, result.trial, result.seed, result.repeat = spec.task, spec.trial, spec.seed, spec.repeat
    return result


def _move(source: Path, target: Path, relative: str) -> str | None:
    """Move one recorded file out of a box's scratch; None when it moved, else what was wrong."""
    path = PurePosixPath(relative)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        return f"{relative}: a recorded file is named inside the recording's folder; dropped"
    origin = source.joinpath(*path.parts)
    # Every part a real folder or file, none a link the box made to something it should not hand out.
    if origin.resolve() != origin.absolute() or not origin.is_file() or origin.is_symlink():
        return f"{relative}: not a plain file of the recording; dropped"
    destination = target.joinpath(*path.parts)
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(origin), str(destination))
    return None


if TYPE_CHECKING:  # the engine's executor protocol, checked where it is kept
    _EXECUTOR: Executor = BoxedExecutor(Path())

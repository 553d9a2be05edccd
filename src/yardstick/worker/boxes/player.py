"""A hosted benchmark's episodes, played in a box: `BoxedExecutor`, an `engine.executors.Executor`.

The box (see `sandbox.py`) runs `play_runner`, which builds `engine.runtime.Runtime(work)` once and plays the
episodes handed to it, batch after batch: the box is kept warm between calls to `run` with the same work, and
`close()` kills it and everything it started. Its policy is reached through a unix socket (the box has no
network): a `ws+unix://` endpoint, whose folder is bound into the box — a policy served by
`BoxedPolicyServer`, say — or a class of a folder handed in `readable`.

Nothing the box does can fail the caller, and nothing it says is taken on its word. A box that dies fails the
episodes it held (BENCHMARK_CRASH: nothing but the benchmark's code and the engine runs there, so a box that
goes silent or talks nonsense is the benchmark's too); one past its memory limit says so; one stuck in a call
past its limit where the alarm cannot reach is killed (BENCHMARK_TIMEOUT), and so is one whose episode runs
past `episode_timeout_s` of wall time, kept here, whatever it says of itself; `cancel()` kills it at once. The
episodes not yet handed out go on in a new box. A recording is written in the box's own /tmp and its bytes
sent on the channel (`inbound.py`); what an episode was (task, trial, seed) is the caller's word, and its
robot time is its steps at the policy's rate as the platform knows it (`policy_hz`), not the box's figure.
"""

from __future__ import annotations

import base64
import contextlib
import json
import pickle
import queue
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

from yardstick.engine.executors import Executor
from yardstick.engine.failures import Failed, FailureKind, Party
from yardstick.engine.results import EpisodeResult, EpisodeSpec
from yardstick.engine.runtime import BUILD_TIMEOUT_S, BuildError, Work
from yardstick.hosted.limits import BoxLimits, size
from yardstick.wire.address import UnixSocket, endpoint_from_ref
from yardstick.worker.boxes import inbox, sandbox
from yardstick.worker.boxes.inbound import Abuse, Inbound

POLL_S: Final = 0.25
# How long past a call's own limit the box may stay in it before it is killed (the pool's grace).
HANG_GRACE_S: Final = 5.0
# A box beats every half second; this long without a word, it is frozen.
SILENCE_S: Final = 30.0
# How long one episode may take on the wall clock, from its handing out to its result, before its box dies.
EPISODE_TIMEOUT_S: Final = 1800.0
MAX_LINE: Final = 16 * 1024 * 1024
# Where a boxed run records: in the box's own scratch, which nothing outside it sees.
BOX_RECORDING: Final = str(sandbox.SCRATCH / "yardstick-recording")
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

    def __init__(
        self, process: sandbox.BoxProcess, work: Work, limits: BoxLimits, journal: sandbox.Journal
    ) -> None:
        self.process = process
        self.work = work
        self.limits = limits
        self.deadline = 0.0
        self.heard = time.monotonic()
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._log = sandbox.Tail(process.stderr, journal)
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
                FailureKind.BENCHMARK_CRASH,
            )
        if "beat" in message:
            beat = message["beat"]
            self.deadline = float(beat) if isinstance(beat, int | float) else 0.0
        return message

    def watch(self, grace_s: float, overdue: str | None = None) -> None:
        """Raise _Lost when an episode is `overdue` (its wall-clock deadline passed: what it is), the box is
        stuck `grace_s` past a call's limit, or has gone silent."""
        now = time.monotonic()
        if overdue is not None:
            raise _Lost(f"{overdue}; its box was killed", FailureKind.BENCHMARK_TIMEOUT)
        if self.deadline and now > self.deadline + grace_s:
            raise _Lost(
                "a benchmark or policy call ran past its limit and did not yield to the alarm; its box was "
                "killed",
                FailureKind.BENCHMARK_TIMEOUT,
            )
        if now - self.heard > SILENCE_S:
            raise _Lost(
                f"the box playing it said nothing for {SILENCE_S:g} s; it was killed",
                FailureKind.BENCHMARK_CRASH,
            )

    def death(self) -> str:
        with contextlib.suppress(Exception):
            self.process.wait(timeout=2)
        if self.process.out_of_memory():
            return (
                f"the box playing it passed its memory limit ({size(self.limits.memory_bytes)}) and "
                "was killed"
            )
        code = None if self.process.returncode is None else sandbox.exit_status(self.process.returncode)
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
        self.process.stop()


class BoxedExecutor:
    """Plays a hosted benchmark's episodes in a box of its own. `folder` is the benchmark's unpacked bundle
    (the import root); `env` the box's environment (secrets arrive so); `python` the interpreter of its
    prepared environment; `readable` more folders it may read (a policy's bundle, when the policy runs in
    the same box); `hidden` folders it must not see; `devices` device files it may use (a GPU's); `mounts`
    folders it reads at places of its own (its assets: (folder, place)); `hang_grace_s` how long past a call's
    limit a box stuck in it is given before it is killed; `episode_timeout_s` how long an episode may take on
    the wall clock; `policy_hz` the policy's rate as the platform knows it (robot time is steps at it;
    None: the box's figure stands, for a caller that runs its own code in the box); `limits` what the box
    may use; `root` the image's system it runs on (None: the machine's)."""

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
        episode_timeout_s: float = EPISODE_TIMEOUT_S,
        policy_hz: float | None = None,
        limits: BoxLimits | None = None,
        root: Path | None = None,
    ) -> None:
        self.folder = Path(folder).resolve()
        self.root = root
        self.env = dict(env or {})
        self.python = python or sys.executable
        self.readable = tuple(Path(p).resolve() for p in readable)
        self.hidden = tuple(Path(p) for p in hidden)
        self.devices = tuple(Path(p) for p in devices)
        self.mounts = tuple((Path(folder), place) for folder, place in mounts)
        self.start_timeout_s = start_timeout_s
        self.hang_grace_s = hang_grace_s
        self.episode_timeout_s = episode_timeout_s
        self.policy_hz = policy_hz
        self.limits = limits or BoxLimits()
        self.cold_starts: list[float] = []
        # What its boxes printed (the benchmark's code, fd 1 and 2 alike), across the boxes it makes.
        self.journal = sandbox.Journal()
        self._box: _RunningBox | None = None
        self._cancelled = threading.Event()

    def __enter__(self) -> BoxedExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, work: Work, episodes: Sequence[EpisodeSpec]) -> Iterator[EpisodeResult]:
        """Play `episodes` of `work` in the box, yielding each result as its episode ends. After `cancel()`,
        it kills the box and yields nothing more."""
        _sockets(work)  # a policy it cannot reach is refused before anything starts
        self._cancelled.clear()
        todo = deque(episodes)
        while todo and not self._cancelled.is_set():
            box = self._ready(work)
            held: dict[int, EpisodeSpec] = {}
            handed: dict[int, float] = {}
            inbound = _inbound(work)
            done = False
            try:
                box.send({"batch": True})
                while not done:
                    if self._cancelled.is_set():
                        self._discard()
                        return
                    message = box.receive(POLL_S)
                    if message is None:
                        box.watch(self.hang_grace_s, self._overdue(handed))
                    elif "want" in message:
                        if todo:
                            episode = todo.popleft()
                            held[episode.index] = episode
                            handed[episode.index] = time.monotonic()
                            box.send({"episode": asdict(episode)})
                        else:
                            box.send({"end": True})
                    elif "file" in message:
                        if inbound is None:
                            raise Abuse("files from a run that records nothing")
                        inbound.chunk(
                            message["file"], message.get("data"), bool(message.get("end")), set(held)
                        )
                    elif "result" in message:
                        result = self._result(message["result"], held)
                        del held[result.index], handed[result.index]
                        yield self._landed(result, inbound)
                    elif "batch_done" in message:
                        done = True
                    elif "beat" not in message:
                        raise _Lost(
                            "the box playing it said something out of turn; it was killed",
                            FailureKind.BENCHMARK_CRASH,
                        )
                    box.watch(self.hang_grace_s, self._overdue(handed))
            except (_Lost, Abuse) as lost:
                self._discard()
                if self._cancelled.is_set():
                    return  # the caller's run ended: the box was killed for it, not by what it played
                if isinstance(lost, Abuse):
                    lost = _Lost(
                        f"the box playing it sent files out of turn ({lost}); it was killed",
                        FailureKind.BENCHMARK_CRASH,
                    )
                failure = Failed(lost.reason, lost.kind)
                for index in sorted(held):
                    yield EpisodeResult.failed(held[index], failure)
            finally:
                if inbound is not None:
                    inbound.discard()
                if not done and self._box is box:
                    # Left mid-batch (the caller stopped): the box's runtime is in the middle of episodes.
                    self._discard()

    def cancel(self) -> None:
        """From any thread: kill the box now, and play nothing more of the batch in hand (its run ended)."""
        self._cancelled.set()
        box = self._box
        if box is not None:
            box.process.stop()

    def close(self) -> None:
        """Kill the box and everything it started."""
        self._discard()

    def log(self) -> str:
        """The end of what the box printed (its stderr), for a person reading why it failed."""
        return self._box.log() if self._box is not None else ""

    def _overdue(self, handed: Mapping[int, float]) -> str | None:
        """What is overdue, if an episode in play has run past its wall-clock deadline."""
        if not handed:
            return None
        index, since = min(handed.items(), key=lambda item: item[1])
        if time.monotonic() - since <= self.episode_timeout_s:
            return None
        return f"episode {index} ran past its {self.episode_timeout_s:g} s of wall-clock time"

    def _ready(self, work: Work) -> _RunningBox:
        if self._box is not None and self._box.work == work and self._box.process.poll() is None:
            return self._box
        self._discard()
        boxed = work
        if _records(work):
            assert work.recording is not None
            boxed = replace(work, recording=replace(work.recording, folder=BOX_RECORDING))
        box = sandbox.Box(
            readable=(self.folder, *self.readable, *_sockets(work)),
            python=self.python,
            hidden=self.hidden,
            devices=self.devices,
            env={**self.env, "PYTHONPATH": inbox.python_path(self.folder)},
            mounts=self.mounts,
            limits=self.limits,
            root=self.root,
        )
        spawned = time.monotonic()
        process = sandbox.start(
            box,
            [self.python, "-m", "yardstick.worker.boxes.play_runner", str(self.folder)],
            stdin=sandbox.PIPE,
        )
        running = _RunningBox(process, work, self.limits, self.journal)
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
                            FailureKind.BENCHMARK_SETUP_CRASH,
                        )
                    continue
                if "ready" in message:
                    self.cold_starts.append(time.monotonic() - spawned)
                    running.heard = time.monotonic()
                    return running
                if "build_failed" in message:
                    kind = _kind(message.get("kind"), FailureKind.BENCHMARK_SETUP_CRASH)
                    if kind.party is not Party.BENCHMARK and kind.party is not Party.POLICY:
                        kind = FailureKind.BENCHMARK_SETUP_CRASH  # a box blames no one but its code
                    raise BuildError(str(message["build_failed"]), kind)
        except _Lost as lost:
            self._discard()
            raise BuildError(f"a box could not build the run: {lost.reason}", lost.kind) from None
        except BaseException:
            self._discard()
            raise

    def _result(self, data: Any, held: Mapping[int, EpisodeSpec]) -> EpisodeResult:
        result = _result(data, held)
        if self.policy_hz:
            # Billing reads robot time: the platform's own arithmetic, on the policy's rate as it knows it.
            result.robot_seconds = result.steps / self.policy_hz
        if result.failure is not None and result.failure.party is Party.PLATFORM:
            # A box blames no one but the code in it: a "platform" failure it reports is its benchmark's.
            result.failure = FailureKind.BENCHMARK_CRASH
        return result

    def _landed(self, result: EpisodeResult, inbound: Inbound | None) -> EpisodeResult:
        """`result` with the recorded files it names kept where they arrived whole and sound."""
        if inbound is None:
            if result.artifacts:
                result.recording_error = _joined(
                    result.recording_error, "recorded files of a run that records none; dropped"
                )
            result.artifacts = []
            return result
        kept, problems = inbound.take(result.index, list(result.artifacts))
        result.artifacts = kept
        if problems:
            result.recording_error = _joined(result.recording_error, *problems)
        return result

    def _discard(self) -> None:
        box, self._box = self._box, None
        if box is not None:
            box.stop()


def _inbound(work: Work) -> Inbound | None:
    """Where a recording run's files arrive from the box (None: it records nothing)."""
    if work.recording is None or not work.recording.active or not work.recording.folder:
        return None
    return Inbound(Path(work.recording.folder))


def _records(work: Work) -> bool:
    return work.recording is not None and work.recording.active and bool(work.recording.folder)


def _joined(*lines: str | None) -> str:
    return "\n".join(line for line in lines if line)


def _sockets(work: Work) -> tuple[Path, ...]:
    """The unix socket `work`'s policy is reached on (bound into the box alone, not its folder); ValueError
    for a policy the box cannot reach (it has no network)."""
    endpoint = endpoint_from_ref(work.policy.ref)
    if endpoint is None:
        return ()
    if not isinstance(endpoint.address, UnixSocket):
        raise ValueError(f"policy {endpoint.url}: {NO_NETWORK}")
    return (Path(str(endpoint.address.uds)),)


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
            "the box playing it sent a malformed result; it was killed", FailureKind.BENCHMARK_CRASH
        ) from None
    if not isinstance(result.index, int) or result.index not in held:
        raise _Lost(
            "the box playing it sent a result for an episode it was not playing", FailureKind.BENCHMARK_CRASH
        )
    spec = held[result.index]
    # What the episode was is the caller's word, not the box's.
    result.task, result.trial, result.seed, result.repeat = spec.task, spec.trial, spec.seed, spec.repeat
    return result


if TYPE_CHECKING:  # the engine's executor protocol, checked where it is kept
    _EXECUTOR: Executor = BoxedExecutor(Path())

"""One policy built in this process and the one thread that calls it (the inference slot).

Policies are rarely thread-safe and a GPU runs one call at a time, so every call — on-episode hooks,
inferences, releases — goes through one queue to one thread. Requests that wait together are answered
together when the policy accepts batches: the slot takes what is queued, up to the largest batch the
policy accepts, waiting a few milliseconds after the first for others to arrive.
"""

from __future__ import annotations

import queue
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from yardstick.sdk.calls import InProcessPolicy, instantiate
from yardstick.sdk.decorators import policy_spec
from yardstick.sdk.episode import OBSERVES_EACH, Episode
from yardstick.sdk.specs import PolicySpec
from yardstick.wire import protocol as p

# How long the slot waits after a request for others to join its batch.
BATCH_WINDOW_S = 0.003
# A call this quick is made on the caller's own thread when nothing else is queued or running: handing it
# to the slot thread and back would cost more than the call (two thread switches, ~0.1 ms each).
INLINE_BELOW_MS = 2.0


class HostState(StrEnum):
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"


@dataclass
class Answer:
    """A chunk and what it cost: milliseconds queued behind other calls, and in the policy's call."""

    chunk: Any
    queued_ms: float
    infer_ms: float


@dataclass
class _Job:
    kind: str  # "start" | "infer" | "finish"
    episode: Episode
    future: Future[Any]
    observation: Any = None
    seed: int = 0
    queued_at: float = field(default_factory=time.perf_counter)


class PolicyHost:
    """Builds `cls` (in the slot thread, so a server answers health checks while a model loads) and
    serves calls to it. `model_id` names it in `/api/v1/models` and in session routes."""

    def __init__(
        self,
        cls: type,
        *,
        model_id: str,
        reference: str,
        params: dict[str, Any] | None = None,
    ) -> None:
        self.spec: PolicySpec = policy_spec(cls)
        # Whether the policy is handed a seed: one that is not gets none drawn for it (two SplitMix64 rounds
        # in Python, a few microseconds of every request).
        self.wants_seed = "seed" in self.spec.infer_keywords
        self.model_id = model_id
        self.reference = reference
        self.state = HostState.LOADING
        self.failure: str | None = None
        self._cls = cls
        self._params = dict(params or {})
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        # A job taken while gathering a batch that is not an inference: it is the next one called, before
        # anything queued after it (a session's start before that session's first inference).
        self._held: list[_Job | None] = []
        # `_busy` is held while the policy is called, by the slot thread or an inline caller; `_gate`
        # guards the count of jobs submitted and not yet done, which keeps each session's calls in order.
        self._busy = threading.Lock()
        self._gate = threading.Lock()
        self._pending = 0
        self._typical_ms = float("inf")  # measured on the slot before any call goes inline
        self._inline = not spec_batches(self.spec)
        self._ready = threading.Event()
        self._policy: InProcessPolicy | None = None
        self._thread = threading.Thread(target=self._run, name=f"policy-{model_id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wait_ready(self, timeout: float | None = None) -> bool:
        return self._ready.wait(timeout)

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)

    # What sessions ask of the policy; each answer arrives on the returned future. Calls are made in the
    # order asked, so a session's on-episode hook runs before its first inference.
    def begin(self, episode: Episode) -> Future[None]:
        return self._submit(_Job("start", episode, Future()))

    def infer(self, episode: Episode, observation: Any, seed: int) -> Future[Answer]:
        return self._submit(_Job("infer", episode, Future(), observation, seed))

    def release(self, episode: Episode) -> Future[None]:
        return self._submit(_Job("finish", episode, Future()))

    def infer_now(self, episode: Episode, observation: Any, seed: int) -> Answer | None:
        """The answer, computed on the caller's thread, when the policy is quick and nothing is queued or
        running; None when the caller must `infer` instead. Raises what the policy raises."""
        policy = self._policy
        with self._gate:
            if not (
                self._inline
                and self._pending == 0
                and self._typical_ms < INLINE_BELOW_MS
                and policy is not None
                and self._busy.acquire(blocking=False)
            ):
                return None
            self._pending += 1
        try:
            assert policy is not None
            started = time.perf_counter()
            [chunk] = policy.infer([observation], [episode], [seed])
            took = (time.perf_counter() - started) * 1000
            self._typical_ms = 0.8 * self._typical_ms + 0.2 * took
            episode.inferences += 1
            return Answer(chunk, 0.0, took)
        finally:
            with self._gate:
                self._pending -= 1
            self._busy.release()

    def _submit(self, job: _Job) -> Future[Any]:
        if self.state is HostState.FAILED:
            job.future.set_exception(RuntimeError(f"the policy could not be built: {self.failure}"))
            return job.future
        with self._gate:
            self._pending += 1
        self._queue.put(job)
        return job.future

    def meta(self) -> dict[str, Any]:
        spec = self.spec
        return {
            "id": self.model_id,
            "name": spec.name,
            "reference": self.reference,
            "state": self.state.value,
            **spec.fields(),
            # Whether its answers are asked for ahead and played after the chunk's rows (the engine's
            # PolicySpec.prefetch): a client that plays the chunks must know, or it plays another policy.
            "prefetch": spec.prefetch,
            "batch_sizes": list(spec.batch_sizes) if spec.batch_sizes else None,
            "session_params": spec.session_params,
            # Whether it takes each observation a robot makes, not only those it answers (`observed`).
            p.OBSERVES_EACH: bool(getattr(self._cls, OBSERVES_EACH, False)),
        }

    def _run(self) -> None:
        try:
            self._policy = InProcessPolicy(instantiate(self._cls, self.spec, params=self._params), self.spec)
            self.state = HostState.READY
        except Exception as exc:
            self.failure = "".join(traceback.format_exception_only(exc)).strip()
            self.state = HostState.FAILED
        finally:
            self._ready.set()
        while True:
            job = self._held.pop() if self._held else self._queue.get()
            if job is None:
                break
            if self._policy is None:
                job.future.set_exception(RuntimeError(f"the policy could not be built: {self.failure}"))
                continue
            jobs = [job, *self._batch_mates()] if job.kind == "infer" else [job]
            with self._busy:
                self._execute(jobs)
        if self._policy is not None:
            self._policy.close()

    def _batch_mates(self) -> list[_Job]:
        """Other inference requests queued now or within the window, up to the largest batch size. A
        policy without batches takes one at a time; anything else found meanwhile waits its turn."""
        sizes = self.spec.batch_sizes
        if not sizes or sizes[-1] < 2:
            return []
        mates: list[_Job] = []
        deadline = time.perf_counter() + BATCH_WINDOW_S
        while len(mates) < sizes[-1] - 1:
            try:
                job = self._queue.get(timeout=max(0.0, deadline - time.perf_counter()))
            except queue.Empty:
                break
            if job is None or job.kind != "infer":
                # Order matters for a session's own calls: the stranger is called next, before anything
                # queued after it, and the batch is answered with what was gathered.
                self._held.append(job)
                break
            mates.append(job)
        return mates

    def _execute(self, jobs: list[_Job]) -> None:
        """Call the policy for `jobs` (one, or a batch of inferences), holding `_busy`."""
        assert self._policy is not None
        try:
            if jobs[0].kind == "infer":
                self._infer(jobs)
            else:
                self._call(jobs[0], self._policy.start if jobs[0].kind == "start" else self._policy.finish)
        finally:
            with self._gate:
                self._pending -= len(jobs)

    def _infer(self, jobs: list[_Job]) -> None:
        assert self._policy is not None
        if len(jobs) > 1 and not self._policy.asks_together:
            # A policy that takes one observation a call answers each session by its own call, so one
            # that raises on one session's observation fails that session's episode alone.
            for job in jobs:
                self._infer([job])
            return
        started = time.perf_counter()
        try:
            chunks = self._policy.infer(
                [j.observation for j in jobs], [j.episode for j in jobs], [j.seed for j in jobs]
            )
        except Exception as exc:
            for job in jobs:
                job.future.set_exception(exc)
            return
        took = (time.perf_counter() - started) * 1000
        self._typical_ms = took if self._typical_ms == float("inf") else 0.8 * self._typical_ms + 0.2 * took
        for job, chunk in zip(jobs, chunks, strict=True):
            job.episode.inferences += 1
            job.future.set_result(Answer(chunk, (started - job.queued_at) * 1000, took))

    @staticmethod
    def _call(job: _Job, fn: Callable[[Episode], Any]) -> None:
        try:
            fn(job.episode)
        except Exception as exc:
            job.future.set_exception(exc)
        else:
            job.future.set_result(None)


def spec_batches(spec: PolicySpec) -> bool:
    return bool(spec.batch_sizes and spec.batch_sizes[-1] > 1)

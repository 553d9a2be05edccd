"""What one process builds to play episodes: the policy, then the benchmark's worlds (handed the policy's
declared fields), each built once and reused for every episode this process plays."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from yardstick.engine.failures import Failed, FailureKind
from yardstick.engine.guard import Beacon, Call, CallFailed, Guard
from yardstick.engine.loop import Playback, Rebuild, play
from yardstick.engine.recording import Recording
from yardstick.engine.results import EpisodeResult, EpisodeSpec
from yardstick.engine.worlds import ManyWorlds, SingleWorld, Worlds
from yardstick.sdk.calls import InProcessPolicy, PolicyDriver, instantiate
from yardstick.sdk.decorators import benchmark_spec, policy_spec
from yardstick.sdk.errors import AuthoringError, InstallIncomplete
from yardstick.sdk.load import load_object
from yardstick.sdk.specs import BenchmarkSpec, PolicySpec
from yardstick.wire.address import endpoint_from_ref

if TYPE_CHECKING:
    from yardstick.engine.remote import RemotePolicy
    from yardstick.wire.address import RemoteEndpoint

Kind = Literal["benchmark", "policy"]
# resolver(kind, reference, benchmark=...) -> class. A policy is resolved for the run's benchmark, whose
# built-in policies its aliases may mean (`-p random` on LIBERO is the random policy at LIBERO's rate).
Resolver = Callable[..., type]

# Building a model or a simulator may take long; a constructor that takes longer than this is stuck.
BUILD_TIMEOUT_S = 600.0
# How long an episode waits for a policy server that dropped to take a new session (a restart).
RECONNECT_S = 10.0


class BuildError(Failed):
    """The benchmark or the policy could not be built (a bad reference, a refused declaration, a constructor
    that raised, a policy server that refused the session): `kind` says which and how."""


@dataclass(frozen=True)
class Component:
    """A benchmark or policy by reference, with `params` laid over its constructor's keyword arguments."""

    ref: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Work:
    """Everything a process needs to play episodes of a run. Picklable: a pool sends it to each worker.
    `resolver` names the function ("module:function") that turns a reference into a class; the catalog's
    knows the built-in names."""

    benchmark: Component
    policy: Component
    playback: Playback = Playback()
    call_timeout_s: float | None = 60.0
    worlds: int | None = None
    resolver: str = "yardstick.catalog:resolve_to_play"
    # How long a remote policy's server may take to come up (to answer, then to be ready).
    startup_timeout_s: float = 60.0
    # What to record of each episode (videos, trajectories) and where; None records nothing.
    recording: Recording | None = None
    # How long a policy server may take over one answer (a deployment's own limit); None: most of the
    # call limit.
    reply_timeout_s: float | None = None


def class_of(work: Work, kind: Kind) -> type:
    """The class a run's benchmark or policy reference names (AuthoringError when it names none)."""
    resolver: Resolver = load_object(work.resolver)
    if kind == "benchmark":
        return resolver(kind, work.benchmark.ref)
    return resolver(kind, work.policy.ref, benchmark=work.benchmark.ref)


def _loaded(work: Work, kind: Kind) -> type:
    """`class_of`, with a reference that names nothing usable failing as that part's setup: a process that
    plays episodes reports it like any other failure to build."""
    try:
        return class_of(work, kind)
    except InstallIncomplete as exc:
        raise BuildError(str(exc), FailureKind.INSTALL_INCOMPLETE) from None
    except AuthoringError as exc:
        setup = FailureKind.POLICY_SETUP_CRASH if kind == "policy" else FailureKind.BENCHMARK_SETUP_CRASH
        raise BuildError(f"{kind} {getattr(work, kind).ref}: {exc}", setup) from None


def specs_of(work: Work) -> tuple[BenchmarkSpec, PolicySpec]:
    """The declarations a run is played under, read without building anything (a remote policy's are
    asked of its server)."""
    endpoint = endpoint_from_ref(work.policy.ref)
    if endpoint is not None:
        from yardstick.engine.remote import RemotePolicyError, probe_spec  # deferred: see Runtime._remote

        try:
            policy = probe_spec(endpoint, work.policy.params, startup_timeout=work.startup_timeout_s)
        except RemotePolicyError as exc:
            raise BuildError(exc.reason, exc.kind) from None
    else:
        policy = policy_spec(class_of(work, "policy"))
    return benchmark_spec(class_of(work, "benchmark")), policy


class Runtime:
    """A policy and a benchmark built in this process."""

    def __init__(self, work: Work, beacon: Beacon | None = None) -> None:
        started = time.perf_counter()
        self.work = work
        self.beacon = beacon
        self.policy: PolicyDriver = self._build_policy()
        self.policy_spec = self.policy.spec
        self._benchmark_cls = _loaded(work, "benchmark")
        self.benchmark_spec = benchmark_spec(self._benchmark_cls)
        self.worlds = self._build_worlds()
        self.cold_start_s = time.perf_counter() - started

    def _build_policy(self) -> PolicyDriver:
        work = self.work
        endpoint = endpoint_from_ref(work.policy.ref)
        if endpoint is not None:
            return self._remote(endpoint)
        cls = _loaded(work, "policy")
        spec = policy_spec(cls)
        return InProcessPolicy(self._build(cls, spec, work.policy), spec)

    def _remote(self, endpoint: RemoteEndpoint) -> RemotePolicy:
        # The wires' clients (websockets, grpc) are imported only by a run that dials one: a tenth of a
        # second of every process's start-up, a pool worker's included, that an in-process policy never uses.
        from yardstick.engine.remote import RemotePolicy, RemotePolicyError

        work = self.work
        # Its reply timeout sits inside the engine's call limit, so a silent server fails the episode
        # as a timeout of the wire, with the connection dropped, rather than as a cut call.
        limit = work.call_timeout_s or 60.0
        reply = work.reply_timeout_s if work.reply_timeout_s is not None else 0.9 * limit
        try:
            return RemotePolicy(
                endpoint,
                work.policy.params,
                reply_timeout=reply,
                startup_timeout=work.startup_timeout_s,
                reconnect_timeout=min(work.startup_timeout_s, RECONNECT_S),
            )
        except RemotePolicyError as exc:
            raise BuildError(exc.reason, exc.kind) from None

    def _build(
        self, cls: type, spec: BenchmarkSpec | PolicySpec, component: Component, *, worlds: int | None = None
    ) -> Any:
        is_policy = isinstance(spec, PolicySpec)
        policy_fields = None if is_policy else self.policy_spec.fields()
        setup = FailureKind.POLICY_SETUP_CRASH if is_policy else FailureKind.BENCHMARK_SETUP_CRASH
        with Guard(BUILD_TIMEOUT_S, self.beacon) as guard:
            try:
                return guard.call(
                    Call(f"{spec.name}'s constructor", setup, setup),
                    lambda: instantiate(
                        cls, spec, params=component.params, worlds=worlds, policy=policy_fields
                    ),
                )
            except CallFailed as failure:
                raise BuildError(failure.reason, failure.kind) from None

    def _build_worlds(self) -> Worlds:
        spec = self.benchmark_spec
        if spec.worlds is None:
            return SingleWorld(self._build(self._benchmark_cls, spec, self.work.benchmark), spec)
        size = min(self.work.worlds or spec.worlds, spec.worlds)
        return ManyWorlds(
            self._build(self._benchmark_cls, spec, self.work.benchmark, worlds=size), spec, size
        )

    def run(self, episodes: Iterable[EpisodeSpec]) -> Iterator[EpisodeResult]:
        """Play `episodes`, yielding each result as it ends. A benchmark that fails is built anew before
        the next episode, so one broken world costs one episode."""
        source = iter(episodes)
        with Guard(self.work.call_timeout_s, self.beacon) as guard:
            while True:
                try:
                    yield from play(
                        source,
                        self.worlds,
                        self.policy,
                        self.benchmark_spec,
                        guard,
                        self.work.playback,
                        self.work.recording,
                    )
                    return
                except Rebuild:
                    try:
                        self.worlds = self._build_worlds()
                    except BuildError as failure:
                        lost = Failed(f"the benchmark could not be rebuilt: {failure}", failure.kind)
                        for episode in source:
                            yield EpisodeResult.failed(episode, lost)
                        return

    def close(self) -> None:
        self.policy.close()

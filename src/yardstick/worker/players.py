"""What a worker plays a batch with, kept warm for the next batch of the same run: the engine's `Runtime` in
the worker's own process for the catalogue's benchmarks, a box (`hosted.player.BoxedExecutor`) for an org's
hosted benchmark, and for a hosted policy its server in a box of its own, reached over a unix socket.
Untrusted code never runs in the worker's process. Every box is held to the install's limits and hides its
folders; a boxed benchmark's robot time is reckoned here, from its steps and the policy's rate as the
platform knows it (the rate the policy's server told the platform, or its class declares)."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Final, Generic, Protocol, TypeVar
from urllib.parse import urlsplit

from yardstick.catalog import resolve_to_play
from yardstick.core.act_scaling import scaling_of
from yardstick.core.adapters import Adapters
from yardstick.core.hosting import VOLUMES_FIELD, Handed, Hosting, Located, mask
from yardstick.core.reach import Reach, Unreachable
from yardstick.core.refusals import Refusal
from yardstick.core.runs import EndpointTarget, hosted_version
from yardstick.core.secrets import Secrets
from yardstick.core.settings import Settings
from yardstick.core.signing import load_secret
from yardstick.core.volume_store import volume_store
from yardstick.core.volumes import Volumes
from yardstick.engine.failures import Failed, FailureKind
from yardstick.engine.guard import CallBeacon
from yardstick.engine.ray_executor import RayPlayer, connect, served_here  # Ray itself only when used
from yardstick.engine.recording import Recording
from yardstick.engine.remote import RemotePolicyError, probe_spec
from yardstick.engine.results import EpisodeResult, EpisodeSpec
from yardstick.engine.runtime import BuildError, Component, Runtime, Work
from yardstick.sdk.decorators import policy_spec
from yardstick.sdk.errors import AuthoringError
from yardstick.store.db import Database
from yardstick.store.models import ServedPolicy
from yardstick.store.states import TargetKind
from yardstick.wire.address import endpoint_from_ref, format_url
from yardstick.worker.boxes.adapter_server import BoxedAdapterServer
from yardstick.worker.boxes.containers import ContainerPolicyServer, Podman, install_podman
from yardstick.worker.boxes.image_cache import ImageCache
from yardstick.worker.boxes.player import BoxedExecutor
from yardstick.worker.boxes.sandbox import Journal
from yardstick.worker.boxes.server import BoxedPolicyServer
from yardstick.worker.ray_replicas import Replicas

KEPT = 2  # players (and, apart, policy servers) a worker keeps warm
# The failures a policy container killed by the kernel for its memory shows as, before it is named.
KILLED_LOOKS_LIKE: Final = frozenset(
    {FailureKind.SESSION_DROPPED, FailureKind.LATENCY_BUDGET, FailureKind.POLICY_TIMEOUT}
)


class Player(Protocol):
    def run(self, episodes: Iterable[EpisodeSpec]) -> Iterator[EpisodeResult]: ...

    def close(self) -> None: ...


class BoxedPlayer:
    """A hosted benchmark's episodes, played in its box."""

    def __init__(self, executor: BoxedExecutor, work: Work) -> None:
        self.executor = executor
        self.work = work

    def run(self, episodes: Iterable[EpisodeSpec]) -> Iterator[EpisodeResult]:
        yield from self.executor.run(self.work, list(episodes))

    def close(self) -> None:
        self.executor.close()

    def cancel(self) -> None:
        """From another thread: kill the box now (the run it plays ended)."""
        self.executor.cancel()


class Closable(Protocol):
    def close(self) -> None: ...


Kept = TypeVar("Kept", bound=Closable)


class Warm(Generic[Kept]):
    """The few players or policy servers a worker keeps warm between batches, by what they were built for
    and what their boxes were handed (`Handed.digest`, None for what runs in the worker's process). One
    handed other secrets since, or that no longer answers, is closed at once and built again; past `KEPT`,
    the least recently used is closed."""

    def __init__(self) -> None:
        self._kept: OrderedDict[str, tuple[Kept, str | None]] = OrderedDict()

    def take(
        self, key: str, handed: str | None, usable: Callable[[Kept], bool] = lambda kept: True
    ) -> Kept | None:
        found = self._kept.pop(key, None)
        if found is None:
            return None
        kept, was_handed = found
        if was_handed != handed or not usable(kept):
            kept.close()
            return None
        return kept

    def keep(self, key: str, kept: Kept, handed: str | None) -> None:
        self._kept[key] = (kept, handed)
        while len(self._kept) > KEPT:
            self._kept.popitem(last=False)[1][0].close()

    def all(self) -> list[Kept]:
        return [kept for kept, _ in self._kept.values()]

    def get(self, key: str) -> Kept | None:
        """What is kept under `key`, left kept."""
        found = self._kept.get(key)
        return found[0] if found is not None else None

    def forget(self, which: Kept) -> None:
        """Close `which` and build afresh next time."""
        for key, (kept, _) in list(self._kept.items()):
            if kept is which:
                del self._kept[key]
        which.close()

    def close(self) -> None:
        for kept, _ in self._kept.values():
            kept.close()
        self._kept.clear()


# The sides of a run's logs: what the benchmark's box printed, and the policy's.
BENCHMARK_SIDE: Final = "benchmark"
POLICY_SIDE: Final = "policy"


class Masking:
    """One endpoint's player as a run plays it: what the boxes behind it said (an episode's error, a
    recording's, the lines they printed) with the secrets they were handed written `***`, before the worker
    records any of it. `journals` are the boxes' printed lines by side (none for code played in process)."""

    def __init__(
        self,
        inner: Player,
        secrets: tuple[str, ...],
        journals: tuple[tuple[str, Journal], ...] = (),
        started: frozenset[int] = frozenset(),
        container: ContainerPolicyServer | None = None,
    ) -> None:
        self.inner = inner
        self.container = container  # the policy's container, whose death by its memory limit is named
        self.secrets = secrets
        self.journals = journals
        # What the boxes printed before this endpoint's batch began is no line of its, but for a box started
        # for it (`started`, by `id` of its journal): what that printed starting up is.
        self._marks = [0 if id(journal) in started else journal.mark() for _, journal in journals]

    def take_printed(self) -> list[tuple[float, str, str]]:
        """(time, side, line) of every line the boxes printed since the last take (since the batch began,
        the first time), secrets masked, by time."""
        lines = []
        for position, (side, journal) in enumerate(self.journals):
            read, self._marks[position] = journal.since(self._marks[position])
            lines += [(at, side, mask(text, self.secrets) or "") for at, text in read]
        return sorted(lines, key=lambda line: line[0])

    def run(self, episodes: Iterable[EpisodeSpec]) -> Iterator[EpisodeResult]:
        for result in self.inner.run(episodes):
            # Only a dropped or a silent session can be a container the kernel killed; other failures pay
            # no look. A silent one too: with no swap, a box at its memory limit first thrashes the pages of
            # its own program, and on a loaded machine the reply's budget can run out before the kill.
            suspect = result.failure in KILLED_LOOKS_LIKE
            if suspect and self.container is not None and self.container.oom_killed():
                # The session dropped because the kernel killed the container for its memory: say so.
                result = replace(
                    result,
                    failure=FailureKind.POLICY_OOM,
                    error=f"the policy image ran past its memory limit and was killed ({result.error})",
                )
            if self.secrets and (result.error or result.recording_error):
                result = replace(
                    result,
                    error=mask(result.error, self.secrets),
                    recording_error=mask(result.recording_error, self.secrets),
                )
            yield result

    def close(self) -> None:
        self.inner.close()


def _inner(player: Player | None) -> Player | None:
    """What plays behind the masking of an endpoint's player."""
    return player.inner if isinstance(player, Masking) else player


def played_on(player: Player, index: int) -> str | None:
    """The Ray node that played episode `index`, for a player on the cluster (None for any other)."""
    inner = _inner(player)
    return inner.nodes.get(index) if isinstance(inner, RayPlayer) else None


def boxed_player(player: Player | None) -> BoxedPlayer | None:
    """The boxed player behind `player`, or None for one the platform plays in its own process."""
    inner = _inner(player)
    return inner if isinstance(inner, BoxedPlayer) else None


def _version_of(target: EndpointTarget) -> int:
    """The hosted version a deployment's endpoint names."""
    try:
        return int(str(target.spec))
    except ValueError:
        raise BuildError(
            f"endpoint {target.name!r} names no hosted version ({target.spec!r})",
            FailureKind.POLICY_SETUP_CRASH,
        ) from None


def deployment_server(
    settings: Settings, located: Located, handed: Handed, sockets: Path, params: Mapping[str, Any]
) -> BoxedPolicyServer:
    """A deployment version's policy server, in its box as the install holds boxes (Failed when it does
    not serve)."""
    return BoxedPolicyServer(
        located.folder,
        located.handler_ref,
        handed.env,
        sockets,
        params=params,
        python=located.python or None,
        root=located.root,
        mounts=handed.mounted,
        hidden=settings.private_folders,
        limits=settings.box_limits,
    )


class Players:
    def __init__(
        self, settings: Settings, db: Database, *, call_timeout_s: float, beacon: CallBeacon | None = None
    ) -> None:
        self.db = db
        self.settings = settings
        self.beacon = beacon  # the worker's vigil watches the in-process engine's calls through it
        self.call_timeout_s = call_timeout_s
        secrets = Secrets(db, load_secret(settings.secret_file)) if settings.secret_file.exists() else None
        self.secrets = secrets
        volumes = Volumes(db, volume_store(settings))
        self.hosting = Hosting(db, settings.hosted_root, secrets, volumes) if secrets is not None else None
        self._players: Warm[Player] = Warm()
        self._servers: Warm[BoxedPolicyServer] = Warm()
        self._adapters: Warm[BoxedAdapterServer] = Warm()
        self._images: Warm[ContainerPolicyServer] = Warm()
        self._replicas: Warm[Replicas] = Warm()  # deployments served on the Ray cluster
        self._started: set[int] = set()  # the journals of the servers started for the endpoint in hand
        self.podman = _podman(settings) if Podman.available() else None
        self.images = _image_cache(settings, self.podman) if self.podman is not None else None
        self._adapter_files = Path(tempfile.mkdtemp(prefix="ys-adapters-"))
        self.adapters = Adapters(db)
        # Unix socket paths are short (~100 bytes): the servers' sockets live in a short folder of their own.
        self._sockets = Path(tempfile.mkdtemp(prefix="ys-sock-", dir="/tmp"))
        self._ray_connected = False  # this process connected to the Ray cluster (and leaves it on close)

    def player(
        self,
        benchmark: Component,
        target: EndpointTarget,
        recording: Recording | None,
    ) -> Masking:
        """The player of one endpoint of a run: built (or kept from an earlier batch) for its benchmark, with
        the endpoint's benchmark parameters laid over the run's, and its policy."""
        if target.benchmark_params:
            benchmark = Component(benchmark.ref, {**benchmark.params, **target.benchmark_params})
        if self._replicable(benchmark, target):
            return self._replicated(benchmark, target, recording)
        policy, policy_secrets, policy_journal = self._policy(target)
        # A hosted benchmark's box is handed its secrets as they are now (and a volume deleted since is
        # refused here): a warm box handed other secrets is closed and another made.
        version_id = hosted_version(benchmark.ref)
        located = handed = None
        if version_id is not None:
            located = self._located(version_id, FailureKind.BENCHMARK_SETUP_CRASH)
            handed = self._box_of(located, FailureKind.BENCHMARK_SETUP_CRASH)
        adapter_journal = None
        if target.adapter is not None:
            # The adapter runs in the benchmark's interpreter, in front of the policy: the benchmark
            # plays the adapter's server as its policy.
            adapted = self._adapted(target.adapter, policy, located.python if located is not None else None)
            policy, adapter_journal = Component(adapted.url), adapted.journal
        key = json.dumps(
            [benchmark.ref, benchmark.params, policy.ref, policy.params, repr(recording)],
            sort_keys=True,
            default=str,
        )
        digest = handed.digest if handed is not None else None
        found = self._players.take(key, digest)
        if found is None:
            found = self._build(benchmark, policy, recording, located, handed)
        self._players.keep(key, found, digest)
        journals = []
        if isinstance(found, BoxedPlayer):
            journals.append((BENCHMARK_SIDE, found.executor.journal))
        if adapter_journal is not None:  # the contract's adapter runs on the benchmark's side
            journals.append((BENCHMARK_SIDE, adapter_journal))
        if policy_journal is not None:
            journals.append((POLICY_SIDE, policy_journal))
        started, self._started = frozenset(self._started), set()
        return Masking(
            found,
            (*policy_secrets, *(handed.secrets if handed is not None else ())),
            tuple(journals),
            started,
            self._images.get(str(target.spec)) if target.kind == TargetKind.IMAGE else None,
        )

    def _build(
        self,
        benchmark: Component,
        policy: Component,
        recording: Recording | None,
        located: Located | None,
        handed: Handed | None,
    ) -> Player:
        if located is None or handed is None:
            work = Work(benchmark, policy, call_timeout_s=self.call_timeout_s, recording=recording)
            if self.settings.ray_address is not None:
                return self._on_ray(work)
            return Runtime(work, self.beacon)
        work = Work(
            Component(located.handler_ref, dict(benchmark.params)),
            policy,
            call_timeout_s=self.call_timeout_s,
            recording=recording,
        )
        executor = BoxedExecutor(
            located.folder,
            env=handed.env,
            python=located.python or None,
            root=located.root,
            mounts=handed.mounted,
            hidden=self.settings.private_folders,
            limits=self.settings.box_limits,
            episode_timeout_s=self.settings.episode_timeout_s,
            policy_hz=self._policy_hz(policy),
        )
        return BoxedPlayer(executor, work)

    def _replicable(self, benchmark: Component, target: EndpointTarget) -> bool:
        """Whether the endpoint is a deployment served as replicas on the Ray cluster: a worker on the
        cluster, a deployed policy with no adapter in front, a benchmark of the catalogue (an uploaded
        benchmark plays in its box on this machine, beside the deployment's server here)."""
        return (
            self.settings.ray_address is not None
            and target.kind == TargetKind.HOSTED
            and target.adapter is None
            and hosted_version(benchmark.ref) is None
        )

    def _replicated(
        self, benchmark: Component, target: EndpointTarget, recording: Recording | None
    ) -> Masking:
        """The deployment's replicas on the cluster (kept warm while what they were handed stands and all
        answer), and the run's actors spread over their nodes."""
        assert self.settings.ray_address is not None
        params = dict(target.params)
        version_id = _version_of(target)
        located = self._located(version_id, FailureKind.POLICY_SETUP_CRASH)
        handed = self._box_of(located, FailureKind.POLICY_SETUP_CRASH)
        self._ray_connected = connect(self.settings.ray_address) or self._ray_connected
        scaling = scaling_of(located.settings, located.checked)
        # Its scaling changed (`seq policy set`): another set of replicas.
        key = json.dumps([version_id, params, asdict(scaling)], sort_keys=True, default=str)
        replicas = self._replicas.take(key, handed.digest, lambda kept: kept.alive())
        fresh = replicas is None
        if replicas is None:
            replicas = Replicas(self.settings, located, params, scaling)
            replicas.start(handed)
        self._replicas.keep(key, replicas, handed.digest)
        placed = json.dumps(
            [benchmark.ref, benchmark.params, replicas.policies, repr(recording)], sort_keys=True, default=str
        )
        player = self._players.take(placed, handed.digest)
        if player is None:
            first = next(iter(replicas.policies.values()))[0]
            work = Work(benchmark, Component(first), call_timeout_s=self.call_timeout_s, recording=recording)
            # Every actor built before the first episode: the sessions spread over the replicas from it.
            player = self._on_ray(work, policies=replicas.policies, every=True)
        self._players.keep(placed, player, handed.digest)
        started = frozenset({id(replicas.journal)}) if fresh else frozenset()
        return Masking(player, handed.secrets, ((POLICY_SIDE, replicas.journal),), started)

    def _on_ray(
        self, work: Work, *, policies: Mapping[str, Sequence[str]] | None = None, every: bool = False
    ) -> RayPlayer:
        """The catalogue's benchmark played on the Ray cluster, its actors built before the first episode
        (one, or `every` one). Their policy is the work's, dialled from the node serving it when it is served
        here, or `policies` (node → the replicas' references there). One run's actors at a time take the
        cluster: those of another run kept warm go first (theirs would hold every CPU, and these never be
        placed)."""
        assert self.settings.ray_address is not None
        self._ray_connected = connect(self.settings.ray_address) or self._ray_connected
        self._end_ray_players()
        player = RayPlayer(
            work,
            here=policies is None and served_here(work.policy.ref),
            policies=policies,
            episode_timeout_s=self.settings.episode_timeout_s,
        )
        try:
            player.start(every=every)
        except BaseException:
            player.close()
            raise
        return player

    def _policy_hz(self, policy: Component) -> float:
        """The rate a boxed benchmark's policy plays at, as the platform knows it: the run's own `hz`, else
        what the policy's server told the platform (a deployment's, served here), else what its class
        declares (a policy the platform offers)."""
        override = policy.params.get("hz")
        if isinstance(override, int | float) and not isinstance(override, bool) and override > 0:
            return float(override)
        serving: list[BoxedPolicyServer | ContainerPolicyServer] = [
            *self._servers.all(),
            *self._adapters.all(),
            *self._images.all(),
        ]
        for server in serving:
            if server.url == policy.ref:
                return server.spec.hz
        try:
            endpoint = endpoint_from_ref(policy.ref)
            if endpoint is not None:
                return probe_spec(endpoint, policy.params, startup_timeout=10.0).hz
            return policy_spec(resolve_to_play("policy", policy.ref)).hz
        except (RemotePolicyError, AuthoringError, OSError, ValueError) as exc:
            raise BuildError(
                f"the policy {policy.ref} could not be asked its rate: {exc}", FailureKind.POLICY_SETUP_CRASH
            ) from None

    def _policy(self, target: EndpointTarget) -> tuple[Component, tuple[str, ...], Journal | None]:
        """The policy an endpoint reaches, the secrets its box was handed and what the box prints (a
        deployment's: none else)."""
        params = dict(target.params)
        if target.kind == TargetKind.SERVED:
            with self.db.reading() as session:
                served = session.get(ServedPolicy, target.spec)
            if served is None:
                raise BuildError(
                    f"the served policy {target.spec!r} is no longer offered", FailureKind.POLICY_SETUP_CRASH
                )
            return Component(served.reference, {**served.params, **params}), (), None
        if target.kind == TargetKind.IMAGE:
            image = self._image(target)
            return Component(image.ref, params), (), image.journal
        if target.kind == TargetKind.HOSTED:
            server, secrets = self._server(_version_of(target), params)
            return Component(server.url), secrets, server.journal
        assert target.address is not None  # a remote target names its address
        try:  # again at the dial: a name may resolve to this machine now
            Reach(self.settings.allow_remote).refuse(target.address, resolve=True)
        except Unreachable as refused:
            raise BuildError(
                f"the remote endpoint was not dialled: {refused}", FailureKind.SESSION_REFUSED
            ) from None
        return Component(format_url(target.wire, target.address), params), (), None

    def _server(
        self, version_id: int, params: Mapping[str, Any]
    ) -> tuple[BoxedPolicyServer, tuple[str, ...]]:
        """A deployment's policy server, kept warm while what it was handed stands (its secrets as they are
        now), and the secrets it was handed."""
        located = self._located(version_id, FailureKind.POLICY_SETUP_CRASH)
        handed = self._box_of(located, FailureKind.POLICY_SETUP_CRASH)
        key = json.dumps([version_id, params], sort_keys=True, default=str)
        found = self._servers.take(key, handed.digest, lambda server: server.alive())
        if found is None:
            try:
                found = deployment_server(self.settings, located, handed, self._sockets, params)
            except Failed as failed:
                raise BuildError(handed.masked(failed.reason), failed.kind) from None
        self._servers.keep(key, found, handed.digest)
        return found, handed.secrets

    def _adapted(
        self, adapter: Mapping[str, Any], policy: Component, python: str | None
    ) -> BoxedAdapterServer:
        """The adapter's server in front of `policy` (a deployment's server, on its unix socket), kept warm
        while that policy server stands."""
        setup = FailureKind.POLICY_SETUP_CRASH
        endpoint = endpoint_from_ref(policy.ref)
        if endpoint is None:
            raise BuildError("an adapter runs in front of a deployed policy's server", setup)
        found = self.adapters.by_id(int(adapter["version_id"]))
        if found is None:
            raise BuildError("the eval's adapter was removed: its version is no longer kept", setup)
        name, version = found
        params = dict(adapter.get("params") or {})
        key = json.dumps([version.id, params, policy.ref, python], sort_keys=True)
        server = self._adapters.take(key, None, lambda kept: kept.alive())
        if server is None:
            folder = self._adapter_files / str(version.id)
            file = folder / f"{version.handler_ref.partition(':')[0].rsplit('.', 1)[-1]}.py"
            folder.mkdir(exist_ok=True)
            file.write_text(version.source, encoding="utf-8")
            try:
                server = BoxedAdapterServer(
                    folder,
                    file.name,
                    version.class_name,
                    version.sha256,
                    f"{name}@v{version.number}",
                    endpoint,
                    {},
                    self._sockets,
                    params=params,
                    python=python,
                    hidden=self.settings.private_folders,
                    limits=self.settings.box_limits,
                )
            except Failed as failed:
                raise BuildError(failed.reason, failed.kind) from None
        self._adapters.keep(key, server, None)
        return server

    def _image(self, target: EndpointTarget) -> ContainerPolicyServer:
        """An image endpoint's container, pulled by its digest and kept warm while it answers."""
        setup = FailureKind.POLICY_SETUP_CRASH
        if self.podman is None:
            raise BuildError(
                "this worker runs no containers: podman and runc are not installed (make containers)",
                FailureKind.INSTALL_INCOMPLETE,
            )
        if target.spec is None or "@" not in target.spec:
            raise BuildError(f"endpoint {target.name!r} names no pinned image", setup)
        found = self._images.take(target.spec, None, lambda kept: kept.alive())
        if found is None:
            credential = None
            if target.credential is not None:
                if self.secrets is None:
                    raise BuildError(
                        "this worker cannot read the install's secret: the image's credential needs it", setup
                    )
                credential = self.secrets.unseal(target.credential)
            try:
                settings = self.settings
                pulled = self.podman.pull(target.spec, credential, deadline_s=settings.image_fetch_deadline_s)
                assert self.images is not None
                self.images.used(target.spec)
                if pulled:  # only a pull grows the store past its limit
                    self.images.collect()
                self.podman.check_unpacked(target.spec, settings.max_unpacked_image_bytes)
                found = ContainerPolicyServer(
                    self.podman,
                    target.spec,
                    self._sockets,
                    limits=settings.box_limits,
                    warmup_s=settings.image_warmup_deadline_s,
                )
                self._started.add(id(found.journal))
            except Failed as failed:
                raise BuildError(failed.reason, failed.kind) from None
        self._images.keep(target.spec, found, None)
        return found

    def _box_of(self, located: Located, setup: FailureKind) -> Handed:
        assert self.hosting is not None
        try:
            return self.hosting.box_of(located)
        except LookupError as gone:
            raise BuildError(f"{VOLUMES_FIELD[located.kind]}: {gone}", setup) from None

    def _located(self, version_id: int, setup: FailureKind) -> Located:
        if self.hosting is None:
            raise BuildError("this worker cannot read the install's secret: hosted code needs it", setup)
        try:
            return self.hosting.located(version_id)
        except Refusal as exc:
            raise BuildError(f"the hosted version {version_id} cannot be played: {exc}", setup) from None

    def forget(self, player: Player) -> None:
        """Close `player` and build afresh next time: it failed in a way that may have left it broken."""
        inner = _inner(player)
        assert inner is not None
        self._players.forget(inner)

    def rest(self) -> None:
        """The worker has nothing to play: stop and remove its policy containers (kept warm only while
        there is work, as each holds its memory; a run's container does not outlive the run's work), and
        end its actors on the Ray cluster (they hold the cluster's CPUs)."""
        self._images.close()
        self._end_ray_players()
        self._replicas.close()

    def _end_ray_players(self) -> None:
        for kept in self._players.all():
            if isinstance(kept, RayPlayer):
                self._players.forget(kept)

    def close(self) -> None:
        self._players.close()
        self._adapters.close()
        self._servers.close()
        self._images.close()
        self._replicas.close()
        if self.hosting is not None:
            self.hosting.close()
        shutil.rmtree(self._sockets, ignore_errors=True)
        shutil.rmtree(self._adapter_files, ignore_errors=True)
        if self._ray_connected:
            import ray

            ray.shutdown()


def _image_cache(settings: Settings, podman: Podman) -> ImageCache:
    hosts = [urlsplit(url).netloc for url in settings.registries]
    return ImageCache(podman, hosts, settings.image_cache_bytes)


def _podman(settings: Settings) -> Podman:
    """The install's container runtime, with the containers a dead worker left removed."""
    podman = install_podman(settings.data_dir, settings.registries)
    podman.sweep()
    return podman

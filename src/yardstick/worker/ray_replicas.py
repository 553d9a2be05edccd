"""A deployment served on the Ray cluster as replicas, for a platform worker started with `--executor ray`.

A replica is the deployment's own policy server in its box (`players.deployment_server`, what a worker starts
in its own process otherwise), started by a Ray actor on the node it serves and answering on a unix socket of
that node. The run's episode actors (`RayPlayer`) are spread over the replicas' nodes, each dialling a replica
on its own node; a replica batches the sessions of its node's actors as any policy server batches the
sessions it holds. Ray Serve was not used: its HTTP proxy sits in front of every call (users report it ten
times slower than plain FastAPI, ray#46693) and carried websockets only lately, where our wire is a session
of small messages; a replica here is a socket an actor on its node dials directly.

How many (`count`): the deployment's scaling (`core.act_scaling`, the contract's autoscaler): one replica for
every `seats_per_worker` episode actors the cluster can hold (its CPUs), at least `min_workers` (the
deploy's `min_containers`) and at most `max_workers` (`max_gpus`). They are spread one a node first (the
nodes with the most CPUs first), then doubled up in turn.

What a replica's box sees is what a worker's box sees: the deployment's build at the same path (the hosted
root on a folder every node shares, as a cluster's data folder is), its volumes, the install's limits. Its
secrets, and the install's settings (a database URL may hold a password), reach it in a method call
(`start`), never in the actor's constructor, whose arguments Ray keeps in its control store to restart the
actor. Ending a replica (`close`, or the actor's death: the box dies with its parent) ends its box.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from yardstick.core.act_scaling import Scaling
from yardstick.core.hosting import Handed, Located
from yardstick.core.settings import Settings
from yardstick.engine.failures import Failed, FailureKind
from yardstick.engine.guard import describe
from yardstick.engine.runtime import BuildError
from yardstick.worker.boxes.sandbox import Journal
from yardstick.worker.boxes.server import BoxedPolicyServer

__all__ = ["Replicas", "count"]

# A box starts in seconds idle; its interpreter, imports and the policy's own start on a loaded node, more.
START_WAIT_S: Final = 600.0
ASK_WAIT_S: Final = 30.0  # a replica asked what it printed, or whether it lives


def count(scaling: Scaling, cpus: int) -> int:
    """Replicas for a cluster of `cpus` CPUs (one episode actor each): one a `seats_per_worker` actors,
    within the deployment's minimum (at least one) and maximum."""
    wanted = -(-max(1, cpus) // scaling.seats_per_worker)
    return max(1, min(max(wanted, scaling.min_workers), scaling.max_workers))


class _Replica:
    """A Ray actor's body: the deployment's server in its box, on this actor's node."""

    def __init__(self, located: Located, params: Mapping[str, Any]) -> None:
        import ray

        self.node = ray.get_runtime_context().get_node_id()
        self._located, self._params = located, dict(params)
        # Unix socket paths are short (~100 bytes): a short folder of its own.
        self._sockets = Path(tempfile.mkdtemp(prefix="ys-sock-", dir="/tmp"))
        self._server: BoxedPolicyServer | None = None

    def start(self, settings: Settings, handed: Handed) -> tuple[str, str] | tuple[str, str, str]:
        """Start the box with what it is handed: (its url, this node), or (why it did not start, the failure's
        kind, "failed"), the secrets masked."""
        from yardstick.worker.players import deployment_server

        try:
            self._server = deployment_server(settings, self._located, handed, self._sockets, self._params)
        except Failed as failed:
            return handed.masked(failed.reason), failed.kind.value, "failed"
        except Exception as exc:  # anything else that broke the start: the policy's setup, said in a line
            said = handed.masked(describe("starting the policy's server", exc))
            return said, FailureKind.POLICY_SETUP_CRASH.value, "failed"
        return self._server.url, self.node

    def printed(self, mark: int) -> tuple[list[tuple[float, str]], int]:
        """What the box printed after `mark`, and the mark after it (the box's journal, read here)."""
        return self._server.journal.since(mark) if self._server is not None else ([], mark)

    def alive(self) -> bool:
        return self._server is not None and self._server.alive()

    def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        shutil.rmtree(self._sockets, ignore_errors=True)


class _Printed(Journal):
    """The replicas' journals as one: each read of it first brings over what they printed since the last."""

    def __init__(self, replicas: list[Any]) -> None:
        super().__init__()
        self._replicas = replicas
        self._theirs = [0] * len(replicas)

    def _bring(self) -> None:
        """Ask every replica at once, under one deadline; one that does not answer in time (gone with its
        node, or wedged) is asked again next time from where it was."""
        import ray

        asked = {
            replica.printed.remote(mark): at
            for at, (replica, mark) in enumerate(zip(self._replicas, self._theirs, strict=True))
        }
        answered, _ = ray.wait(list(asked), num_returns=len(asked), timeout=ASK_WAIT_S)
        for ref in answered:
            try:
                lines, mark = ray.get(ref)
            except ray.exceptions.RayError:
                continue  # a replica gone: what it printed went with it
            self._theirs[asked[ref]] = mark
            for at, text in lines:
                self.keep(at, text)

    def mark(self) -> int:
        self._bring()
        return super().mark()

    def since(self, mark: int) -> tuple[list[tuple[float, str]], int]:
        self._bring()
        return super().since(mark)


class Replicas:
    """One deployment's replicas on the cluster (this process connected to it), started by `start`.
    `policies` is what `RayPlayer` places its actors by: node → the replicas' urls there."""

    def __init__(
        self, settings: Settings, located: Located, params: Mapping[str, Any], scaling: Scaling
    ) -> None:
        import ray

        self.ray: Any = ray  # untyped where this code calls it
        self._settings, self._located, self._params, self._scaling = settings, located, params, scaling
        self._actors: list[Any] = []
        self.policies: dict[str, list[str]] = {}
        self.journal: Journal = Journal()

    def start(self, handed: Handed) -> None:
        """Place the replicas and start their boxes; BuildError (the policy's setup) when one does not
        start, every replica ended then."""
        try:
            nodes = sorted(
                (n for n in self.ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) >= 1),
                key=lambda n: (-int(n["Resources"]["CPU"]), n["NodeID"]),
            )
        except self.ray.exceptions.RayError as exc:
            raise BuildError(f"the Ray cluster did not say its nodes: {_line(exc)}", _SETUP) from None
        if not nodes:
            raise BuildError("the Ray cluster has no node with a CPU to serve the policy on", _SETUP)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        cpus = sum(int(n["Resources"]["CPU"]) for n in nodes)
        remote = self.ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)(_Replica)
        try:
            for index in range(count(self._scaling, cpus)):
                node = nodes[index % len(nodes)]["NodeID"]
                pinned = remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
                self._actors.append(pinned.remote(self._located, self._params))
            started = [actor.start.remote(self._settings, handed) for actor in self._actors]
            deadline = time.monotonic() + START_WAIT_S
            for answer in started:
                left = max(1.0, deadline - time.monotonic())
                try:
                    said = self.ray.get(answer, timeout=left)
                except self.ray.exceptions.GetTimeoutError:
                    raise BuildError(
                        f"a replica of the policy did not start within {START_WAIT_S:g} s", _SETUP
                    ) from None
                except self.ray.exceptions.RayError as exc:
                    lost = f"a replica of the policy was lost as it started: {handed.masked(_line(exc))}"
                    raise BuildError(lost, _SETUP) from None
                if len(said) == 3:
                    raise BuildError(str(said[0]), FailureKind(said[1]))
                url, node = said
                self.policies.setdefault(node, []).append(url)
        except BaseException:
            self.close()
            raise
        self.journal = _Printed(self._actors)

    def alive(self) -> bool:
        """Every replica's actor and box still up (one lost: the set is started anew for the next batch)."""
        try:
            answers = self.ray.get([actor.alive.remote() for actor in self._actors], timeout=ASK_WAIT_S)
        except (self.ray.exceptions.RayError, TimeoutError):
            return False
        return bool(answers) and all(answers)

    def close(self) -> None:
        """Stop every box, then end the actors (reaped by Ray)."""
        stopping = [actor.stop.remote() for actor in self._actors]
        # A replica gone already, or wedged: ending its actor ends its box with it (--die-with-parent).
        with contextlib.suppress(self.ray.exceptions.RayError, TimeoutError):
            self.ray.get(stopping, timeout=ASK_WAIT_S)
        for actor in self._actors:
            self.ray.kill(actor, no_restart=True)
        self._actors = []


_SETUP: Final = FailureKind.POLICY_SETUP_CRASH


def _line(exc: BaseException) -> str:
    """An error's first line (a Ray error carries the remote traceback after it)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

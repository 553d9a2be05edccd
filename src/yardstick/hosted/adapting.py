"""An org's adapter, served in a box between a benchmark and the policy it feeds.

The worker starts this in a box (`worker/boxes/adapter_server.py`) with the adapter's one file in its
folder, the policy's unix socket bound in, and a listening socket of its own. To the benchmark it is a policy
like any other, speaking the session protocol at the policy's own rate and chunking: each observation goes
through the adapter's `@seq.observation` method to the policy, each answer back through its `@seq.action`
method, whose list of actions is the chunk the benchmark plays, one a step. Episodes are sessions of the
policy's, one for each of the benchmark's; requests that arrive together reach the policy together, so a
policy that batches still does.

Before anything of the file runs, its sum is checked against the version's (the contract's sha256 of
`class_name + "\\n" + source`): a file that is not the registered one never runs. Either method raising ends
that episode alone, its reason naming the adapter, the method and what it raised.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from yardstick import sdk as ys
from yardstick.engine.remote import RemotePolicy
from yardstick.sdk.episode import Episode
from yardstick.wire.address import endpoint_from_ref

# The most requests answered in one batch: as many episodes as a benchmark plays at once, all sent to the
# policy before any answer is read.
MOST_BATCHED: Final = 64


class AdapterFailed(RuntimeError):
    """One of the adapter's methods raised, or answered what no benchmark can play."""


def source_sha256(class_name: str, source: str) -> str:
    """A version's sum, as the Sequences contract makes it: its class name and its file."""
    return hashlib.sha256(f"{class_name}\n{source}".encode()).hexdigest()


def load(file: Path, class_name: str, expected_sha256: str) -> type:
    """The adapter's class from `file`, once its sum is the registered version's."""
    source = file.read_text(encoding="utf-8")
    if source_sha256(class_name, source) != expected_sha256:
        raise AdapterFailed(f"{file.name} is not the registered version's file (its sha256 differs): not run")
    spec = importlib.util.spec_from_file_location(file.stem, file)
    if spec is None or spec.loader is None:
        raise AdapterFailed(f"{file.name} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[file.stem] = module
    spec.loader.exec_module(module)
    found = getattr(module, class_name, None)
    if not isinstance(found, type):
        raise AdapterFailed(f"{file.name} defines no class {class_name}")
    return found


class Conversions:
    """The adapter's two methods on one instance, each failure said with the adapter's name."""

    def __init__(self, label: str, instance: Any, observation: str, action: str) -> None:
        self.label = label
        self._observation_name, self._action_name = observation, action
        self._observation = getattr(instance, observation)
        self._action = getattr(instance, action)

    def to_policy(self, observation: Any) -> Any:
        try:
            return self._observation(observation)
        except Exception as exc:
            raise AdapterFailed(self._raised(self._observation_name, exc)) from None

    def to_benchmark(self, answer: Any) -> list[Any]:
        try:
            actions = self._action(answer)
        except Exception as exc:
            raise AdapterFailed(self._raised(self._action_name, exc)) from None
        try:
            rows = list(actions)
        except TypeError:
            rows = []
        if not rows:
            raise AdapterFailed(
                f"the adapter {self.label}'s {self._action_name} answered {type(actions).__name__}: it "
                "answers the actions the benchmark plays, a list with at least one, one a step"
            )
        return rows

    def _raised(self, method: str, exc: Exception) -> str:
        return f"the adapter {self.label}'s {method} raised {type(exc).__name__}: {exc}"


def adapted_policy(conversions: Conversions, inner: RemotePolicy) -> type:
    """A policy class that plays `inner` through `conversions`, declared at the inner policy's rate and
    chunking."""
    spec = inner.spec

    class Adapted:
        @ys.on_episode
        def begin(self, episode: Episode) -> None:
            inner.start(episode)

        @ys.infer
        def infer(
            self, observations: list[Any], *, episode: list[Episode], seed: list[int]
        ) -> list[list[Any]]:
            sent = [conversions.to_policy(observation) for observation in observations]
            answers = inner.infer(sent, list(episode), list(seed))
            return [conversions.to_benchmark(answer) for answer in answers]

        @ys.on_episode_end
        def end(self, episode: Episode) -> None:
            inner.finish(episode)

    return ys.policy(
        hz=spec.hz,
        action_chunk_len=spec.action_chunk_len,
        action_chunk_exec_len=spec.action_chunk_exec_len,
        batch_sizes=tuple(range(1, MOST_BATCHED + 1)),
        prefetch=spec.prefetch,
        name=f"{conversions.label} + {spec.name}",
    )(Adapted)


def main(argv: Sequence[str] | None = None) -> None:
    from yardstick.hosted.seq_api.adapter import registration
    from yardstick.wire.server.host import PolicyHost
    from yardstick.wire.server.serve import PolicyServer, ServeOptions

    parser = argparse.ArgumentParser(prog="adapting")
    parser.add_argument("--file", type=Path, required=True)
    parser.add_argument("--class-name", required=True)
    parser.add_argument("--sha256", required=True)
    parser.add_argument("--label", required=True)
    parser.add_argument("--params", default="{}")
    parser.add_argument("--inner", required=True)
    parser.add_argument("--uds-fd", type=int, required=True)
    args = parser.parse_args(argv)
    try:
        cls = load(args.file, args.class_name, args.sha256)
        found = registration(cls)
        conversions = Conversions(args.label, cls(**json.loads(args.params)), found.observation, found.action)
    except Exception as exc:
        print(f"the adapter {args.label} could not be built: {type(exc).__name__}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    endpoint = endpoint_from_ref(args.inner)
    if endpoint is None:
        raise SystemExit(f"--inner: {args.inner!r} is no policy's address")
    inner = RemotePolicy(endpoint, {}, reply_timeout=300.0)
    host = PolicyHost(adapted_policy(conversions, inner), model_id="adapted", reference=args.label)
    server = PolicyServer({"adapted": host}, ServeOptions(port=None, uds_fd=args.uds_fd)).start()
    try:
        server.wait()
    finally:
        server.stop()
        inner.close()

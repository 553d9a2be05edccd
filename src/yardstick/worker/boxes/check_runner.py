"""The build check, as it runs inside a box: `python -m yardstick.worker.boxes.check_runner KIND REF FOLDER`.

It imports the class (the folder its import root, Yardstick's `seq` importable), reads its declaration,
builds it as an eval would (a benchmark's constructor forms filled, a vectorized one handed its most worlds,
no policy evaluated: a keyword argument that is a policy field alone is left out), then for a benchmark
resets every task at its first seed and steps each once. It prints one JSON object on its own channel:
{status: ready | failed, error?, stage, declaration?, warnings, timing}.

The action a step is handed: zeros of the declared action space's shape (clipped into its bounds) when the
benchmark declares one; otherwise, as a Sequences benchmark never does, `DEFAULT_ACTION`, a float array of
one zero. A step that refuses a guessed action is a warning, not a failure: the platform cannot know what a
benchmark that declares no action space takes, and the contract's own check only resets.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Final

import numpy as np

from yardstick.engine.worlds import ManyWorlds, SingleWorld, Worlds
from yardstick.hosted import declaration
from yardstick.sdk.calls import instantiate
from yardstick.sdk.decorators import benchmark_spec, policy_spec
from yardstick.sdk.specs import BenchmarkSpec
from yardstick.wire import codec
from yardstick.worker.boxes import inbox

DEFAULT_ACTION: Final = np.zeros(1, dtype=np.float64)


class _Failed(Exception):
    def __init__(self, stage: str, reason: str) -> None:
        super().__init__(reason)
        self.stage, self.reason = stage, reason


def check(kind: str, handler_ref: str, folder: Path) -> dict[str, Any]:
    result: dict[str, Any] = {"status": "ready", "kind": kind, "handler_ref": handler_ref, "warnings": []}
    timing: dict[str, float] = {}
    result["timing"] = timing
    started = time.perf_counter()
    try:
        cls = _stage("import", f"importing {handler_ref}", folder, lambda: inbox.load_class(handler_ref))
        timing["import_s"] = time.perf_counter() - started
        read = declaration.benchmark if kind == "benchmark" else declaration.policy
        result["declaration"] = _stage(
            "declaration", f"reading {handler_ref}'s declaration", folder, lambda: read(cls)
        )
        began = time.perf_counter()
        if kind == "benchmark":
            _benchmark(cls, folder, result, timing)
        else:
            _policy(cls, folder, result)
        timing.setdefault("build_s", time.perf_counter() - began)
    except _Failed as failed:
        result.update(status="failed", stage=failed.stage, error=failed.reason)
    timing["total_s"] = time.perf_counter() - started
    return result


def _stage(stage: str, what: str, folder: Path, call: Any) -> Any:
    try:
        return call()
    except Exception as exc:
        raise _Failed(stage, inbox.said(what, exc, folder)) from None


def _benchmark(cls: type, folder: Path, result: dict[str, Any], timing: dict[str, float]) -> None:
    spec = benchmark_spec(cls)
    began = time.perf_counter()
    instance = _stage(
        "build", f"{spec.name}'s constructor", folder, lambda: instantiate(cls, spec, worlds=spec.worlds)
    )
    timing["build_s"] = time.perf_counter() - began
    worlds: Worlds = ManyWorlds(instance, spec, spec.worlds) if spec.worlds else SingleWorld(instance, spec)
    action, guessed = _action(spec)
    seed = spec.seeds[0]
    tasks = list(spec.tasks)
    began = time.perf_counter()
    for start in range(0, len(tasks), worlds.size):
        batch = tasks[start : start + worlds.size]
        slots = list(range(len(batch)))
        named = ", ".join(f"task {t!r}" for t in batch)
        observations = _stage(
            "reset",
            f"{spec.name}.{spec.reset_method}({named}, seed {seed})",
            folder,
            lambda b=batch, s=slots: worlds.reset(s, b, [seed] * len(b)),
        )
        for task, observation in zip(batch, observations, strict=True):
            _sendable(observation, task, result)
        try:
            outcomes = worlds.step(slots, [action] * len(batch))
            for task, outcome in zip(batch, outcomes, strict=True):
                _outcome(outcome, task)
        except Exception as exc:
            reason = inbox.said(f"{spec.name}.{spec.step_method}({named})", exc, folder)
            if not guessed:
                raise _Failed("step", reason) from None
            result["warnings"].append(
                f"{reason}, handed {action.tolist()!r}: it declares no action space, so the check guessed one"
            )
    timing["reset_step_s"] = time.perf_counter() - began
    close = getattr(instance, "close", None)
    if callable(close):
        _stage("close", f"{spec.name}.close()", folder, close)


def _policy(cls: type, folder: Path, result: dict[str, Any]) -> None:
    spec = policy_spec(cls)
    weights = result["declaration"]["deployment"].get("weights")
    try:
        instance = instantiate(cls, spec)
    except Exception as exc:
        reason = inbox.said(f"{spec.name}'s constructor", exc, folder)
        if weights is not None:
            reason += (
                f"; its weights= ({weights}) are mounted read-only at /data (each part at /data/<part>),"
                ' and the constructor is handed that folder as "{weights}"'
            )
        raise _Failed("build", reason) from None
    close = getattr(instance, "close", None)
    if callable(close):
        _stage("close", f"{spec.name}.close()", folder, close)


def _action(spec: BenchmarkSpec) -> tuple[np.ndarray, bool]:
    if spec.action_space is None:
        return DEFAULT_ACTION.copy(), True
    low, high = (np.asarray(bound, dtype=np.float64) for bound in spec.action_space)
    return np.clip(np.zeros_like(low), low, high), False


def _outcome(outcome: Any, task: str) -> None:
    if not (isinstance(outcome, tuple) and len(outcome) in (3, 4)):
        raise ValueError(
            f"task {task!r}: step returns (observation, done, success) or (observation, done, success, "
            f"metrics), not {type(outcome).__name__}"
        )
    if len(outcome) == 4 and outcome[3] is not None and not isinstance(outcome[3], dict):
        raise ValueError(f"task {task!r}: step's metrics are a dict, not {type(outcome[3]).__name__}")


def _sendable(observation: Any, task: str, result: dict[str, Any]) -> None:
    try:
        codec.encode(observation)
    except Exception as exc:
        result["warnings"].append(
            f"task {task!r}: its first observation cannot be sent to a policy over the wire ({exc})"
        )


def main(argv: list[str]) -> int:
    kind, handler_ref, folder = argv
    channel = inbox.private_channel()
    root = Path(folder)
    inbox.import_root(root)
    try:
        result = check(kind, handler_ref, root)
    except BaseException as exc:  # a SystemExit or worse from the user's code: still an answer
        result = {
            "status": "failed",
            "kind": kind,
            "handler_ref": handler_ref,
            "stage": "import",
            "error": inbox.said(f"checking {handler_ref}", exc, root),
            "warnings": [],
        }
    channel.write(json.dumps(result, default=repr) + "\n")
    channel.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

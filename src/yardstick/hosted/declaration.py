"""What a hosted class declares, read off the class as plain data (JSON) for the registry to keep.

A benchmark: its tasks {name: description}, seeds, each task's `max_seconds`, `worlds` (a vectorized one's
most worlds a call), the parameters an eval may set (its constructor's keyword arguments with a default that
`init=` leaves unfilled, with type, default and bounds), its constructor (init= and make=), its action
space when it declares one. A policy: its rate and the contract's chunk timing (`action_chunk_valid_len`,
`action_chunk_replan_at`), whether it prefetches, its batch sizes, its infer's parameters and its
constructor's. Both: what a `@seq.*` decorator was given for a deployment only (gpu, image, secrets, ...),
and which SDK wrote it ("seq" for Yardstick's seq, "yardstick" for `yardstick.sdk`).
"""

from __future__ import annotations

from typing import Any, Final

from yardstick.hosted.params import INFER_PLATFORM, constructor_params, keyword_params
from yardstick.hosted.seq_api.declarations import plain
from yardstick.sdk.decorators import benchmark_spec, policy_spec
from yardstick.sdk.specs import Constructor

SEQ: Final = "__seq__"


def benchmark(cls: type) -> dict[str, Any]:
    spec = benchmark_spec(cls)
    seq = cls.__dict__.get(SEQ)
    params = (
        dict(seq["params"])
        if seq
        else {
            name: p.to_dict()
            for name, p in constructor_params(
                cls, spec.constructor.args, spec.constructor.kwargs, f"benchmark {spec.name}"
            ).items()
        }
    )
    return {
        "sdk": "seq" if seq else "yardstick",
        "name": spec.name,
        "tasks": dict(spec.tasks),
        "seeds": list(spec.seeds),
        "max_seconds": {task: spec.limit(task) for task in spec.tasks},
        "worlds": spec.worlds,
        "params": params,
        "constructor": _constructor(spec.constructor),
        "action_space": [list(spec.action_space[0]), list(spec.action_space[1])]
        if spec.action_space
        else None,
        "deployment": dict(seq["deployment"]) if seq else {},
        # How its episodes are recorded in 3D, as Yardstick records them (None: it records none).
        "replay": spec.replay.model_dump(mode="json") if spec.replay is not None else None,
        # A planner (`@seq.planner`): its members, its cadence and the keys that wake it; None on a policy.
        "planner": dict(seq["planner"]) if seq and seq.get("planner") else None,
    }


def policy(cls: type) -> dict[str, Any]:
    spec = policy_spec(cls)
    seq = cls.__dict__.get(SEQ)
    owner = f"policy {spec.name}"
    infer = getattr(cls, spec.infer_method)
    params = (
        dict(seq["params"])
        if seq
        else {
            name: p.to_dict()
            for name, p in keyword_params(
                infer, f"{cls.__name__}.{spec.infer_method}", skip=INFER_PLATFORM, skip_first=True, loose=True
            ).items()
        }
    )
    init_params = constructor_params(cls, spec.constructor.args, spec.constructor.kwargs, owner)
    return {
        "sdk": "seq" if seq else "yardstick",
        "name": spec.name,
        "hz": spec.hz,
        # The contract's names for Yardstick's chunk lengths; unset where the seq policy left them unset.
        "action_chunk_valid_len": seq["action_chunk_valid_len"] if seq else spec.action_chunk_len,
        "action_chunk_replan_at": seq["action_chunk_replan_at"] if seq else spec.replan_every,
        "prefetch": spec.prefetch,
        "batch_sizes": list(spec.batch_sizes) if spec.batch_sizes else None,
        "params": params,
        "init_params": {name: p.to_dict() for name, p in init_params.items()},
        "constructor": _constructor(spec.constructor),
        "deployment": dict(seq["deployment"]) if seq else {},
        # A planner (`@seq.planner`): its members, its cadence and the keys that wake it; None on a policy.
        "planner": dict(seq["planner"]) if seq and seq.get("planner") else None,
    }


def _constructor(constructor: Constructor) -> dict[str, Any]:
    return {
        "args": plain(list(constructor.args)),
        "kwargs": plain(dict(constructor.kwargs)),
        "make": constructor.make,
    }

"""Yardstick's own `seq`: the authoring API of the Sequences SDK (`sequence-ai`), written from its
documented behaviour onto `yardstick.sdk`, so a file that does `import seq` runs on Yardstick with neither
sequence-ai nor sequence-base installed. A `@seq.benchmark` class is a Yardstick benchmark and a
`@seq.policy` class a Yardstick policy; what only the hosted platform needs is kept on the class (`__seq__`).

It is importable as `seq` when `yardstick/hosted/shim` is on the import path: Yardstick's loader puts it
there for a file reference, and the boxes that run uploaded code put it on PYTHONPATH. What the real SDK
offers beyond authoring — `seq.deploy`, `seq.eval`, listings — talks to a platform; here each says so.
"""

from __future__ import annotations

from typing import Any, Final

from yardstick.hosted.params import OneOf, Range
from yardstick.hosted.seq_api import replay
from yardstick.hosted.seq_api.adapter import adapter
from yardstick.hosted.seq_api.benchmark import benchmark
from yardstick.hosted.seq_api.declarations import Image, Replay, Secret, Timeouts, Volume, Weights
from yardstick.hosted.seq_api.errors import (
    AdapterDefinitionError,
    BenchmarkDefinitionError,
    GpuRenderError,
    PolicyDefinitionError,
    SeqAuthoringError,
)
from yardstick.hosted.seq_api.marks import (
    action,
    batched,
    check,
    concurrent,
    infer,
    load,
    observation,
    observe,
    on_episode,
    reset,
    sample,
    score,
    setup,
    shutdown,
    step,
    warmup,
)
from yardstick.hosted.seq_api.planner import plan, planner
from yardstick.hosted.seq_api.policy import Policy, policy
from yardstick.sdk.construct import config
from yardstick.sdk.episode import Episode

__all__ = [
    "AdapterDefinitionError",
    "BenchmarkDefinitionError",
    "Episode",
    "GpuRenderError",
    "Image",
    "OneOf",
    "Policy",
    "PolicyDefinitionError",
    "Range",
    "Replay",
    "Secret",
    "SeqAuthoringError",
    "Timeouts",
    "Volume",
    "Weights",
    "action",
    "adapter",
    "batched",
    "benchmark",
    "check",
    "concurrent",
    "config",
    "infer",
    "load",
    "observation",
    "observe",
    "on_episode",
    "plan",
    "planner",
    "policy",
    "replay",
    "reset",
    "sample",
    "score",
    "setup",
    "shutdown",
    "step",
    "warmup",
]

# Names the SDK held once, each refused saying what is written now.
GONE: Final = {
    "Condition": "an episode is a task at a seed: tasks={name: description}, seeds=[...], reset(task, seed)",
    "Conditions": "@seq.benchmark(tasks={name: description}, seeds=[...])",
    "Variant": "an episode is a task at a seed, and any variation is your env's own",
    "Step": "@seq.step returns (observation, done, success[, metrics])",
    "Record": "a benchmark declares no recording",
    "RenderSpec": "a benchmark declares no recording",
    "Benchmark": "@seq.benchmark goes on your class as it is",
    "EpisodeResult": "an eval's report gives each task's success rate",
    "Actions": "a policy says how its answers play: hz, action_chunk_valid_len, action_chunk_replan_at",
}
# The SDK's calls to a platform: Yardstick's seq authors classes; the real `seq` CLI talks to Yardstick.
PLATFORM_CALLS: Final = frozenset(
    {
        "deploy",
        "eval",
        "benchmarks",
        "benchmark_evals",
        "benchmark_tasks",
        "eval_episodes",
        "registration",
        "deployment_request",
        "benchmark_registration",
        "adapter_registration",
        "policy_set",
        "policy_settings",
        "robot_add",
        "robot_list",
        "robot_revoke",
        "team",
        "adapter_source",
        "gpu_usage",
        "prod_promote",
        "policy_fork",
        "collate",
        "uncollate",
    }
)


def __getattr__(name: str) -> Any:
    if name in GONE:
        raise AttributeError(f"seq.{name} is gone: {GONE[name]}")
    if name in PLATFORM_CALLS:
        raise AttributeError(
            f"seq.{name} talks to the Sequences platform, and this is Yardstick's seq, which runs your "
            "classes: use the `seq` CLI of sequence-ai (SEQUENCES_BASE_URL pointed at Yardstick) to deploy "
            "and evaluate"
        )
    raise AttributeError(f"module 'seq' has no attribute {name!r}")

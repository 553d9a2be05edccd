"""Authoring: declare benchmarks, policies and robot adapters, build them by their constructors, load them by
reference."""

from yardstick.sdk.construct import build, config, expand
from yardstick.sdk.decorators import (
    benchmark,
    benchmark_spec,
    concurrent,
    infer,
    on_episode,
    on_episode_end,
    policy,
    policy_spec,
    reset,
    step,
)
from yardstick.sdk.episode import Episode
from yardstick.sdk.errors import AuthoringError, ConstructError, LoadError, SpecError
from yardstick.sdk.load import load_object
from yardstick.sdk.robots import RobotSpec, robot, robot_spec
from yardstick.sdk.specs import POLICY_FIELDS, BenchmarkSpec, Constructor, PolicySpec
from yardstick.sdk.timing import timed

__all__ = [
    "POLICY_FIELDS",
    "AuthoringError",
    "BenchmarkSpec",
    "ConstructError",
    "Constructor",
    "Episode",
    "LoadError",
    "PolicySpec",
    "RobotSpec",
    "SpecError",
    "benchmark",
    "benchmark_spec",
    "build",
    "concurrent",
    "config",
    "expand",
    "infer",
    "load_object",
    "on_episode",
    "on_episode_end",
    "policy",
    "policy_spec",
    "reset",
    "robot",
    "robot_spec",
    "step",
    "timed",
]

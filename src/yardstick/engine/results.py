"""The unit of work (an episode to run) and what running it yields."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from yardstick.engine.failures import Failed, FailureKind, Party

# Which limit cut an episode the benchmark did not end: the task's own `max_seconds`, or the run's (its cap,
# or a limit it set in place of the task's).
Truncation = Literal["task", "cap"]


@dataclass(frozen=True, slots=True)
class EpisodeSpec:
    """One task at one seed. Trial k of a task runs seeds[k % len(seeds)]; `repeat` marks a trial whose seed
    an earlier trial of the same task already ran (the same episode again, for a deterministic pair).
    `limit_s` is the episode's limit on the robot's clock in place of the task's `max_seconds`, raised or
    lowered (a Sequences eval's `eval.max_seconds`); `cap_s` is the run's own cap on it: where it is tighter
    than that limit, the episode ends at it."""

    index: int
    task: str
    trial: int
    seed: int
    repeat: bool = False
    cap_s: float | None = None
    limit_s: float | None = None


@dataclass(slots=True)
class Timing:
    """Seconds an episode spent, by who spent them. `recording` is writing its videos and trajectory (0 when
    the run records nothing); `overhead` is the engine's own: the episode's wall time less the others."""

    simulation: float = 0.0
    rendering: float = 0.0
    policy: float = 0.0
    overhead: float = 0.0
    recording: float = 0.0

    def add(self, other: Timing) -> None:
        self.simulation += other.simulation
        self.rendering += other.rendering
        self.policy += other.policy
        self.overhead += other.overhead
        self.recording += other.recording


@dataclass(slots=True)
class EpisodeResult:
    """What one episode came to. `error` is None for an episode that finished (terminated by the benchmark,
    or truncated at a limit: `truncated_by` says which); otherwise it says why the episode failed,
    `failure` what kind of failure it was, and the other fields hold what was reached before. `artifacts`
    are the files a recording wrote (relative to the recording folder, e.g.
    `episodes/000003/image.corner.mp4`); `recording_error` says what of the recording failed, a line a
    problem, if anything did: it never fails the episode."""

    index: int
    task: str
    trial: int
    seed: int
    repeat: bool
    success: bool = False
    terminated: bool = False
    truncated: bool = False
    steps: int = 0
    robot_seconds: float = 0.0
    inferences: int = 0
    metrics: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    failure: FailureKind | None = None
    truncated_by: Truncation | None = None
    wall_seconds: float = 0.0
    timing: Timing = field(default_factory=Timing)
    artifacts: list[str] = field(default_factory=list)
    recording_error: str | None = None

    @classmethod
    def failed(cls, spec: EpisodeSpec, failure: Failed) -> EpisodeResult:
        return cls(
            index=spec.index,
            task=spec.task,
            trial=spec.trial,
            seed=spec.seed,
            repeat=spec.repeat,
            error=failure.reason,
            failure=failure.kind,
        )

    @property
    def finished(self) -> bool:
        return self.error is None

    @property
    def fault(self) -> Party | None:
        """Whose fault a failed episode is."""
        return self.failure.party if self.failure is not None else None

    def outcome(self) -> dict[str, Any]:
        """The fields a rerun must reproduce exactly: no timing, nothing of the recording."""
        return {
            "index": self.index,
            "task": self.task,
            "trial": self.trial,
            "seed": self.seed,
            "repeat": self.repeat,
            "success": self.success,
            "terminated": self.terminated,
            "truncated": self.truncated,
            "steps": self.steps,
            "robot_seconds": self.robot_seconds,
            "inferences": self.inferences,
            "metrics": dict(self.metrics),
            "error": self.error,
            "failure": self.failure,
            "truncated_by": self.truncated_by,
        }

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EpisodeResult:
        values = dict(data)
        values["timing"] = Timing(**values.get("timing", {}))
        values["artifacts"] = list(values.get("artifacts", []))
        if values.get("failure") is not None:
            values["failure"] = FailureKind(values["failure"])
        return cls(**values)

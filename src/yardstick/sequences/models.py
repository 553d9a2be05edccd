"""The Sequences contract's bodies, as the real SDK (`sequence-ai` 0.51.5) sends and reads them, written here
from the documented facts (field names, bounds, rules): `sequence-base`, which defines them upstream, carries
no licence, so no code of it is used or imported.

Requests forbid fields they do not define (a misspelt field is refused by name, as the platform's own models
do). Answers the SDK validates strictly (`BenchmarkStatusResponse`, `DeploymentStatusResponse`) carry exactly
their fields; the `EvalReport` may carry more (the SDK prunes what it does not know), and ours does: the
intervals and the mean of task means, under `yardstick`."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from yardstick.store.models import HostedVersion
from yardstick.store.states import BuildStatus

TASK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:-]{0,127}")
TASK_DESCRIPTION_MAX = 300
NAME = r"^[a-z0-9][a-z0-9-]{0,62}$"  # a benchmark's or a deployment's name
MAX_ENVS = 65536
MAX_TRIALS = 100_000
Scalar = int | float | bool | str

_REQUEST = ConfigDict(extra="forbid")


class ErrorBody(BaseModel):
    """Every refusal: `code` for a program, `detail` for a person (it names the field and the rule)."""

    detail: str
    code: str
    retryable: bool
    retry_after_s: float | None = None
    request_id: str | None = None
    hint: str | None = None
    details: dict[str, Any] | None = None


# --- code and images --------------------------------------------------------------------------------------


class CodeBundle(BaseModel):
    """The deployed folder: a gzip tar, base64, with the sha256 of the decoded bytes (checked on arrival)."""

    model_config = _REQUEST
    format: Literal["tar.gz"] = "tar.gz"
    data: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class ImageSpec(BaseModel):
    """What the code runs on: a base (the default `debian:12-slim`), steps laid over it, a Python. Each step
    is one kind of instruction (`uv_pip_install`, `apt_install`, `env`, `run_commands`, `add_local`,
    `template_files`, `project`); which are honoured is the platform's to say."""

    model_config = _REQUEST
    base: str | None = None
    dockerfile: str | None = None
    steps: list[dict[str, Any]] = Field(default_factory=list, max_length=64)
    python: str | None = Field(default=None, pattern=r"^(3\.(11|12|13)|image)$")
    clear_entrypoint: bool | None = None

    @model_validator(mode="after")
    def _one_source(self) -> ImageSpec:
        if self.base is not None and self.dockerfile is not None:
            raise ValueError("image: a base or a dockerfile, not both")
        for position, step in enumerate(self.steps):
            if len(step) != 1:
                raise ValueError(f"image.steps[{position}]: one instruction a step, not {sorted(step)}")
        return self


class VolumeRef(BaseModel):
    model_config = _REQUEST
    uri: str = Field(max_length=512)
    mount: str | None = Field(default=None, max_length=512)


class SecretRef(BaseModel):
    model_config = _REQUEST
    name: str = Field(max_length=64)


class InferParam(BaseModel):
    """A parameter a benchmark's constructor or a policy's infer declares: its type, default and bounds."""

    model_config = _REQUEST
    type: Literal["int", "float", "bool", "str"]
    default: Scalar | None = None
    min: int | float | None = None
    max: int | float | None = None
    choices: list[Scalar] | None = Field(default=None, min_length=1, max_length=64)

    @model_validator(mode="after")
    def _bounds(self) -> InferParam:
        if (self.min is not None or self.max is not None) and self.type not in ("int", "float"):
            raise ValueError(f"min / max bound a number; a {self.type} parameter takes choices instead")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        return self


def _check_params(params: dict[str, InferParam] | None) -> None:
    for name in params or {}:
        if not name.isidentifier() or name.startswith("_"):
            raise ValueError(f"parameter {name!r} is not a public Python identifier")


class ReplaySpec(BaseModel):
    model_config = _REQUEST
    engine: Literal["mujoco", "sapien", "isaac", "own"] | None = None
    state: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    looks: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")


# --- benchmarks --------------------------------------------------------------------------------------------


class BenchmarkRegisterRequest(BaseModel):
    """`POST /v1/benchmarks` (and `/validate`): the declaration, the code, the parameters its constructor
    leaves open. The platform learns the reset and step methods, and what `init=` says, by importing the
    code."""

    model_config = _REQUEST
    name: str = Field(pattern=NAME)
    image: ImageSpec
    tasks: dict[str, str]
    seeds: list[int]
    max_seconds: float | dict[str, float]
    handler_ref: str = Field(max_length=300)
    worlds: int | None = Field(default=None, ge=1, le=MAX_ENVS)
    assets: list[VolumeRef] = Field(default_factory=list, max_length=16)
    replay: ReplaySpec | None = None
    cpu: int | None = None
    memory_gb: int | None = None
    code: CodeBundle | None = None
    freeze: bool | None = None
    secrets: list[SecretRef] = Field(default_factory=list, max_length=32)
    gpu: str | None = Field(default=None, max_length=32)
    driver: str | None = Field(default=None, pattern=r"^[0-9]{3}$")
    params: dict[str, InferParam] | None = Field(default=None, max_length=32)
    image_context: CodeBundle | None = None
    engine: str | None = Field(default=None, max_length=32)

    @model_validator(mode="after")
    def _declaration(self) -> BenchmarkRegisterRequest:
        if not self.tasks:
            raise ValueError("tasks names at least one task: {name: description}")
        for task, text in self.tasks.items():
            if not TASK_NAME.fullmatch(task):
                raise ValueError(
                    f"task {task!r}: 1-128 letters, digits, '.', '_', '/', ':' or '-',"
                    " starting with a letter or a digit"
                )
            if len(text) > TASK_DESCRIPTION_MAX:
                raise ValueError(f"tasks[{task!r}] is {len(text)} characters: at most {TASK_DESCRIPTION_MAX}")
        if not self.seeds:
            raise ValueError("seeds names at least one seed")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError("seeds names each seed once")
        limits = self.max_seconds if isinstance(self.max_seconds, dict) else {"": self.max_seconds}
        for task, limit in limits.items():
            if task and task not in self.tasks:
                raise ValueError(f"max_seconds names {task!r}, which is not one of its tasks")
            if not limit > 0:
                raise ValueError(f"max_seconds{'[' + repr(task) + ']' if task else ''} must be above 0 s")
        if ":" not in self.handler_ref:
            raise ValueError(
                f"handler_ref {self.handler_ref!r}: module:Class, the module's path in the folder"
            )
        _check_params(self.params)
        return self


class BenchmarkStatusResponse(BaseModel):
    """Exactly these fields: the SDK refuses any other. `error` beginning `canceled: ` reads as canceled."""

    name: str
    status: Literal["building", "ready", "failed"]
    error: str | None = None


class BenchmarkValidateResponse(BaseModel):
    """What a registration would do, changing nothing: a new benchmark, a new version, the same code again, or
    (with `replace`) a version in place."""

    ok: bool
    name: str
    state: Literal["new", "version", "same", "replace"]
    version: int
    contract: str


# --- deployments -------------------------------------------------------------------------------------------


class Resources(BaseModel):
    model_config = _REQUEST
    gpu: list[str]
    cpu: float | None = Field(default=None, ge=0.125, le=64)
    cpu_limit: float | None = Field(default=None, ge=0.125, le=128)
    memory_gb: float | None = Field(default=None, ge=0.125, le=1024)
    memory_limit_gb: float | None = Field(default=None, ge=0.125, le=1024)
    region: str | None = Field(default=None, max_length=32)


class Autoscaler(BaseModel):
    model_config = _REQUEST
    min_containers: int = 0
    max_gpus: int | None = Field(default=None, ge=1, le=256)
    buffer_containers: int | None = None


class Timeouts(BaseModel):
    model_config = _REQUEST
    request: int = Field(ge=1, le=3600)
    startup: int = Field(ge=60, le=18000)
    episode_idle: int | None = Field(default=None, ge=10, le=86400)


class Concurrency(BaseModel):
    model_config = _REQUEST
    sizes: list[int] | None = Field(default=None, min_length=1, max_length=256)
    max_concurrent: int | None = Field(default=None, ge=2, le=256)
    max_inputs: int | None = Field(default=None, ge=1, le=1024)
    target_inputs: int | None = Field(default=None, ge=1, le=1024)
    replicas_per_gpu: int | None = Field(default=None, ge=1, le=64)
    gpus_per_replica: int | None = Field(default=None, ge=1, le=256)
    replica_start: Literal["together", "one_by_one"] | None = None


class VolumeMount(BaseModel):
    model_config = _REQUEST
    uri: str = Field(max_length=512)
    mount: str = Field(max_length=512)


class DeploymentPolicy(BaseModel):
    """How the deployed policy plays: its rate, the rows of an answer that are valid, the step (counted from
    when its act is sent) at which the next answer is asked for."""

    model_config = _REQUEST
    handler_ref: str = Field(max_length=300)
    hz: float | None = Field(default=None, gt=0, le=1000)
    action_chunk_valid_len: int | None = Field(default=None, ge=1, le=100_000)
    action_chunk_replan_at: int | None = Field(default=None, ge=1, le=100_000)
    # Whether each session keeps its own episode state ("own": `@seq.reset`, `@seq.on_episode`, `episode=`) or
    # its infer is shared across sessions ("shared"), as the SDK declares it.
    episodes: Literal["shared", "own"] | None = None
    secrets: list[SecretRef] = Field(default_factory=list, max_length=32)
    io: str | None = Field(default=None, max_length=4000)
    family: str | None = Field(default=None, max_length=64)
    params: dict[str, InferParam] | None = Field(default=None, max_length=32)
    models: list[str] | None = Field(default=None, max_length=16)
    plan_every_s: float | None = Field(default=None, gt=0)
    tensors: dict[str, Any] | None = None
    planner: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _chunk(self) -> DeploymentPolicy:
        valid, replan = self.action_chunk_valid_len, self.action_chunk_replan_at
        if valid is not None and replan is not None and replan > valid:
            raise ValueError(
                f"action_chunk_replan_at {replan} is more than action_chunk_valid_len {valid}:"
                " the next answer is needed no later than this one's valid steps run out"
            )
        if ":" not in self.handler_ref:
            raise ValueError(f"policy.handler_ref {self.handler_ref!r}: module:Class")
        _check_params(self.params)
        return self


class DeploymentRequest(BaseModel):
    model_config = _REQUEST
    name: str = Field(pattern=NAME)
    image: ImageSpec
    weights: VolumeMount | None = None
    resources: Resources
    policy: DeploymentPolicy
    code: CodeBundle | None = None
    image_context: CodeBundle | None = None
    autoscaler: Autoscaler = Field(default_factory=Autoscaler)
    concurrency: Concurrency = Field(default_factory=Concurrency)
    timeouts: Timeouts | None = None
    weights_name: str | None = Field(default=None, max_length=200)
    extra_weights: dict[str, VolumeMount] | None = None
    freeze: bool | None = None


class DeploymentAccepted(BaseModel):
    deployment_id: str
    status: Literal["building"] = "building"


class DeploymentStatusResponse(BaseModel):
    """Exactly these fields, and a status of the contract's three: the SDK reads anything else as a malformed
    status. A stopped deployment is `ready` here (its build is); `seq policy ls` shows it stopped."""

    status: Literal["building", "ready", "failed"]
    model: str
    error: str | None = None
    reason: Literal["gpu_out_of_memory", "host_out_of_memory", "crashed"] | None = None


# --- evals -------------------------------------------------------------------------------------------------


class EvalRequest(BaseModel):
    """`POST /v1/eval`: a policy (`model`) on a benchmark, which tasks, how many trials a task (a count, or
    `{task: n, "*": n}`), which seeds (a list, or per task), parameters (`benchmark.x`, `policy.x`), a sweep
    of policy parameters into arms, reruns, a dry run. Trial k of a task runs `seeds[k % len(seeds)]`."""

    model_config = _REQUEST
    model: str | None = Field(default=None, max_length=200)
    benchmark: str | None = Field(default=None, max_length=200)
    trials: int | dict[str, int] | None = None
    seeds: list[int] | dict[str, list[int]] | None = None
    policy_machines: int | None = Field(default=None, ge=1, le=64)
    policy_gpu: str | None = Field(default=None, max_length=32)
    benchmark_machines: int | None = Field(default=None, ge=1, le=64)
    adapter: str | None = Field(default=None, max_length=200)
    sweep: dict[str, list[Scalar]] | None = Field(default=None, max_length=8)
    dry_run: bool = False
    tasks: list[str] | None = Field(default=None, max_length=1000)
    spend_cap_usd: float | None = Field(default=None, gt=0, le=1_000_000)
    rerun_of: str | None = Field(default=None, max_length=64)
    rerun_unsuccessful_of: str | None = Field(default=None, max_length=64)
    params: dict[str, Scalar] | None = Field(default=None, max_length=32)
    replay: Literal["3d", "none"] | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_latency(cls, data: object) -> object:
        if isinstance(data, dict) and data.get("latency_ms") is not None:
            raise ValueError(
                "latency_ms: an eval models no network; it asks at the policy's action_chunk_replan_at"
                " step and swaps the answer in at its action_chunk_valid_len step, the world paused:"
                " leave latency_ms out"
            )
        if isinstance(data, dict) and "latency_ms" in data:
            return {k: v for k, v in data.items() if k != "latency_ms"}
        return data

    @field_validator("trials")
    @classmethod
    def _counts(cls, value: int | dict[str, int] | None) -> int | dict[str, int] | None:
        counts = value.values() if isinstance(value, dict) else [] if value is None else [value]
        if any(isinstance(c, bool) or not 1 <= c <= MAX_TRIALS for c in counts):
            raise ValueError(f"trials is a count of 1 to {MAX_TRIALS} a task")
        if isinstance(value, dict) and len(value) > 1000:
            raise ValueError("trials names at most 1000 tasks")
        return value

    @field_validator("seeds")
    @classmethod
    def _seed_lists(
        cls, value: list[int] | dict[str, list[int]] | None
    ) -> list[int] | dict[str, list[int]] | None:
        lists = value.values() if isinstance(value, dict) else [] if value is None else [value]
        for seeds in lists:
            if not seeds or len(seeds) > 5000:
                raise ValueError("seeds names 1 to 5000 seeds")
            if len(set(seeds)) != len(seeds):
                raise ValueError("seeds names each seed once")
        if isinstance(value, dict) and len(value) > 1000:
            raise ValueError("seeds names at most 1000 tasks")
        return value

    @field_validator("tasks")
    @classmethod
    def _once(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError("tasks names a task twice")
        return value


class Estimate(BaseModel):
    wall_clock_s: float
    cost_usd: float
    vlm_calls: int = 0
    default_timing: bool | None = None
    held_usd: float | None = None


class EvalResponse(BaseModel):
    eval_id: str
    gpus_granted: int = 0
    estimate: Estimate
    arms: int | None = None
    status: str | None = None
    warnings: list[dict[str, Any]] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class EvalDryRunResponse(BaseModel):
    """`dry_run: true`: what would run, nothing filed. `layout.selection` is what one arm plays."""

    estimate: Estimate
    layout: dict[str, Any]
    notes: list[str] = Field(default_factory=list)
    warnings: list[dict[str, Any]] = Field(default_factory=list)


class TaskAgg(BaseModel):
    task: str
    value: float
    n: int


class MetricAgg(BaseModel):
    overall: float
    per_task: list[TaskAgg] = Field(default_factory=list)
    n: int


class ArmReport(BaseModel):
    arm: int
    model: str
    params: dict[str, Scalar] = Field(default_factory=dict)
    metrics: dict[str, MetricAgg] = Field(default_factory=dict)
    episodes: int = 0
    failed: int = 0
    not_run: int = 0
    budget_stopped: bool = False


ParamSource = Literal["cli", "policy", "adapter", "benchmark", "platform", "deployment"]


class ParamUsed(BaseModel):
    """A parameter's value in an arm and who gave it: the eval (`cli`), or the side that declares it."""

    value: Scalar | None = None
    source: ParamSource


class ArmParams(BaseModel):
    """An arm's parameters side by side: every one each side declares, with the value the arm ran with."""

    arm: int
    policy: dict[str, ParamUsed] = Field(default_factory=dict)
    adapter: dict[str, ParamUsed] = Field(default_factory=dict)
    benchmark: dict[str, ParamUsed] = Field(default_factory=dict)
    eval: dict[str, ParamUsed] = Field(default_factory=dict)
    queries: int | None = None
    steps: int | None = None


class EvalTiming(BaseModel):
    cold_start_s: dict[str, float] = Field(default_factory=dict)
    step_ms: dict[str, float] = Field(default_factory=dict)
    batch_size_mean: float | None = None
    steps: int = 0


StopReason = Literal[
    "canceled", "spend_cap", "balance", "deadline", "mismatch", "refused", "queue_timeout", "no_gpu_render"
]


class EvalReport(BaseModel):
    """`GET /v1/eval/{id}`. `metrics` is keyed by the benchmark's own metric names; `success` the share of
    episodes whose last step said success. `yardstick` carries what the contract has no field for: each
    metric's interval, and the mean of task means beside the pooled `overall`."""

    status: Literal["pending", "queued", "running", "completed", "failed", "canceled"]
    metrics: dict[str, MetricAgg]
    cost_usd: float
    dashboard_url: str
    videos: list[str] = Field(default_factory=list)
    incomplete: bool | None = None
    errors: list[str] = Field(default_factory=list)
    arms: list[ArmReport] | None = None
    timing: EvalTiming | None = None
    stop_reason: StopReason | None = None
    arm_params: list[ArmParams] | None = None
    yardstick: dict[str, Any] | None = None


class SettingsChange(BaseModel):
    """`PATCH /v1/deployments/{name}/settings`: keys to change at once, all or none (a None value puts one
    back to what the code says); `rev` the settings the change was made from."""

    model_config = _REQUEST
    changes: dict[str, Scalar | list[str] | None] = Field(min_length=1, max_length=64)
    rev: int | None = Field(default=None, ge=0)


# --- secrets -----------------------------------------------------------------------------------------------


class SecretCreateRequest(BaseModel):
    model_config = _REQUEST
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    env: dict[str, str] = Field(min_length=1, max_length=64)

    @field_validator("env")
    @classmethod
    def _keys(cls, value: dict[str, str]) -> dict[str, str]:
        for key, text in value.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", key):
                raise ValueError(f"env: {key!r} is not an environment variable name")
            if len(text) > 65536:
                raise ValueError(f"env[{key!r}]: at most 65536 characters")
        return value


class SecretInfo(BaseModel):
    name: str
    env_keys: list[str]
    created_at: str
    last_used_at: str | None = None


def build_status(version: HostedVersion) -> Literal["building", "ready", "failed"]:
    """A build as the SDK reads it: building, ready, or failed (a canceled build too, its error saying
    `canceled: ...`)."""
    if version.status == BuildStatus.READY:
        return "ready"
    if version.status == BuildStatus.BUILDING:
        return "building"
    return "failed"


# --- versions --------------------------------------------------------------------------------------------


class RollbackRequest(BaseModel):
    """`POST /v1/deployments/{name}/rollback`: the version to serve (the one before the serving one: None)."""

    model_config = _REQUEST
    version: int | None = Field(default=None, ge=1)


class NameRequest(BaseModel):
    """`POST /v1/deployments/{name}/rename` and `/fork`: the new name."""

    model_config = _REQUEST
    name: str = Field(pattern=NAME)


# --- adapters --------------------------------------------------------------------------------------------


class AdapterRegistration(BaseModel):
    """`POST /v1/adapters` (and `/validate`): an `@seq.adapter` class's name, its class and `module:Class`,
    its one file, the benchmark → policy pairs it converts between, and its constructor's parameters. The
    rules of each are the core's (`core.adapters.checked`), which names the field it refuses."""

    model_config = _REQUEST
    name: str = Field(max_length=200)
    class_name: str = Field(max_length=200)
    handler_ref: str = Field(max_length=300)
    source: str
    replace: bool = False
    pairs: Any = None
    params: dict[str, InferParam] = Field(default_factory=dict)

    @field_validator("params")
    @classmethod
    def _public(cls, params: dict[str, InferParam]) -> dict[str, InferParam]:
        _check_params(params)
        return params

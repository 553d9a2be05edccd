"""Every path of the Sequences door, written once: the routes bind to these, the door's error body claims the
paths under `PREFIXES`, and the gateway's body limit reads which paths take a bundle or a volume's bytes from
here (the core keeps the sizes, not the paths)."""

from __future__ import annotations

import re

API = "/v1"

EVALS = f"{API}/eval"
EVAL = f"{EVALS}/{{eval_id}}"
EVAL_DETAILS = f"{EVAL}/details"
EVAL_EPISODES = f"{EVAL}/episodes"
EVAL_EPISODES_CSV = f"{EVAL}/episodes.csv"
EVAL_LOGS = f"{EVAL}/logs"
EVAL_VIDEO = f"{EVAL}/videos/{{name}}"
EVAL_TRAJECTORY = f"{EVAL}/trajectories/{{name}}"
EVAL_REPLAY = f"{EVAL}/replays/{{index}}"
EVAL_SCENE = f"{EVAL}/scenes/{{sha256}}"
EVAL_CANCEL = f"{EVAL}/cancel"

BENCHMARKS = f"{API}/benchmarks"
BENCHMARKS_VALIDATE = f"{BENCHMARKS}/validate"
BENCHMARK = f"{BENCHMARKS}/{{name}}"
BENCHMARK_TASKS = f"{BENCHMARK}/tasks"
BENCHMARK_EVALS = f"{BENCHMARK}/evals"
BENCHMARK_CANCEL = f"{BENCHMARK}/cancel"
BENCHMARK_LOGS = f"{BENCHMARK}/logs"

DEPLOYMENTS = f"{API}/deployments"
DEPLOYMENTS_VALIDATE = f"{DEPLOYMENTS}/validate"
DEPLOYMENT = f"{DEPLOYMENTS}/{{name}}"
DEPLOYMENT_VERSIONS = f"{DEPLOYMENT}/versions"
DEPLOYMENT_STOP = f"{DEPLOYMENT}/stop"
DEPLOYMENT_START = f"{DEPLOYMENT}/start"
DEPLOYMENT_SETTINGS = f"{DEPLOYMENT}/settings"
DEPLOYMENT_EVALS = f"{DEPLOYMENT}/evals"
DEPLOYMENT_DELETION = f"{DEPLOYMENT}/deletion"
DEPLOYMENT_BUILD = f"{DEPLOYMENT}/build"
DEPLOYMENT_ROLLBACK = f"{DEPLOYMENT}/rollback"
DEPLOYMENT_RENAME = f"{DEPLOYMENT}/rename"
DEPLOYMENT_FORK = f"{DEPLOYMENT}/fork"


def builds(plural: str) -> str:
    """`/v1/benchmarks/{name}/builds` or `/v1/deployments/{name}/builds`."""
    return f"{API}/{plural}/{{name}}/builds"


def version_freeze(plural: str) -> str:
    """`/v1/benchmarks/{name}/versions/{number}/freeze`, or the same of a deployment."""
    return f"{API}/{plural}/{{name}}/versions/{{number}}/freeze"


def version_source(plural: str) -> str:
    """`/v1/benchmarks/{name}/versions/{number}/source`, or the same of a deployment."""
    return f"{API}/{plural}/{{name}}/versions/{{number}}/source"


PRICING = f"{API}/pricing"
TEMPLATES = f"{API}/templates"
TEMPLATE_CODE = f"{TEMPLATES}/{{name}}/code"
ACCOUNT = f"{API}/account"
ACCOUNT_USAGE = f"{ACCOUNT}/usage"
AUDIT = f"{API}/audit"

ADAPTERS = f"{API}/adapters"
ADAPTERS_VALIDATE = f"{ADAPTERS}/validate"
ADAPTER = f"{ADAPTERS}/{{name}}"
ADAPTER_SOURCE = f"{ADAPTER}/source"

SECRETS = f"{API}/secrets"
SECRET = f"{SECRETS}/{{name}}"

VOLUMES = f"{API}/volumes"
VOLUME = f"{VOLUMES}/{{name}}"
VOLUME_UPLOADS = f"{VOLUME}/uploads"
VOLUME_UPLOAD_COMMIT = f"{VOLUME_UPLOADS}/{{upload_id}}/commit"
VOLUME_FILES = f"{VOLUME}/files"
VOLUME_FILE = f"{VOLUME_FILES}/{{path:path}}"

ACT = f"{API}/act"
ACT_CONNECT = f"{ACT}/connect"
ACT_READY = f"{ACT}/ready"
ACT_KEEPALIVE = f"{ACT}/keepalive"
ACT_RELEASE = f"{ACT}/release"
LATENCY = f"{API}/latency"
DEPLOYMENT_ROBOTS = f"{DEPLOYMENT}/robots"
ROBOTS = f"{API}/robots"
ROBOT = f"{ROBOTS}/{{ref}}"
DEPLOYMENT_LABEL = f"{DEPLOYMENT}/episodes/{{episode}}/label"
DEPLOYMENT_CAPTURE_FILES = f"{DEPLOYMENT}/capture/files"
DEPLOYMENT_CAPTURE_FILE = f"{DEPLOYMENT_CAPTURE_FILES}/{{path:path}}"
PLANNER = f"{API}/planners/{{name}}"
PLANNER_KEYS = f"{PLANNER}/keys"
PLANNER_KEY = f"{PLANNER_KEYS}/{{ref}}"
PLANNER_OBSERVE = f"{PLANNER}/observe"

# The signed, resumable targets a volume's files go to (no key: the signed address is the credential).
UPLOAD_TARGETS = f"{API}/volume-uploads"
UPLOAD_TARGET = f"{UPLOAD_TARGETS}/{{upload}}/{{position}}"
UPLOAD_SESSION = f"{UPLOAD_TARGET}/{{session}}"

# The first segment after `/v1` of every path of this contract, those Yardstick serves and those it refuses
# by name (robots, planners, ...): any other path is the Positronic door's.
PREFIXES = (
    "eval", "benchmarks", "deployments", "secrets", "volumes", "volume-uploads", "account", "pricing",
    "models", "templates", "robots", "adapters", "planners", "act", "audit", "usage", "chat", "decide",
    "latency",
)  # fmt: skip
_OURS = re.compile(rf"^{API}/({'|'.join(re.escape(p) for p in PREFIXES)})(/|$)")

# The paths whose bodies carry a code bundle (the bundle's 8 MiB in base64 and its declaration), and those
# that carry a volume's upload declaration or one of its chunks, as patterns of the path.
BUNDLE_BODIES = frozenset({BENCHMARKS, BENCHMARKS_VALIDATE, DEPLOYMENTS, DEPLOYMENTS_VALIDATE})
VOLUME_DECLARATIONS = rf"{VOLUMES}/[^/]+/uploads"
UPLOAD_CHUNKS = rf"{UPLOAD_TARGETS}/[^/]+/[^/]+(/[^/]+)?"


def ours(path: str) -> bool:
    """Whether a request's path is this contract's."""
    return _OURS.match(path) is not None

"""A registration's `image` (the Sequences contract's ImageSpec `{base?, dockerfile?, steps, python?}`):
what it asks to install, or the field it cannot be honoured by, said at once at registration without doing
anything (`plan`). Making the environment is the execution plane's (`worker.boxes.environments.prepare`,
`worker.boxes.image_builds`).

An image has up to three parts, each made only when asked:

    packages   `uv_pip_install` (`pip_install`) steps: requirements — a name (extras, versions, markers) from
               the package index, never a direct URL, file or VCS reference — installed into a Python
               environment of the version's own on the worker's interpreter
    system     a `base` other than the default, `apt_install` or `run_commands` steps, or a `dockerfile`: a
               root filesystem built by podman (`build_of` says how: a Containerfile), whose programs and
               libraries the box then runs on instead of the machine's. Bases come from the install's
               registry mirror (`--registry`): a base that names no registry is looked up there, one that
               names a registry must name one of the install's
    env        `env` steps: variables the code runs with (and later build steps see)

The default image (`{"base": "debian:12-slim", "steps": []}`, or no base at all) runs on the worker's own
system and Python. The code always runs on the worker's Python (an image's own Python, `python: "image"`,
is refused): an image must carry what that Python's standard modules link (a C library as new as the
worker's, libssl, libffi, zlib: any Debian 12 image with `python3` has them).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement

from yardstick.hosted.errors import ImageRefused

DEFAULT_BASE: Final = "debian:12-slim"
KNOWN_STEPS: Final = (
    "uv_pip_install",
    "pip_install",
    "apt_install",
    "run_commands",
    "env",
    "add_local",
    "project",
    "template_files",
)
# Steps a worker honours; the others are refused by name with why.
NOT_BUILT: Final = {
    "add_local": "files reach the box as the version's code: put them in the deployed folder",
    "project": "a project's files reach the box as the version's code: put them in the deployed folder",
    "template_files": "a template's files are written by `seq init` into the folder you deploy",
}
IMAGE_KEYS: Final = ("base", "dockerfile", "steps", "python", "clear_entrypoint")
PIP_STEPS: Final = ("uv_pip_install", "pip_install")
APT_PACKAGE: Final = re.compile(r"^[a-z0-9][a-z0-9+.\-]*(:[a-z0-9]+)?(=[A-Za-z0-9.+~:\-]+)?$")
ENV_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_STEPS: Final = 64
MAX_DOCKERFILE_BYTES: Final = 64 * 1024
APT_RETRIES: Final = "-o Acquire::Retries=5"  # each fetch (a resolver's failure too) tried again, backing off


@dataclass(frozen=True)
class Build:
    """An image's system, as podman builds it: `containerfile` whole (its bases qualified with the mirror's
    registry), `bases` the images its FROM lines pull; `key` names what it builds (the same key, the same
    root filesystem, shared by versions)."""

    containerfile: str
    bases: tuple[str, ...]
    key: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", hashlib.sha256(self.containerfile.encode()).hexdigest()[:24])


def worker_python() -> str:
    """The worker's Python version, as ImageSpec.python writes one ("3.11")."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def plan(image: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The requirements `image` installs (() for none), or ImageRefused naming the first field Yardstick
    cannot honour (every field is read, so a refusal of a later one is said at registration too)."""
    if image is None:
        return ()
    steps = _checked(image)
    return tuple(
        _requirement(text, f"image.steps[{index}].{kind}[{number}]")
        for index, kind, value in steps
        if kind in PIP_STEPS
        for number, text in enumerate(value)
    )


def needs_build(image: Mapping[str, Any] | None) -> bool:
    """Whether `image` asks for a system of its own (a root filesystem built by podman)."""
    if image is None:
        return False
    steps = _checked(image)
    if image.get("dockerfile") is not None or image.get("base") not in (None, DEFAULT_BASE):
        return True
    return any(kind in ("apt_install", "run_commands") for _, kind, _ in steps)


def build_of(image: Mapping[str, Any] | None, mirror: str | None) -> Build | None:
    """How podman builds `image`'s system from the install's registry `mirror` (its URL), or None when it
    runs on the machine's. ImageRefused when it needs one and the install names no mirror, or when its base
    names a registry that is not the mirror."""
    if image is None or not needs_build(image):
        return None
    if mirror is None:
        raise ImageRefused(
            "image.base" if image.get("dockerfile") is None else "image.dockerfile",
            "building an image's system needs the install's registry mirror, and this install names none "
            "(yardstick server --registry URL); an image of uv_pip_install and env steps alone runs without",
        )
    host = urlsplit(mirror).netloc
    dockerfile = image.get("dockerfile")
    if dockerfile is not None:
        return Build(*_qualified_dockerfile(str(dockerfile), host))
    base = _qualified(str(image.get("base") or DEFAULT_BASE), host, "image.base")
    lines = [f"FROM {base}"]
    for _, kind, value in _checked(image):
        if kind == "apt_install":
            packages = " ".join(value)
            lines.append(
                "RUN "
                + json.dumps(
                    [
                        "/bin/sh",
                        "-c",
                        # A mirror's or a resolver's passing failure is tried again, not the build failed.
                        f"apt-get {APT_RETRIES} update -q && DEBIAN_FRONTEND=noninteractive apt-get "
                        f"{APT_RETRIES} install -y -q --no-install-recommends {packages} "
                        "&& rm -rf /var/lib/apt/lists/*",
                    ]
                )
            )
        elif kind == "run_commands":
            lines += ["RUN " + json.dumps(["/bin/sh", "-c", command]) for command in value]
        elif kind == "env":
            lines += [f"ENV {name}={json.dumps(text)}" for name, text in value.items()]
    return Build("\n".join(lines) + "\n", (base,))


def environment_of(image: Mapping[str, Any] | None) -> dict[str, str]:
    """The variables `image`'s env steps set, later steps winning."""
    if image is None:
        return {}
    out: dict[str, str] = {}
    for _, kind, value in _checked(image):
        if kind == "env":
            out.update(value)
    return out


def digest(image: Mapping[str, Any] | None) -> str:
    """A short name for what an image installs, for callers that share environments between versions."""
    return hashlib.sha256(json.dumps([worker_python(), list(plan(image))]).encode()).hexdigest()[:16]


# --- reading a spec ---------------------------------------------------------------------------------


def _checked(image: Mapping[str, Any]) -> list[tuple[int, str, Any]]:
    """Every field of `image` checked: its steps as (index, kind, value), or ImageRefused."""
    if not isinstance(image, Mapping):
        raise ImageRefused("image", f"is an ImageSpec object, not {type(image).__name__}")
    for key in image:
        if key not in IMAGE_KEYS:
            raise ImageRefused(
                f"image.{key}", f"is not a field of an image; they are {', '.join(IMAGE_KEYS)}"
            )
    base, dockerfile = image.get("base"), image.get("dockerfile")
    if base is not None and dockerfile is not None:
        raise ImageRefused("image.dockerfile", "an image has a base or a dockerfile, not both")
    if base is not None and (not isinstance(base, str) or not _REFERENCE.match(base)):
        raise ImageRefused("image.base", f"{base!r} is not an image reference (e.g. 'debian:12-slim')")
    if dockerfile is not None:
        if not isinstance(dockerfile, str) or not dockerfile.strip():
            raise ImageRefused("image.dockerfile", "is the Dockerfile's text")
        if len(dockerfile.encode()) > MAX_DOCKERFILE_BYTES:
            raise ImageRefused("image.dockerfile", f"is at most {MAX_DOCKERFILE_BYTES // 1024} KB")
        if not any(line.strip().upper().startswith("FROM ") for line in dockerfile.splitlines()):
            raise ImageRefused("image.dockerfile", "has no FROM line")
    python = image.get("python")
    if python is not None and python != worker_python():
        raise ImageRefused(
            "image.python",
            f"{python!r} cannot be honoured: the code runs on the worker's Python {worker_python()} "
            "(shown in the box over the image's system)",
        )
    steps = image.get("steps") or []
    if not isinstance(steps, list):
        raise ImageRefused("image.steps", f"is a list of steps, not {type(steps).__name__}")
    if len(steps) > MAX_STEPS:
        raise ImageRefused("image.steps", f"holds at most {MAX_STEPS} steps")
    return [_step(index, step) for index, step in enumerate(steps)]


def _step(index: int, step: Any) -> tuple[int, str, Any]:
    where = f"image.steps[{index}]"
    if not isinstance(step, Mapping) or len(step) == 0:
        raise ImageRefused(where, 'is a step object, e.g. {"uv_pip_install": ["gymnasium"]}')
    kind = next((k for k in step if k in KNOWN_STEPS), None)
    if kind is None:
        raise ImageRefused(where, f"is no known step; the steps are {', '.join(KNOWN_STEPS)}")
    field_name, value = f"{where}.{kind}", step[kind]
    if kind in NOT_BUILT:
        raise ImageRefused(field_name, f"is not a build step here: {NOT_BUILT[kind]}")
    if kind == "env":
        if not isinstance(value, Mapping):
            raise ImageRefused(field_name, 'is an object of variables, e.g. {"MUJOCO_GL": "egl"}')
        for name, text in value.items():
            if not isinstance(name, str) or not ENV_NAME.match(name):
                raise ImageRefused(f"{field_name}.{name}", "is a variable's name: letters, digits and _")
            if not isinstance(text, str) or any(ord(c) < 32 for c in text):
                raise ImageRefused(f"{field_name}.{name}", "is a string of one line")
        return index, kind, dict(value)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ImageRefused(field_name, "is a list of strings")
    if kind == "apt_install":
        for number, package in enumerate(value):
            if not APT_PACKAGE.match(package):
                raise ImageRefused(
                    f"{field_name}[{number}]", f"{package!r} is not a Debian package name (e.g. 'ffmpeg')"
                )
    if kind == "run_commands":
        if step.get("secrets"):
            raise ImageRefused(
                f"{where}.secrets", "a build step sees no secret here: secrets reach the code when it runs"
            )
        for number, command in enumerate(value):
            if not command.strip():
                raise ImageRefused(f"{field_name}[{number}]", "is a shell command")
    return index, kind, list(value)


_REFERENCE: Final = re.compile(r"^[a-z0-9][a-z0-9._\-/:]*(@sha256:[0-9a-f]{64})?$")


def _qualified(reference: str, host: str, field_name: str) -> str:
    """`reference` on the mirror: one that names no registry is looked up there; one that names a registry
    must name the mirror's."""
    first, _, rest = reference.partition("/")
    names_registry = bool(rest) and ("." in first or ":" in first or first == "localhost")
    if not names_registry:
        return f"{host}/{reference}"
    if first != host:
        raise ImageRefused(
            field_name,
            f"{reference!r} names registry {first}: this install pulls bases only from its mirror {host}",
        )
    return reference


def _qualified_dockerfile(text: str, host: str) -> tuple[str, tuple[str, ...]]:
    """The Dockerfile with each FROM's image on the mirror (a stage named earlier is left as it is), and
    the images it pulls."""
    stages: set[str] = set()
    bases: list[str] = []
    out: list[str] = []
    for line in text.splitlines():
        words = line.split()
        if words and words[0].upper() == "FROM":
            options = [w for w in words[1:] if w.startswith("--")]
            rest = [w for w in words[1:] if not w.startswith("--")]
            if any(option.startswith("--platform") for option in options):
                raise ImageRefused("image.dockerfile", "FROM --platform: images are built for this machine")
            if not rest:
                raise ImageRefused("image.dockerfile", f"{line.strip()!r} names no image")
            image = rest[0] if rest[0] in stages else _qualified(rest[0], host, "image.dockerfile")
            if rest[0] not in stages:
                bases.append(image)
            if len(rest) >= 3 and rest[1].upper() == "AS":
                stages.add(rest[2])
            line = " ".join(["FROM", image, *rest[1:]])
        out.append(line)
    return "\n".join(out) + "\n", tuple(bases)


def _requirement(text: Any, field_name: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ImageRefused(field_name, "is a requirement string, e.g. 'gymnasium==1.0'")
    if text.lstrip().startswith("-"):
        raise ImageRefused(field_name, f"{text!r} is a pip option; a step lists requirements only")
    try:
        parsed = Requirement(text)
    except InvalidRequirement as exc:
        raise ImageRefused(field_name, f"{text!r} is not a requirement ({exc})") from None
    if parsed.url is not None:
        raise ImageRefused(
            field_name,
            f"{text!r} names a URL: a requirement is a name with versions from the package index (a direct "
            "URL, file or VCS reference is not installed)",
        )
    return text.strip()

"""A registration's `image` (the Sequences contract's ImageSpec `{base?, dockerfile?, steps, python?}`):
what it asks to install, or the field it cannot be honoured by, said at once at registration without doing
anything (`plan`). Making the environment is the execution plane's (`worker.boxes.environments.prepare`).

Yardstick builds no container images yet. The default image (`{"base": "debian:12-slim", "steps": []}`, or no
base at all) runs on the worker's own Python; `uv_pip_install` steps name requirements — a name (extras,
versions, markers) from the package index, never a direct URL, file or VCS reference. Every other step,
a Dockerfile, a base other than the default and a Python other than the worker's are refused with
`ImageRefused`, saying which: building images from a spec comes with policy images.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping
from typing import Any, Final

from packaging.requirements import InvalidRequirement, Requirement

from yardstick.hosted.errors import ImageRefused

DEFAULT_BASE: Final = "debian:12-slim"
LATER: Final = "building images from a spec comes with policy images"
KNOWN_STEPS: Final = (
    "uv_pip_install",
    "apt_install",
    "run_commands",
    "env",
    "add_local",
    "project",
    "template_files",
)
IMAGE_KEYS: Final = ("base", "dockerfile", "steps", "python", "clear_entrypoint")


def worker_python() -> str:
    """The worker's Python version, as ImageSpec.python writes one ("3.11")."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def plan(image: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The requirements `image` installs (() for the default image), or ImageRefused naming the first
    field Yardstick cannot honour yet."""
    if image is None:
        return ()
    if not isinstance(image, Mapping):
        raise ImageRefused("image", f"is an ImageSpec object, not {type(image).__name__}")
    for key in image:
        if key not in IMAGE_KEYS:
            raise ImageRefused(
                f"image.{key}", f"is not a field of an image; they are {', '.join(IMAGE_KEYS)}"
            )
    if image.get("dockerfile") is not None:
        raise ImageRefused("image.dockerfile", f"a Dockerfile cannot be built yet: {LATER}")
    base = image.get("base")
    if base not in (None, DEFAULT_BASE):
        raise ImageRefused(
            "image.base", f"{base!r} cannot be honoured yet ({LATER}); the default {DEFAULT_BASE!r} runs here"
        )
    python = image.get("python")
    if python is not None and python != worker_python():
        raise ImageRefused(
            "image.python",
            f"{python!r} cannot be honoured yet: this worker runs Python {worker_python()} ({LATER})",
        )
    steps = image.get("steps") or []
    if not isinstance(steps, list):
        raise ImageRefused("image.steps", f"is a list of steps, not {type(steps).__name__}")
    requirements: list[str] = []
    for index, step in enumerate(steps):
        field = f"image.steps[{index}]"
        if not isinstance(step, Mapping) or len(step) == 0:
            raise ImageRefused(field, 'is a step object, e.g. {"uv_pip_install": ["gymnasium"]}')
        kind = next((k for k in step if k in KNOWN_STEPS), None)
        if kind is None:
            raise ImageRefused(field, f"is no known step; the steps are {', '.join(KNOWN_STEPS)}")
        if kind != "uv_pip_install":
            raise ImageRefused(f"{field}.{kind}", f"cannot be honoured yet: {LATER}")
        packages = step[kind]
        if not isinstance(packages, list):
            raise ImageRefused(f"{field}.uv_pip_install", "is a list of requirements")
        for number, text in enumerate(packages):
            requirements.append(_requirement(text, f"{field}.uv_pip_install[{number}]"))
    return tuple(requirements)


def _requirement(text: Any, field: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ImageRefused(field, "is a requirement string, e.g. 'gymnasium==1.0'")
    if text.lstrip().startswith("-"):
        raise ImageRefused(field, f"{text!r} is a pip option; a step lists requirements only")
    try:
        parsed = Requirement(text)
    except InvalidRequirement as exc:
        raise ImageRefused(field, f"{text!r} is not a requirement ({exc})") from None
    if parsed.url is not None:
        raise ImageRefused(
            field,
            f"{text!r} names a URL: a requirement is a name with versions from the package index (a direct "
            "URL, file or VCS reference is not installed)",
        )
    return text.strip()


def digest(image: Mapping[str, Any] | None) -> str:
    """A short name for what an image installs, for callers that share environments between versions."""
    return hashlib.sha256(json.dumps([worker_python(), list(plan(image))]).encode()).hexdigest()[:16]

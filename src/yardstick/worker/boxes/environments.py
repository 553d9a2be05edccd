"""An image's `uv_pip_install` steps made into the Python its code runs with (`prepare`); what an image asks,
or the field it is refused by, is `hosted.images.plan`'s to say. The default image runs on the worker's own
Python; requirements install into a virtual environment of the version's own, made from the worker's
interpreter with its packages visible (`--system-site-packages`, and the worker's own site folder, where
yardstick and numpy are), once per version folder (a second call finds it made).

No tenant code runs while it is made, and none with a network. The platform's own pip downloads wheels only
(`--only-binary :all:`: no source distribution's build backend runs), in a box that sees the machine's
package-index settings and writes only the download folder; then pip installs those wheels, offline, in a
box with no network that writes only the environment. A package with no wheel for this machine (an sdist
only) is refused, naming it. The record that an environment is made is kept beside it, never in it, so
nothing the install wrote can stand in for it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import site
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from yardstick.hosted.errors import ImageRefused
from yardstick.hosted.images import build_of, plan, worker_python
from yardstick.hosted.limits import BoxLimits
from yardstick.worker.boxes import sandbox
from yardstick.worker.boxes.image_builds import BuildFailed, ImageBuilder
from yardstick.worker.boxes.image_builds import locked as _locked

INSTALL_TIMEOUT_S: Final = 900.0
# The machine's own package-index settings, handed to the install (its box's environment is otherwise empty).
INDEX_ENV: Final = (
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "PIP_TRUSTED_HOST",
    "PIP_CERT",
    "PIP_CONSTRAINT",
    "PIP_DEFAULT_TIMEOUT",
    "PIP_CONFIG_FILE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
)
# Beside the environment's folder (`<env>.json`), where no box writes.
MARKER_SUFFIX: Final = ".json"
NO_WHEEL: Final = re.compile(r"Could not find a version that satisfies the requirement ([^\s(]+)")


@dataclass(frozen=True)
class Environment:
    """The Python a version runs with: `python` the interpreter, `folder` its virtual environment (None:
    the worker's own Python), `requirements` what was installed into it; `root` the image's system its box
    runs on (None: the machine's) and `build_log` what building that printed."""

    python: str
    folder: Path | None = None
    requirements: tuple[str, ...] = ()
    root: Path | None = None
    build_log: str = ""


class PrepareFailed(RuntimeError):
    """An environment whose install did not succeed (a package the index does not have, a build that
    failed): the message ends with what pip said."""


def prepare(
    image: Mapping[str, Any] | None,
    dest: Path,
    *,
    timeout_s: float = INSTALL_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
    hidden: tuple[Path, ...] = (),
    limits: BoxLimits | None = None,
    stop: threading.Event | None = None,
    builder: ImageBuilder | None = None,
    mirror: str | None = None,
) -> Environment:
    """The Environment `image` runs in, made in `dest` (the version's environment folder) when it installs
    anything. Idempotent: a folder already made for the same requirements is returned as it is; one left
    half-made (a crash, a failed install) is made again. `hidden`: folders the download's box must not see
    (the platform's data folder); `limits` what each box may use; `stop`, once set, kills the install's box.
    An image with a system of its own is built by `builder` from the install's registry `mirror` first.
    Raises ImageRefused, or PrepareFailed."""
    requirements = plan(image)
    system = _system(image, builder, mirror, stop)
    if not requirements:
        return replace(Environment(python=sys.executable), **system)
    dest = Path(dest).resolve()
    dest.parent.mkdir(parents=True, exist_ok=True)
    wanted = {"python": worker_python(), "requirements": list(requirements)}
    with _locked(dest):
        if _made(dest) == wanted and dest.is_dir():
            made = Environment(python=str(_python_of(dest)), folder=dest, requirements=requirements)
            return replace(made, **system)
        marker(dest).unlink(missing_ok=True)
        shutil.rmtree(dest, ignore_errors=True)
        try:
            boxes = _Boxes(timeout_s, dict(env or {}), hidden, limits or BoxLimits(), stop)
            _make(dest, requirements, boxes)
        except BaseException:
            shutil.rmtree(dest, ignore_errors=True)
            raise
        # Written last: a folder with its record is a folder whose install finished.
        marker(dest).write_text(json.dumps(wanted))
    return replace(
        Environment(python=str(_python_of(dest)), folder=dest, requirements=requirements), **system
    )


def _system(
    image: Mapping[str, Any] | None,
    builder: ImageBuilder | None,
    mirror: str | None,
    stop: threading.Event | None,
) -> dict[str, Any]:
    """The root and build log of `image`'s own system, when it has one ({} when it runs on the machine's)."""
    build = build_of(image, mirror)
    if build is None:
        return {}
    if builder is None:
        raise ImageRefused(
            "image.base", "this worker builds no image's system: install podman and runc (make containers)"
        )
    try:
        root, log = builder.root(build, stop)
    except BuildFailed as failed:
        raise PrepareFailed(f"the image's system was not built: {failed}") from None
    return {"root": root, "build_log": log}


def _python_of(venv: Path) -> Path:
    return venv / "bin" / "python"


def marker(dest: Path) -> Path:
    """Where the record that `dest` is made is kept: beside it."""
    return dest.with_name(dest.name + MARKER_SUFFIX)


def _made(dest: Path) -> Any:
    try:
        return json.loads(marker(dest).read_text())
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class _Boxes:
    """How an install's boxes run: for how long, with what environment, hiding what, within what limits,
    and the event that stops them (a cancelled build)."""

    timeout_s: float
    env: Mapping[str, str]
    hidden: tuple[Path, ...]
    limits: BoxLimits
    stop: threading.Event | None

    def run(self, box: sandbox.Box, argv: list[str]) -> sandbox.Finished:
        return sandbox.run(replace(box, limits=self.limits), argv, timeout_s=self.timeout_s, stop=self.stop)


def _make(dest: Path, requirements: tuple[str, ...], boxes: _Boxes) -> None:
    # The worker's own interpreter behind the environment (not a venv's: a venv of a venv is of its base).
    base = getattr(sys, "_base_executable", sys.executable)
    made = subprocess.run(
        [base, "-m", "venv", "--system-site-packages", "--without-pip", str(dest)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    if made.returncode != 0:
        raise PrepareFailed(f"making the environment failed: {made.stderr.decode(errors='replace')[-2000:]}")
    _see_worker_packages(dest)
    wheels = Path(tempfile.mkdtemp(prefix="yardstick-wheels-"))
    try:
        _download(wheels, requirements, boxes)
        _install(dest, wheels, requirements, boxes)
    finally:
        shutil.rmtree(wheels, ignore_errors=True)


def _download(wheels: Path, requirements: tuple[str, ...], boxes: _Boxes) -> None:
    """The requirements' wheels (and their dependencies'), fetched by the platform's own pip into `wheels`."""
    index = {k: v for k, v in os.environ.items() if k in INDEX_ENV}
    box = sandbox.Box(
        python=sys.executable,  # shown again over the box's fresh /tmp (an install under /tmp)
        writable=(wheels,),
        hidden=boxes.hidden,
        network=True,
        view="machine",  # the machine's pip settings and local indexes; only the platform's pip runs here
        env={**index, **boxes.env, "PIP_NO_INPUT": "1"},
    )
    argv = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--only-binary", ":all:"]
    argv += ["--dest", str(wheels), *requirements]
    finished = boxes.run(box, argv)
    said = _said(finished)
    if finished.timed_out:
        raise PrepareFailed(
            f"fetching {', '.join(requirements)} took more than {boxes.timeout_s:g} s and was cut"
        )
    if finished.returncode != 0:
        missing = NO_WHEEL.search(said)
        if missing:
            raise PrepareFailed(
                f"{missing.group(1)}: the package index has no wheel of it for this machine (Python "
                f"{worker_python()}); a source distribution is not built, since building one runs its code "
                f"with a network: {said}"
            )
        raise PrepareFailed(f"fetching {', '.join(requirements)} failed: {said}")


def _install(dest: Path, wheels: Path, requirements: tuple[str, ...], boxes: _Boxes) -> None:
    """The fetched wheels installed into the environment, offline, by the worker's pip in a box."""
    box = sandbox.Box(python=sys.executable, readable=(wheels,), writable=(dest,), env={"PIP_NO_INPUT": "1"})
    # The worker's pip installs into the environment's interpreter: the environment needs none of its own.
    argv = [sys.executable, "-m", "pip", "--isolated", "--python", str(_python_of(dest)), "install"]
    argv += [
        "--disable-pip-version-check",
        "--no-warn-script-location",
        "--no-index",
        "--only-binary",
        ":all:",
    ]
    argv += ["--find-links", str(wheels), *requirements]
    finished = boxes.run(box, argv)
    if finished.timed_out:
        raise PrepareFailed(
            f"installing {', '.join(requirements)} took more than {boxes.timeout_s:g} s and was cut"
        )
    if finished.returncode != 0:
        raise PrepareFailed(f"installing {', '.join(requirements)} failed: {_said(finished)}")


def _said(finished: sandbox.Finished) -> str:
    return (finished.stderr or finished.stdout).decode("utf-8", "replace").strip()[-2000:]


def _see_worker_packages(dest: Path) -> None:
    """Make the worker's own site folders (a virtual environment's, where yardstick is) visible to the new
    environment, after its own: its own installs win for the user's code, yardstick and numpy are there."""
    own = [Path(p) for p in site.getsitepackages() if Path(p).is_dir()]
    found = sorted((dest / "lib").glob("python*/site-packages"))
    if not found:
        raise PrepareFailed(f"{dest}: the new environment has no site-packages folder")
    lines = [f"import site; site.addsitedir({str(path)!r})" for path in own]
    (found[0] / "zz-yardstick-worker.pth").write_text("\n".join(lines) + "\n")

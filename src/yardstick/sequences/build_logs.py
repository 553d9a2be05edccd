"""A version's build as the SDK reads it back: `seq benchmark logs NAME[@vN] --build` (GET
/v1/benchmarks/{name}/logs) and `seq policy logs NAME[@vN] --build` (GET /v1/deployments/{name}/build).

A build here has two steps: `image` (the version's environment: its system built by podman when the image
has one, its declared packages installed in a box of their own, or nothing to install) and `check` (its
code imported, built and tried in a box). What the check printed is kept with the version (its last 4 KB,
secrets masked when the build ended), and so is how long each of its stages took; these read that record,
nothing more.
"""

from __future__ import annotations

from typing import Any, Final

from yardstick.store.models import HostedVersion
from yardstick.store.states import BuildStatus

STEPS: Final = ("image", "check")


def _state(version: HostedVersion) -> str:
    return {BuildStatus.BUILDING: "building", BuildStatus.READY: "ready"}.get(version.status, "failed")


def _failed_step(version: HostedVersion) -> str | None:
    """The step a failed build stopped in: its environment's, or the check's."""
    if version.status != BuildStatus.FAILED:
        return None
    return "image" if (version.error or "").startswith("image:") else "check"


def _log(version: HostedVersion) -> str:
    """What the build did, a line, then what its check printed: a build whose code printed nothing still
    says what was tried (the SDK reads an empty log as "built before builds reported one")."""
    checked = version.checked or {}
    if version.status == BuildStatus.BUILDING:
        head = "building: its environment, then the check of its code in a box"
    elif version.status == BuildStatus.READY:
        took = ", ".join(
            f"{step.removesuffix('_s').replace('_', ' ')} {seconds:.3f} s"
            for step, seconds in (checked.get("timing") or {}).items()
            if isinstance(seconds, int | float)
        )
        head = "check passed: its code imported, built and tried in a box" + (f" ({took})" if took else "")
    else:
        head = f"build failed: {version.error}"
    printed = str(checked.get("log") or "").strip("\n")
    built = str(checked.get("image_log") or "").strip("\n")
    system = f"{head}\nimage: its system built by podman\n{built}" if built else head
    return f"{system}\n{printed}" if printed else f"{system}\n(its code printed nothing)"


def _lines(version: HostedVersion, stage: str | None = None) -> list[dict[str, Any]]:
    """The check's printed lines, each stamped with when the build ended (the check keeps no time a line)."""
    at = (version.built_at or version.created_at).timestamp()
    said = [line for line in _log(version).splitlines() if line.strip()]
    return [{"ts": at, "line": line, **({"stage": stage} if stage else {})} for line in said]


def benchmark_build(name: str, version: HostedVersion, latest: int) -> dict[str, Any]:
    """`GET /v1/benchmarks/{name}/logs`: one version's build, its phases, its check and its log."""
    checked = version.checked or {}
    phases = [{"phase": "queued", "at": version.created_at.timestamp()}]
    if version.built_at is not None:
        phases.append({"phase": _state(version), "at": version.built_at.timestamp()})
    check: dict[str, Any] = {}
    if checked:
        check = {
            "ok": version.status == BuildStatus.READY,
            "on": "cpu",
            "reason": version.error if version.status == BuildStatus.FAILED else None,
            "timing": checked.get("timing") or {},
        }
    return {
        "benchmark": name,
        "version": version.number,
        "latest": latest,
        "status": _state(version),
        "error": version.error,
        "phases": phases,
        "check": check,
        "log": _log(version),
        "lines": _lines(version),
    }


def deployment_build(name: str, version: HostedVersion) -> dict[str, Any]:
    """`GET /v1/deployments/{name}/build`: one version's build, step by step, with the check's lines."""
    failed = _failed_step(version)
    took = (version.built_at - version.created_at).total_seconds() if version.built_at is not None else None
    checked = version.checked or {}
    stages = []
    for step in STEPS:
        if version.status == BuildStatus.BUILDING:
            state = "running" if step == "check" else "done"
        elif failed == step:
            state = "failed"
        elif failed == "image":
            state = "skipped"
        else:
            state = "done"
        summary = ("its environment made" if step == "image" and checked.get("python") else None) or (
            "imported, built and tried in a box" if step == "check" and state == "done" else None
        )
        stage: dict[str, Any] = {"stage": step, "state": state, "summary": summary}
        if step == "check" and took is not None:
            stage["duration_s"] = round(took, 3)
        if state == "failed":
            stage["error"] = {"message": version.error, "hint": None}
        stages.append(stage)
    return {
        "deployment": name,
        "version": version.number,
        "state": _state(version),
        "failed_stage": failed,
        "stages": stages,
        "lines": _lines(version, "check"),
    }

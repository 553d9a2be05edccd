"""The build check of a registration, in a box: does the uploaded class import, declare what it must, build,
and (a benchmark) reset every task at its first seed and step it?

`check_benchmark` and `check_policy` run `yardstick.worker.boxes.check_runner` boxed (no network, the bundle's
folder read-only, a scratch of its own) and return a `Checked`, a plain record the registry stores as JSON:
`ready` with the declaration read, or `failed` with the reason — the exception and where in the user's files
it was raised, or that the check was cut at its time limit. Nothing the user's code does can fail the caller:
a crash, a hang or garbage on its channel all come back as `failed`.

The verdict is what the platform saw, not what the box said: `ready` needs the box's answer to be the one
line on its channel and the box to have exited 0 on its own within its time (code that prints a "ready"
of its own and then crashes, hangs or prints again is `failed`); only the answer's known fields are kept.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from yardstick.hosted.limits import BoxLimits, size
from yardstick.worker.boxes import inbox, sandbox

DEFAULT_TIMEOUT_S: Final = 120.0
# What of an answer is kept: a declaration is plain data of modest size.
MAX_ANSWER_BYTES: Final = 256 * 1024
Status = Literal["ready", "failed"]


@dataclass(frozen=True)
class Checked:
    """What a build check came to. `declaration` is what the class declares (see `declaration.py`), when
    the check got as far as reading it; `stage` where a failure happened (import, declaration, build, reset,
    step, close, or "box" for the box itself: cut, crashed, or said nothing readable); `warnings` what
    passed with a doubt; `timing` seconds per stage; `log` the end of what the code printed."""

    status: Status
    kind: Literal["benchmark", "policy"]
    handler_ref: str
    error: str | None = None
    stage: str | None = None
    declaration: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    timing: dict[str, float] = field(default_factory=dict)
    log: str = ""

    @property
    def ready(self) -> bool:
        return self.status == "ready"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Checked:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def check_benchmark(
    folder: Path,
    handler_ref: str,
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    python: str | None = None,
    hidden: tuple[Path, ...] = (),
    mounts: Sequence[tuple[Path, str]] = (),
    limits: BoxLimits | None = None,
    stop: threading.Event | None = None,
    root: Path | None = None,
) -> Checked:
    """Check a benchmark class of an unpacked bundle (`folder`, its import root). `env` is the box's
    environment (secrets arrive so); `python` the interpreter of its prepared environment (default: this
    one's); `hidden` folders the box must not see; `mounts` the folders it reads at places of its own (its
    assets: (folder, place)); `limits` what the box may use; `stop`, once set, kills the box (a cancel);
    `root` the image's system it runs on (default: the machine's)."""
    return _check(
        "benchmark", folder, handler_ref, env, timeout_s, python, hidden, tuple(mounts), limits, stop, root
    )


def check_policy(
    folder: Path,
    handler_ref: str,
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    python: str | None = None,
    hidden: tuple[Path, ...] = (),
    mounts: Sequence[tuple[Path, str]] = (),
    limits: BoxLimits | None = None,
    stop: threading.Event | None = None,
    root: Path | None = None,
) -> Checked:
    """Check a policy class: import, declaration, build (its constructor)."""
    return _check(
        "policy", folder, handler_ref, env, timeout_s, python, hidden, tuple(mounts), limits, stop, root
    )


def _check(
    kind: Literal["benchmark", "policy"],
    folder: Path,
    handler_ref: str,
    env: Mapping[str, str] | None,
    timeout_s: float,
    python: str | None,
    hidden: tuple[Path, ...],
    mounts: tuple[tuple[Path, str], ...],
    limits: BoxLimits | None,
    stop: threading.Event | None,
    system: Path | None,
) -> Checked:
    def failed(stage: str, error: str, log: str = "") -> Checked:
        return Checked(status="failed", kind=kind, handler_ref=handler_ref, stage=stage, error=error, log=log)

    if not inbox.HANDLER_REF.fullmatch(handler_ref):
        return failed("import", f"handler_ref: {handler_ref!r} is not {inbox.HANDLER_RULE}")
    root = Path(folder).resolve()
    held = limits or BoxLimits()
    box = sandbox.Box(
        readable=(root,),
        python=python or sys.executable,
        hidden=hidden,
        env={**(env or {}), "PYTHONPATH": inbox.python_path(root)},
        mounts=mounts,
        limits=held,
        root=system,
    )
    argv = [
        python or sys.executable,
        "-m",
        "yardstick.worker.boxes.check_runner",
        kind,
        handler_ref,
        str(root),
    ]
    finished = sandbox.run(box, argv, timeout_s=timeout_s, stop=stop)
    log = finished.stderr.decode("utf-8", "replace")[-4000:]
    if stop is not None and stop.is_set():
        return failed("box", "the check was stopped (its build was cancelled)", log)
    if finished.timed_out:
        return failed("box", f"the check did not finish within {timeout_s:g} s and was cut", log)
    if finished.out_of_memory:
        return failed(
            "box", f"the check passed its memory limit ({size(held.memory_bytes)}) and was killed", log
        )
    lines = finished.stdout.decode("utf-8", "replace").strip().splitlines()
    answer = _answer(lines)
    if answer is None or finished.returncode != 0:
        how = (
            f"exited with status {finished.returncode}"
            if finished.returncode >= 0
            else (f"was killed by signal {-finished.returncode}")
        )
        said = (
            "without an answer"
            if not lines
            else "with more than its answer on its channel"
            if len(lines) > 1
            else "with an answer it could not have given"
            if answer is None
            else "after its answer"
        )
        return failed("box", f"the check's process {how} {said}", log)
    declaration = answer.get("declaration")
    return Checked(
        status=answer["status"],
        kind=kind,
        handler_ref=handler_ref,
        error=_text(answer.get("error")),
        stage=_text(answer.get("stage")),
        declaration=declaration if isinstance(declaration, dict) else None,
        warnings=[str(w)[:2000] for w in answer.get("warnings") or [] if isinstance(w, str)][:50],
        timing={
            str(k): float(v) for k, v in (answer.get("timing") or {}).items() if isinstance(v, int | float)
        },
        log=log,
    )


def _answer(lines: list[str]) -> dict[str, Any] | None:
    """The check's answer: its channel's one line, a JSON object of a known status, of modest size."""
    if len(lines) != 1 or len(lines[0]) > MAX_ANSWER_BYTES:
        return None
    try:
        answer = json.loads(lines[0])
    except ValueError:
        return None
    if not isinstance(answer, dict) or answer.get("status") not in ("ready", "failed"):
        return None
    return answer


def _text(value: Any) -> str | None:
    return None if value is None else str(value)

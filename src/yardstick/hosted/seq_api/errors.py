"""The refusals of Yardstick's `seq`, named as the Sequences SDK names them, and each one a Yardstick
`SpecError` as well: it names the field and the rule, and Yardstick's CLI shows it as any bad declaration."""

from __future__ import annotations

import json
from typing import Any

from yardstick.sdk.errors import SpecError


class SeqAuthoringError(SpecError):
    """Something wrong with how a `@seq.*` class is written, found where it is written."""


class PolicyDefinitionError(SeqAuthoringError):
    """A `@seq.policy` class, or an argument of its decorators, that cannot be run."""


class BenchmarkDefinitionError(SeqAuthoringError):
    """A `@seq.benchmark` class, or an argument of its decorators, that cannot be run."""


class AdapterDefinitionError(SeqAuthoringError):
    """A `@seq.adapter` class that cannot be run: a method missing, one taking other than the one value it
    is handed, pairs that break their rules."""


class GpuRenderError(RuntimeError):
    """Raised by a benchmark whose cameras cannot be drawn on this machine's card (`gl`, `backend`, `egl`:
    what it found). Yardstick fails the benchmark's setup with it, as any other error of its constructor."""

    def __init__(
        self,
        message: str | None = None,
        *,
        gl: str | None = None,
        backend: str | None = None,
        egl: str | None = None,
    ) -> None:
        self.gpu_render: dict[str, Any] = {"gl": gl, "backend": backend, "egl": egl}
        super().__init__(f"{message or 'this GPU cannot draw the cameras'}: {json.dumps(self.gpu_render)}")

"""The templates Yardstick ships for `seq init`: a Meta-World policy, a LIBERO benchmark and a plain Gymnasium
benchmark, each a folder under `templates/` the SDK unpacks and deploys as it is.

`GET /v1/templates` lists them with the version each channel points at (no key needed, as the contract's);
`GET /v1/templates/{name}/code?ref=stable|beta|vN` answers one version's files as a tar.gz, its version in
`X-Template-Version`. Each template has one version here, `v1`, the stable one: no beta. A name Yardstick
does not ship is answered 404 "no template named ..." (the words the SDK reads as "none here"); a version it
does not have, 404 naming the versions it has.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Final

from fastapi import Query
from fastapi.responses import JSONResponse, Response

from yardstick.core.refusals import Listed, not_found
from yardstick.hosted.bundle import pack_bytes
from yardstick.http.routing import door_router, refusals
from yardstick.sequences import paths
from yardstick.sequences.errors import SEQUENCES

SHELF: Final = Path(__file__).parent / "templates"
VERSION: Final = "v1"
CHANNELS: Final = {"stable": VERSION}
VERSION_HEADER: Final = "X-Template-Version"


@dataclass(frozen=True)
class Template:
    name: str
    kind: str  # "policy" or "benchmark": the file it deploys is policy.py or benchmark.py
    description: str

    @property
    def folder(self) -> Path:
        return SHELF / self.name


TEMPLATES: Final = {
    t.name: t
    for t in (
        Template("metaworld-policy", "policy", "Meta-World's scripted expert, to replace with your model"),
        Template("libero-benchmark", "benchmark", "LIBERO-10 on the platform's LIBERO, to narrow or reshape"),
        Template("gym-benchmark", "benchmark", "a Gymnasium environment (CartPole) as a benchmark"),
    )
}

router = door_router(SEQUENCES, tags=["sequences: templates"])


@router.get(paths.TEMPLATES)
def listed() -> JSONResponse:
    """The templates, each with the version its channels point at."""
    rows = [
        {"name": t.name, "kind": t.kind, "description": t.description, "stable": VERSION, "beta": None}
        for t in TEMPLATES.values()
    ]
    return JSONResponse({"data": rows})


@router.get(paths.TEMPLATE_CODE, response_class=Response, responses=refusals(404))
def code(name: str, ref: Annotated[str, Query(max_length=32)] = "stable") -> Response:
    """One version's files, as a tar.gz whose members are the folder's files."""
    template = TEMPLATES.get(name)
    if template is None:
        raise not_found(f"no template named {name!r}", listed=[Listed("templates", tuple(sorted(TEMPLATES)))])
    version = CHANNELS.get(ref, ref)
    if version != VERSION:
        raise not_found(
            f"ref: template {name!r} has no {ref!r}: it has {VERSION}, the stable one (no beta)",
            listed=[Listed("versions", (VERSION,))],
        )
    return Response(
        pack_bytes(template.folder), media_type="application/gzip", headers={VERSION_HEADER: VERSION}
    )
